#!/bin/sh
# SPDX-License-Identifier: MIT
# Every test module of the package on Python VERSION (the first interpreter
# find-python.sh names), against the cuflagd and library of the build tree
# (CUFLAGD, CUFLAG_LIBRARY, PYTHONPATH set as for the other python tests).
# 77 (skipped), with a line saying so, when this machine has no such Python.
#   on-python.sh VERSION MODULE...
set -eu
v=$1
shift
py=$("$(dirname "$0")/find-python.sh" "$v" | head -1)
if [ -z "$py" ]; then
	echo "no Python $v here (pyenv or /usr/bin/python$v): skipped"
	exit 77
fi
echo "$py: $("$py" -c 'import sys; print(sys.version.split()[0])')"
cd "$(dirname "$0")"
exec "$py" -m unittest "$@"
