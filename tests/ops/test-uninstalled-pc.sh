#!/bin/sh
# SPDX-License-Identifier: MIT
# A program built against the build tree with no install and no root, as
# docs/running.md says: PKG_CONFIG_PATH=BUILD/meson-uninstalled gives the
# flags of cuflag-client (and cuflag-client-cuda), LD_LIBRARY_PATH=BUILD/client
# the library at run time.
# Environment (from tests/ops/meson.build): BUILD_ROOT, PKG_CONFIG, CC, VERSION.
set -eu
[ -n "${PKG_CONFIG:-}" ] || { echo "pkg-config not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/app.c" <<'EOT'
#include <stdio.h>
#include <cuflag/cuflag.h>
#include <cuflag/cuflag_cuda.h>

int main(void)
{
	printf("%s\n", cuflag_version());
	return 0;
}
EOT
export PKG_CONFIG_PATH="$BUILD_ROOT/meson-uninstalled"
# shellcheck disable=SC2046
$CC -o "$tmp/app" "$tmp/app.c" $($PKG_CONFIG --cflags --libs cuflag-client-cuda)
out=$(LD_LIBRARY_PATH="$BUILD_ROOT/client" "$tmp/app")
[ "$out" = "$VERSION" ] || { echo "the program printed '$out', not $VERSION"; exit 1; }
echo "uninstalled: built with $PKG_CONFIG_PATH's flags, ran on $BUILD_ROOT/client: ok"
