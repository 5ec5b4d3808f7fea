#!/bin/sh
# Build cuflag and run every test suite. Run as root on a fresh Debian 12
# machine: it installs what is missing first.
#   scripts/test.sh            build in build/ and run unit + integration (+ gpu, skipped without one)
#   BUILD=dir scripts/test.sh  another build directory
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
need_packages meson ninja-build gcc pkg-config check libsystemd-dev python3 valgrind \
	libuv1-dev systemd man-db
BUILD=${BUILD:-build}
if [ -f "$BUILD/build.ninja" ]; then
	meson setup --reconfigure "$BUILD" -Dwerror=true
else
	meson setup "$BUILD" -Dwerror=true
fi
ninja -C "$BUILD"
meson test -C "$BUILD" --print-errorlogs --num-processes 2
