#!/bin/sh
# SPDX-License-Identifier: MIT
# meson install into a scratch DESTDIR puts every deliverable where it belongs,
# with the unit's ExecStart= naming the installed daemon.
# Environment (from tests/ops/meson.build): MESON, BUILD_ROOT, PREFIX, BINDIR,
# SBINDIR, LIBDIR, INCLUDEDIR, MANDIR, VERSION.
set -eu
[ -n "${MESON:-}" ] || { echo "meson not found: skipped"; exit 77; }

dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
$MESON install -C "$BUILD_ROOT" --destdir "$dest" --no-rebuild --quiet

# An install dir option is relative to the prefix unless it is absolute.
under() { case $1 in /*) echo "$dest$1" ;; *) echo "$dest$PREFIX/$1" ;; esac; }
fail=0
need() {
	[ -e "$1" ] || [ -L "$1" ] || { echo "missing: ${1#"$dest"}"; fail=1; }
}
need_exec() { need "$1"; [ ! -e "$1" ] || [ -x "$1" ] || { echo "not executable: $1"; fail=1; }; }
# Files whose directory comes from systemd's pkg-config (or our fallback).
find_one() { find "$dest" -path "*/$1" | head -n 1; }

bindir=$(under "$BINDIR")
sbindir=$(under "$SBINDIR")
libdir=$(under "$LIBDIR")
incdir=$(under "$INCLUDEDIR")
mandir=$(under "$MANDIR")

need_exec "$sbindir/cuflagd"
need_exec "$bindir/cuflagctl"
need "$libdir/libcuflag-client.so"
need "$libdir/libcuflag-client.so.$VERSION"
# The soname link, whatever the ABI number is.
[ "$(find "$libdir" -name 'libcuflag-client.so.[0-9]*' | wc -l)" -ge 2 ] ||
	{ echo "missing: the libcuflag-client.so.N soname link"; fail=1; }
need "$incdir/cuflag/cuflag.h"
need "$incdir/cuflag/cuflag_cuda.h"
need "$incdir/cuflag/cuflag_device.h"
need "$libdir/pkgconfig/cuflag-client.pc"
need "$mandir/man8/cuflagd.8"
need "$mandir/man1/cuflagctl.1"
need "$mandir/man3/libcuflag-client.3"
need "$mandir/man3/cuflag_connect.3"
need "$mandir/man3/cuflag_device_signal.3"

for f in systemd/system/cuflagd.service systemd/system/cuflagd.socket sysusers.d/cuflagd.conf \
	tmpfiles.d/cuflagd.conf systemd/system/cuflag-exporter.service; do
	[ -n "$(find_one "$f")" ] || { echo "missing: */$f"; fail=1; }
done
service=$(find_one systemd/system/cuflagd.service)
if [ -n "$service" ]; then
	installed_daemon=${sbindir#"$dest"}/cuflagd
	grep -qx "ExecStart=$installed_daemon\( .*\)\{0,1\}" "$service" ||
		{ echo "cuflagd.service does not start $installed_daemon:"; grep ExecStart "$service"; fail=1; }
	! grep -q '@[a-z_]*@' "$service" || { echo "cuflagd.service has unsubstituted @...@"; fail=1; }
fi
# The systemd --user units, starting the installed daemon with --user.
for f in systemd/user/cuflagd.service systemd/user/cuflagd.socket; do
	[ -n "$(find_one "$f")" ] || { echo "missing: */$f"; fail=1; }
done
user_service=$(find_one systemd/user/cuflagd.service)
if [ -n "$user_service" ]; then
	grep -qx "ExecStart=${sbindir#"$dest"}/cuflagd --user" "$user_service" ||
		{ echo "the user's cuflagd.service does not start cuflagd --user:"; grep ExecStart "$user_service"; fail=1; }
fi
exporter=$(find_one systemd/system/cuflag-exporter.service)
if [ -n "$exporter" ]; then
	installed_ctl=${bindir#"$dest"}/cuflagctl
	grep -q "^ExecStart=$installed_ctl metrics --listen " "$exporter" ||
		{ echo "cuflag-exporter.service does not start $installed_ctl:"; grep ExecStart "$exporter"; fail=1; }
fi
need "$libdir/pkgconfig/cuflag-client-cuda.pc"

# Nothing outside the prefix (units, sysusers.d and tmpfiles.d included),
# except for the prefix /usr, where the units go where the packages put them.
if [ "$PREFIX" != /usr ]; then
	outside=$(find "$dest" ! -type d | grep -v "^$dest$PREFIX/" || true)
	[ -z "$outside" ] || { echo "installed outside the prefix $PREFIX:"; echo "$outside" |
		sed "s|^$dest||"; fail=1; }
fi

# Programs of the installed headers, built with nothing but pkg-config's
# flags (the installed tree moved under $dest: its prefix says so).
pc() {
	PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
		"$PKG_CONFIG" --define-variable=prefix="$dest$PREFIX" "$@"
}
build_with() { # PACKAGE HEADER: compile and link a program including HEADER
	printf '#include <%s>\nint main(void) { cuflag_client *c; return cuflag_connect(0, &c) < 0; }\n' \
		"$2" >"$dest/prog.c"
	# shellcheck disable=SC2046 # the flags are words
	"$CC" $(pc --cflags "$1") "$dest/prog.c" -o "$dest/prog" $(pc --libs "$1") ||
		{ echo "$2 does not build with pkg-config --cflags --libs $1 alone"; fail=1; }
}
if [ -z "${PKG_CONFIG:-}" ] || [ -z "${CC:-}" ]; then
	echo "pkg-config or a C compiler not found: programs of the headers not built"
else
	build_with cuflag-client cuflag/cuflag.h
	cudadir=$(pc --variable=cudadir cuflag-client-cuda)
	if [ -f "$cudadir/include/cuda.h" ]; then
		build_with cuflag-client-cuda cuflag/cuflag_cuda.h
		echo "install: cuflag_cuda.h builds with cuflag-client-cuda's flags ($cudadir)"
	else
		echo "install: no $cudadir/include/cuda.h here: cuflag_cuda.h not built"
	fi
fi
[ $fail -eq 0 ] && echo "install: ok"
exit $fail
