# SPDX-License-Identifier: MIT
# Helpers for the checks (tests/boot/checks/*.sh), which run as
# "sh -eu check" inside the booted system, as root. Source it first:
#   . /opt/cuflag-boot/lib.sh
# $BOOT_FILES holds what the host passed with --file.

# ok WHAT / fail WHAT: one line of the check's record; fail ends the check.
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }

# expect WHAT CMD...: CMD succeeds, else the check fails with its output.
expect() {
	what=$1
	shift
	if out=$("$@" 2>&1); then
		ok "$what"
	else
		[ -z "$out" ] || echo "$out"
		fail "$what"
	fi
}

# refuse WHAT CMD...: CMD fails, else the check fails.
refuse() {
	what=$1
	shift
	if out=$("$@" 2>&1); then
		[ -z "$out" ] || echo "$out"
		fail "$what"
	fi
	ok "$what"
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s until it succeeds; 1 if
# it has not within SECONDS.
wait_for() {
	tries=$(($1 * 10))
	shift
	until "$@" >/dev/null 2>&1; do
		tries=$((tries - 1))
		[ $tries -gt 0 ] || return 1
		sleep 0.1
	done
}

# as_user USER CMD...: CMD as USER with USER's groups, no PAM session.
as_user() {
	u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --init-groups -- "$@"
}

# activate_install: after boot.sh --destdir, do what the packages'
# maintainer scripts would: the cuflag user and group, /run/cuflagd, the
# units known to systemd, the socket listening.
activate_install() {
	systemd-sysusers
	systemd-tmpfiles --create
	systemctl daemon-reload
	systemctl start cuflagd.socket
}
