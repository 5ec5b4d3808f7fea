#!/bin/sh
# SPDX-License-Identifier: MIT
# `pip install ./python` works, offline (no index, no build isolation: the
# build backend is the interpreter's own setuptools), into a virtual
# environment; the installed package, not the source tree, then passes
# test_basic against the library and daemon of the build tree.
#   pip-install.sh PYTHON SOURCE_DIR TESTS_DIR   (CUFLAGD, CUFLAG_LIBRARY set)
set -eu
py=$1 src=$2 tests=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A venv that sees the interpreter's site-packages, for setuptools (and
# wheel, which setuptools before 70.1 builds wheels with).
if ! "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1 ||
	! "$tmp/venv/bin/python" -c 'import setuptools, wheel' 2>>"$tmp/venv.log"; then
	echo "$py: no venv with pip, setuptools and wheel here" \
		"(python3-venv, python3-setuptools, python3-wheel): skipped"
	cat "$tmp/venv.log"
	exit 77
fi
# From a copy: a build leaves build/ and *.egg-info beside the sources.
cp -r "$src" "$tmp/python"
rm -rf "$tmp/python/build" "$tmp/python"/*.egg-info
"$tmp/venv/bin/pip" install --no-index --no-build-isolation --quiet "$tmp/python"
rm -rf "$tmp/python"
unset PYTHONPATH
cd "$tests"
where=$("$tmp/venv/bin/python" -c 'import cuflag; print(cuflag.__file__)')
case $where in
"$tmp/venv/"*) echo "cuflag imported from the venv: $where" ;;
*) echo "cuflag imported from $where, not from the venv"; exit 1 ;;
esac
"$tmp/venv/bin/python" -m unittest test_basic 2>&1 | tail -3
