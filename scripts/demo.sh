#!/bin/sh
# The main job, from nothing (Debian 12, as root): install what is missing,
# build, start cuflagd on a private socket, run cuflag-demo against it (on the
# GPU if there is one, else on the simulated device), stop the daemon.
# Prints one line for the build (its output goes to a log) and the demo's
# three lines, as the README shows them; the daemon speaks only of trouble.
#   scripts/demo.sh [cuflag-demo options]
#   BUILD=dir (default build); DEMO_BUILT=1: the build is done, run only.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ -z "${DEMO_BUILT:-}" ]; then
	. scripts/deps.sh
	need_packages meson ninja-build gcc pkg-config libsystemd-dev
	log=${TMPDIR:-/tmp}/cuflag-demo-build.log
	echo "building in $BUILD (meson, ninja; the log: $log)"
	# What the demo runs, not the whole tree (tests, benchmarks, examples):
	# `meson test` builds the rest when it runs them.
	{
		if [ -f "$BUILD/build.ninja" ]; then
			meson setup --reconfigure "$BUILD"
		else
			meson setup "$BUILD"
		fi && ninja -C "$BUILD" daemon/cuflagd ctl/cuflagctl tools/cuflag-demo
	} >"$log" 2>&1 || { tail -n 30 "$log"; echo "the build failed: $log" >&2; exit 1; }
fi
dir=$(mktemp -d /tmp/cuflag-demo.XXXXXX)
sock="$dir/cuflagd.sock"
"$BUILD/daemon/cuflagd" --socket "$sock" --log-level warning &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
# Ready when the socket answers (cuflagctl status connects and asks).
i=0
until "$BUILD/ctl/cuflagctl" --socket "$sock" status >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 500 ] || { echo "cuflagd did not start" >&2; exit 1; }
	kill -0 $daemon 2>/dev/null || { echo "cuflagd exited" >&2; exit 1; }
	sleep 0.01
done
"$BUILD/tools/cuflag-demo" --socket "$sock" "$@"
