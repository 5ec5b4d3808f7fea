#!/bin/sh
# SPDX-License-Identifier: MIT
# The interpreters of Python VERSION (3.9, ...) on this machine, one a line:
# pyenv's ($PYENV_ROOT, else ~/.pyenv, and root's), then the system's.
# pyenv's shims are left out (they run whichever version pyenv selects).
# Prints nothing when there is none.
#   find-python.sh VERSION
set -eu
v=$1
for root in "${PYENV_ROOT:-}" "${HOME:-}/.pyenv" /root/.pyenv; do
	[ -n "$root" ] || continue
	for p in "$root"/versions/"$v".*/bin/python"$v"; do
		[ -x "$p" ] && echo "$p"
	done
done 2>/dev/null | sort -u
for d in /usr/bin /usr/local/bin; do
	[ -x "$d/python$v" ] && echo "$d/python$v"
done
exit 0
