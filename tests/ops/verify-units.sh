#!/bin/sh
# SPDX-License-Identifier: MIT
# systemd-analyze verify on the units, generated with ExecStart= pointing at
# the built cuflagd (verify wants the binary to exist). The Documentation=
# pages are looked up among our own man pages. Then the sandbox is scored:
# the service must stay well hardened.
#   verify-units.sh UNIT_DIR MAN_SRC_DIR
set -eu
units=$1
mansrc=$2
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
out=$(systemd-analyze verify "$man_opt" "$units/cuflagd.socket" "$units/cuflagd.service" 2>&1) \
	|| { echo "$out"; echo "systemd-analyze verify failed"; exit 1; }
if [ -n "$out" ]; then
	echo "$out"
	echo "systemd-analyze verify complained"
	exit 1
fi

# Exposure on systemd's 0-10 scale, times ten: at most 2.0 ("OK" or better).
systemd-analyze security --offline=yes --threshold=20 "$units/cuflagd.service" >"$tmp/sec" 2>&1 \
	|| { cat "$tmp/sec"; echo "cuflagd.service is less hardened than expected"; exit 1; }
tail -n 1 "$tmp/sec"
echo "units: ok"
