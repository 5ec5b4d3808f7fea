#!/bin/sh
# SPDX-License-Identifier: MIT
# Boot Debian 12 with systemd as PID 1 in a container and run one check in it.
#
#   tests/boot/boot.sh [--packages "P ..."] [--file PATH]... [--destdir DIR] CHECK
#
# CHECK is a shell script (tests/boot/checks/*.sh) that runs as root inside
# the booted system, after multi-user.target, with tests/boot/guest/lib.sh
# sourced. --file copies a file or directory into the guest's
# /opt/cuflag-boot/files (the check finds it as $BOOT_FILES/NAME); --destdir
# lays a `meson install --destdir` tree over the root before it boots;
# --packages adds Debian packages to the base root (each set is cached once).
#
# The base root (debootstrap --variant=minbase bookworm, with systemd,
# systemd-sysv and dbus) is made once and cached under $BOOT_CACHE
# (/var/tmp/cuflag-boot); every run boots a copy of it, so runs never see one
# another. In the copy a oneshot unit runs the check, prints its output and a
# result line on the console and powers the container off; this script reads
# the result line from the console.
#
# Exit status: 0 the check passed, 1 it failed (its output and the end of the
# boot log are printed), 77 this machine cannot boot a container (one line
# says why: not root, no systemd-nspawn or debootstrap, nspawn refused).
# Environment: BOOT_CACHE, BOOT_MIRROR (default: the first Debian mirror for
# bookworm in /etc/apt/sources.list*), BOOT_TIMEOUT (seconds, default 300),
# BOOT_KEEP=1 (keep the booted root, its path is printed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${BOOT_CACHE:-/var/tmp/cuflag-boot}
suite=bookworm
base_packages="systemd systemd-sysv dbus"
extra=""
files=""
destdir=""

skip() { echo "boot test skipped: $*"; exit 77; }
die() { echo "boot test: $*" >&2; exit 1; }

while [ $# -gt 1 ]; do
	case $1 in
	--packages) extra="$extra $2"; shift 2 ;;
	--file) [ -e "$2" ] || die "no such file: $2"; files="$files
$(realpath "$2")"; shift 2 ;;
	--destdir) [ -d "$2" ] || die "no such directory: $2"; destdir=$(realpath "$2"); shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ $# -eq 1 ] && [ -f "$1" ] || die "usage: boot.sh [--packages LIST] [--file PATH]... [--destdir DIR] CHECK"
check=$(realpath "$1")

[ "$(id -u)" = 0 ] || skip "not root"
command -v systemd-nspawn >/dev/null 2>&1 || skip "systemd-nspawn not installed (package systemd-container)"
command -v debootstrap >/dev/null 2>&1 || skip "debootstrap not installed"

# The mirror this machine's apt uses for the suite, one-line or deb822 form.
mirror() {
	[ -n "${BOOT_MIRROR:-}" ] && { echo "$BOOT_MIRROR"; return; }
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v suite="$suite" '
			/^deb[ \t]/ { sub(/\[[^]]*\]/, ""); if ($3 == suite) { print $2; exit } }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
			/^[ \t]*$/ { if (hit && uri) { print uri; exit } hit = 0; uri = "" }
			END { if (hit && uri) print uri }' "$f"
	done | head -n 1 | grep . || echo http://deb.debian.org/debian
}

