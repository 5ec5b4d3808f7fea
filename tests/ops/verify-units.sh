#!/bin/sh
# SPDX-License-Identifier: MIT
# systemd-analyze verify on the units, generated with ExecStart= pointing at
# the built cuflagd (verify wants the binary to exist). The Documentation=
# pages are looked up among our own man pages. Then the sandbox is scored:
# the service must stay well hardened. Last, the sysusers.d and tmpfiles.d
# snippets are applied to a scratch root: they must create the user and group
# the units name, and the socket's directory.
#   verify-units.sh UNIT_DIR MAN_SRC_DIR SNIPPET_DIR
set -eu
units=$1
mansrc=$(cd "$2" && pwd)
snippets=$(cd "$3" && pwd)
command -v systemd-analyze >/dev/null 2>&1 || { echo "systemd-analyze not found: skipped"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

man_opt=--man=no
if command -v man >/dev/null 2>&1; then
	for page in "$mansrc"/*.[0-9]; do
		sec=${page##*.}
		mkdir -p "$tmp/man/man$sec"
		ln -s "$page" "$tmp/man/man$sec/"
	done
	export MANPATH="$tmp/man"
	man_opt=--man=yes
fi

# verify prints problems and may still exit 0 for some: any output fails.
out=$(systemd-analyze verify "$man_opt" "$units/cuflagd.socket" "$units/cuflagd.service" \
	"$units/cuflag-exporter.service" 2>&1) \
	|| { echo "$out"; echo "systemd-analyze verify failed"; exit 1; }
if [ -n "$out" ]; then
	echo "$out"
	echo "systemd-analyze verify complained"
	exit 1
fi

# The systemd --user units, with ExecStart= at the built cuflagd too: they
# start it with --user on the socket the library falls back to.
daemon=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$units/cuflagd.service")
mkdir "$tmp/user"
sed "s|@sbindir@/cuflagd|$daemon|" "$snippets/user/cuflagd.service.in" >"$tmp/user/cuflagd.service"
cp "$snippets/user/cuflagd.socket" "$tmp/user/"
grep -qx "ExecStart=$daemon --user" "$tmp/user/cuflagd.service" ||
	{ echo "the user's cuflagd.service does not run cuflagd --user"; exit 1; }
grep -qx 'ListenSequentialPacket=%t/cuflag/cuflagd.sock' "$tmp/user/cuflagd.socket" ||
	{ echo "the user's cuflagd.socket is not at %t/cuflag/cuflagd.sock"; exit 1; }
# A user manager's runtime directory, as a login gives it (%t).
mkdir -m 0700 "$tmp/xdg"
out=$(XDG_RUNTIME_DIR=$tmp/xdg systemd-analyze --user verify "$man_opt" "$tmp/user/cuflagd.socket" \
	"$tmp/user/cuflagd.service" 2>&1) || { echo "$out"; echo "systemd-analyze --user verify failed"; exit 1; }
if [ -n "$out" ]; then
	echo "$out"
	echo "systemd-analyze --user verify complained"
	exit 1
fi

# Exposure on systemd's 0-10 scale, times ten: at most 2.0 ("OK" or better).
systemd-analyze security --offline=yes --threshold=20 "$units/cuflagd.service" >"$tmp/sec" 2>&1 \
	|| { cat "$tmp/sec"; echo "cuflagd.service is less hardened than expected"; exit 1; }
tail -n 1 "$tmp/sec"
# The exporter listens on the network: as hardened, but for its sockets.
systemd-analyze security --offline=yes --threshold=20 "$units/cuflag-exporter.service" \
	>"$tmp/sec" 2>&1 ||
	{ cat "$tmp/sec"; echo "cuflag-exporter.service is less hardened than expected"; exit 1; }
tail -n 1 "$tmp/sec"

if command -v systemd-sysusers >/dev/null 2>&1 && command -v systemd-tmpfiles >/dev/null 2>&1; then
	root=$tmp/root
	mkdir -p "$root/etc"
	systemd-sysusers --root="$root" "$snippets/sysusers.conf" >"$tmp/log" 2>&1 ||
		{ cat "$tmp/log"; echo "sysusers.d snippet refused"; exit 1; }
	systemd-tmpfiles --create --root="$root" "$snippets/tmpfiles.conf" ||
		{ echo "tmpfiles.d snippet refused"; exit 1; }
	user=$(sed -n 's/^User=//p' "$units/cuflagd.service")
	group=$(sed -n 's/^SocketGroup=//p' "$units/cuflagd.socket")
	grep -q "^$user:" "$root/etc/passwd" || { echo "sysusers.d makes no user $user"; exit 1; }
	grep -q "^$group:" "$root/etc/group" || { echo "sysusers.d makes no group $group"; exit 1; }
	# The daemon's --admin-group and the exporter's groups.
	admin=$(sed -n 's/^ExecStart=.*--admin-group \([^ ]*\).*/\1/p' "$units/cuflagd.service")
	for g in $admin $(sed -n 's/^SupplementaryGroups=//p' "$units/cuflag-exporter.service"); do
		grep -q "^$g:" "$root/etc/group" || { echo "sysusers.d makes no group $g"; exit 1; }
	done
	dir=$(sed -n 's|^ListenSequentialPacket=\(.*\)/[^/]*$|\1|p' "$units/cuflagd.socket")
	[ -d "$root$dir" ] || { echo "tmpfiles.d makes no $dir"; exit 1; }
fi
echo "units: ok"
