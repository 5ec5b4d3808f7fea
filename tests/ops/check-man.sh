#!/bin/sh
# SPDX-License-Identifier: MIT
# Render each man page as man(1) would and fail on any warning.
#   check-man.sh PAGE...
set -eu
if command -v groff >/dev/null 2>&1; then
	render() { groff -man -Tutf8 -ww -z "$1"; }
elif command -v man >/dev/null 2>&1; then
	render() { MANWIDTH=80 man --warnings -E UTF-8 -l "$1" >/dev/null; }
else
	echo "neither groff nor man found: skipped"
	exit 77
fi
fail=0
for page in "$@"; do
	out=$(render "$page" 2>&1) || { echo "$page: rendering failed"; fail=1; }
	if [ -n "$out" ]; then
		echo "$page:"
		echo "$out"
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "man pages: ok"
exit $fail