# The base root for this package set, made once.
packages=$(echo $base_packages $extra | tr ' ' '\n' | sort -u | tr '\n' ',' | sed 's/,$//')
key=$(printf '%s %s\n' "$suite" "$packages" | sha1sum | cut -c1-10)
base=$cache/$suite-$key
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9
if [ ! -e "$base/.complete" ]; then
	m=$(mirror)
	echo "boot test: making the base root ($suite minbase + $packages from $m), once"
	rm -rf "$base.tmp"
	debootstrap --variant=minbase --include="$packages" "$suite" "$base.tmp" "$m" \
		>"$cache/debootstrap.log" 2>&1 || {
		tail -20 "$cache/debootstrap.log"
		die "debootstrap failed (log: $cache/debootstrap.log)"
	}
	rm -f "$base.tmp"/var/cache/apt/archives/*.deb
	touch "$base.tmp/.complete"
	rm -rf "$base"
	mv "$base.tmp" "$base"
fi
root=$(mktemp -d "$cache/run.XXXXXX")
cp -a --reflink=auto "$base/." "$root/"
flock -u 9

log=$root.console
cleanup() {
	if [ "${BOOT_KEEP:-0}" = 1 ]; then
		echo "boot test: kept $root (console: $log)"
	else
		rm -rf "$root" "$log"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

nspawn() {
	systemd-nspawn --quiet --register=no --keep-unit --private-network --link-journal=no \
		-D "$root" "$@"
}
if ! out=$(nspawn /bin/true 2>&1); then
	skip "systemd-nspawn cannot start a container here: $(echo "$out" | grep -v '^$' | tail -n 1)"
fi

# The check, its helpers, its files, and the unit that runs it.
g=$root/opt/cuflag-boot
mkdir -p "$g/files"
cp "$check" "$g/check"
cp "$here/guest/lib.sh" "$here/guest/run-check" "$g/"
chmod 755 "$g/check" "$g/run-check"
echo "$(basename "$check" .sh)" >"$g/name"
echo "$files" | while IFS= read -r f; do [ -z "$f" ] || cp -a "$f" "$g/files/"; done
if [ -n "$destdir" ]; then
	# Into a merged-/usr root: /lib in the tree lands in /usr/lib; the
	# root's own directories keep their modes (a 0700 DESTDIR would make
	# "/" unreadable to every system user).
	tar -C "$destdir" -cf - . | tar -C "$root" -xf - --keep-directory-symlink --no-overwrite-dir
	ldconfig -r "$root"
fi
cp "$here/guest/cuflag-boot-check.service" "$root/etc/systemd/system/"
chmod 0755 "$root"
# No login prompt on the console: a getty starting (or timing out) there
# hangs the console up under the check, whose output is then lost.
ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"
ln -sf /dev/null "$root/etc/systemd/system/container-getty@.service"
ln -s ../cuflag-boot-check.service "$root/etc/systemd/system/multi-user.target.wants/"

echo "boot test: $(basename "$check"): booting"
start=$(date +%s)
# The console is read-only (no terminal is taken over). systemd draws its
# "A start job is running" line over the console while the check runs and
# erases it with \r and escape sequences: both are dropped, so that each
# line of the check starts a line of the log. The check's lines are shown
# as they come.
esc=$(printf '\033')
timeout -k 10 "${BOOT_TIMEOUT:-300}" systemd-nspawn --quiet --register=no --keep-unit \
	--private-network --link-journal=no --console=read-only -b -D "$root" </dev/null 2>&1 |
	sed -u "s/$esc\\[[0-9;?]*[A-Za-z]//g; s/\r$//; s/.*\r//" | tee "$log" |
	sed -u -n 's/^\[check\] /  /p' || true
result=$(sed -n 's/^cuflag-boot-result: //p' "$log" | tail -n 1)
# The console can lose the end of the run (a shutdown that cuts it short):
# the check's own record in the root then says how far it went.
if [ -z "$result" ] && [ -f "$g/rc" ]; then
	echo "--- the check's output (its result line did not reach the console):"
	sed 's/^/  /' "$g/log"
	result="fail (exit $(cat "$g/rc"), no result line on the console)"
	[ "$(cat "$g/rc")" != 0 ] || result="fail (passed, but no result line on the console)"
fi
secs=$(($(date +%s) - start))
case $result in
pass)
	echo "boot test: $(basename "$check"): pass (${secs} s)"
	exit 0 ;;
"")
	echo "--- end of the console:"
	tail -n 40 "$log"
	echo "boot test: $(basename "$check"): no result within ${BOOT_TIMEOUT:-300} s (${secs} s)"
	exit 1 ;;
*)
	echo "boot test: $(basename "$check"): $result (${secs} s)"
	exit 1 ;;
esac
