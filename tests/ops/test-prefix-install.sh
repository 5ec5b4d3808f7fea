#!/bin/sh
# SPDX-License-Identifier: MIT
# A build configured with --prefix installs everything under that prefix:
# units, sysusers.d and tmpfiles.d too (systemd's pkg-config directories with
# the prefix replaced). Everything meson would install, from a scratch
# configuration of the source tree (nothing built).
#   test-prefix-install.sh SOURCE_ROOT   (MESON in the environment)
set -eu
[ -n "${MESON:-}" ] || { echo "meson not found: skipped"; exit 77; }
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/p
$MESON setup "$tmp/build" "$src" --prefix "$prefix" -Dtests=false >"$tmp/setup.log" 2>&1 ||
	{ cat "$tmp/setup.log"; exit 1; }
$MESON introspect "$tmp/build" --installed >"$tmp/installed.json"
python3 - "$tmp/installed.json" "$prefix" <<'PY'
import json, sys
installed = json.load(open(sys.argv[1])).values()
prefix = sys.argv[2] + "/"
outside = sorted(p for p in installed if not p.startswith(prefix))
for p in outside:
    print("outside the prefix:", p)
units = [p for p in installed if "/systemd/system/" in p or "/sysusers.d/" in p
         or "/tmpfiles.d/" in p]
if len(units) < 5:
    print("units, sysusers.d and tmpfiles.d snippets not all installed:", units)
    sys.exit(1)
sys.exit(1 if outside else 0)
PY
echo "prefix install: everything under $prefix: ok"
