#!/bin/sh
# Build cuflag and run every test suite. Run as root on a fresh Debian 12
# machine: it installs what is missing first.
#   scripts/test.sh            every suite (gpu tests skip without a GPU; the
#                              attack suite runs here only, one test at a
#                              time, as its figures are wake times), then
#                              the boot tests under systemd as PID 1 (the
#                              tree as meson installs it, restarts, and the
#                              Debian packages, lintian-clean, installed with
#                              apt), then the unit, integration, fuzz and
#                              example suites again under AddressSanitizer+UBSan
#                              and under ThreadSanitizer
#   QUICK=1 scripts/test.sh    the plain build only
#   BUILD=dir scripts/test.sh  another build directory (sanitizer builds go
#                              to dir-asan and dir-tsan, the build without
#                              CUDA to dir-nocuda)
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
need_packages meson ninja-build gcc pkg-config check libsystemd-dev python3 valgrind \
	libuv1-dev systemd man-db spin g++ binutils debootstrap systemd-container \
	python3-yaml librust-tokio-dev python3-venv python3-setuptools \
	python3-wheel prometheus tmux buildah podman catatonit python3-aiohttp python3-uvloop wrk
# The Rust crate builds with whatever cargo is on the PATH (Debian's where
# there is none), from Debian's packaged crates.
command -v cargo >/dev/null || need_packages cargo
BUILD=${BUILD:-build}

setup() { # dir, options...
	dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
	ninja -C "$dir"
}

# Name and result of every test in a meson log (testlog.json), a line each.
log_results() {
	python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(t["name"].split(" / ")[-1], t["result"])' "$1"
}

# Run one attack again: passes only if meson ran that test alone and it
# passed (meson exits 0 when a name matches no test).
attack_again() {
	meson test -C "$BUILD" --print-errorlogs "$1" || return 1
	[ "$(log_results "$BUILD/meson-logs/testlog.json")" = "$1 OK" ]
}

setup "$BUILD" -Dwerror=true
meson test -C "$BUILD" --print-errorlogs --num-processes 2 --no-suite attack
# The attacks measure wake times in milliseconds on whatever machine this is:
# an attack whose window misses a target because the machine itself stalled
# (the suite prints how late a plain sleeping thread woke: on the 2-CPU
# machine of docs/RELIABILITY.md, by up to 34 ms in windows with no daemon
# fault) is measured again, up to four times; one that misses all five times
# fails.
if ! meson test -C "$BUILD" --print-errorlogs --suite attack; then
	missed=$(log_results "$BUILD/meson-logs/testlog.json" |
		awk '$2 != "OK" && $2 != "SKIP" && $2 != "EXPECTEDFAIL" { print $1 }')
	[ -n "$missed" ] || exit 1
	for t in $missed; do
		echo "attack suite: $t missed a target; measured again"
		attack_again "$t" || attack_again "$t" || attack_again "$t" || attack_again "$t"
	done
fi

[ "${QUICK:-0}" = 1 ] && exit 0
# Booted with systemd as PID 1 (tests/boot/README.md); each prints one line
# and goes on (77) where this machine cannot boot a container.
boot() {
	rc=0
	"$@" || rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
}
dest=$(mktemp -d /tmp/cuflag-dest.XXXXXX)
meson install -C "$BUILD" --destdir "$dest" --no-rebuild --quiet
# (--packages python3: the same cached base root as the packages' test.)
boot tests/boot/boot.sh --packages python3 --destdir "$dest" tests/boot/checks/meson-install.sh
boot tests/boot/boot.sh --packages python3 --destdir "$dest" --file "$BUILD/tests/resume-soak" \
	tests/boot/checks/restart.sh
rm -rf "$dest"
# The suites ran above: the package build skips them.
boot env DEB_BUILD_OPTIONS=nocheck scripts/test-packages.sh
# As on a node without the CUDA toolkit: it must configure, build and serve.
setup "$BUILD-nocuda" -Dwerror=true -Dcuda=disabled
meson test -C "$BUILD-nocuda" --print-errorlogs --num-processes 2 --suite unit --suite integration
# The library links with -z defs; sanitizer runtimes need lundef off.
setup "$BUILD-asan" -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
meson test -C "$BUILD-asan" --print-errorlogs --num-processes 2 \
	--suite unit --suite integration --suite fuzz --suite examples
# gcc warns that it cannot instrument atomic_thread_fence: no -Werror here.
setup "$BUILD-tsan" -Db_sanitize=thread -Db_lundef=false
meson test -C "$BUILD-tsan" --print-errorlogs --num-processes 2 --suite integration
