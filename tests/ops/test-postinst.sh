#!/bin/sh
# SPDX-License-Identifier: MIT
# debian/cuflagd.postinst (its own lines: #DEBHELPER# is still a comment
# here) on a host without systemd as PID 1 says, once, that nothing will
# start the daemon and how to start it by hand; under systemd, or on an
# upgrade, it says nothing. Run in a mount namespace whose /run is empty
# (then with /run/systemd/system, as systemd makes it). Root: 77 without.
#   test-postinst.sh SOURCE_ROOT
set -eu
postinst=$1/debian/cuflagd.postinst
if [ "${1:-}" = --inside ]; then
	postinst=$2
	mount -t tmpfs tmpfs /run
	fail=0
	out=$(sh "$postinst" configure "" 2>&1)
	case $out in
	*"systemd is not running here"*"cuflagd --socket-group cuflag"*) ;;
	*) echo "first installation without systemd: said '$out'"; fail=1 ;;
	esac
	out=$(sh "$postinst" configure 0.1.0 2>&1)
	[ -z "$out" ] || { echo "an upgrade said it again: '$out'"; fail=1; }
	mkdir -p /run/systemd/system
	out=$(sh "$postinst" configure "" 2>&1)
	[ -z "$out" ] || { echo "under systemd: said '$out'"; fail=1; }
	[ $fail = 0 ] && echo "postinst: ok"
	exit $fail
fi
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
	echo "postinst: needs root and unshare: skipped"
	exit 77
fi
exec unshare --mount --propagation private sh "$0" --inside "$postinst"
