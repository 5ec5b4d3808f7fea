#!/bin/sh
# run.sh [BUILD]: the Rust crate's test executables and its GPU bench, built
# elsewhere by scripts/rust-gpu-build.sh (this file is its copy), run against
# the meson build BUILD of the same tree on this machine: its
# libcuflag-client (BUILD/client, through LD_LIBRARY_PATH) and its cuflagd
# (BUILD/daemon/cuflagd, as $CUFLAGD; each test starts its own). BUILD:
# the argument, else $CUFLAG_BUILD, else build-gpu in the current directory
# or beside this directory. Logs in $LOGS (default: logs/ beside this file);
# extra bench options in $BENCH_ARGS. Where nvidia-smi sees a GPU, a GPU test
# that skips is a failure. Exit status 0 when every test passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${CUFLAG_BUILD:-build-gpu}}
[ -d "$build" ] || [ $# -gt 0 ] || [ -n "${CUFLAG_BUILD:-}" ] || build=$here/../build-gpu
if [ ! -x "$build/daemon/cuflagd" ] || [ ! -e "$build/client/libcuflag-client.so.0" ]; then
	echo "no meson build at $build (want daemon/cuflagd and client/libcuflag-client.so.0)" >&2
	exit 1
fi
build=$(cd "$build" && pwd)
export LD_LIBRARY_PATH="$build/client${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUFLAGD="$build/daemon/cuflagd"
logs=${LOGS:-$here/logs}
mkdir -p "$logs"
gpu=0
nvidia-smi -L >/dev/null 2>&1 && gpu=1
failed=0
summary=$logs/summary.txt
: >"$summary"
say() {
	echo "$*" | tee -a "$summary"
}

say "rust: library $build/client, daemon $CUFLAGD; GPU seen by nvidia-smi: $([ $gpu = 1 ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 || echo none)"
for f in "$here"/tests/* "$here/bench"; do
	missing=$(ldd "$f" 2>&1 | grep "not found")
	if [ -n "$missing" ]; then
		say "FAIL $(basename "$f"): $missing"
		failed=1
	fi
done
[ $failed -eq 0 ] || { say "rust: FAIL (libraries not found)"; exit 1; }

for t in "$here"/tests/*; do
	name=$(basename "$t")
	log=$logs/$name.log
	timeout 600 "$t" --nocapture >"$log" 2>&1
	rc=$?
	result=$(grep "^test result:" "$log" | tail -1 | sed 's/^test result: //; s/; finished in.*//')
	skipped=$(grep -c "skipped: no CUDA driver or no GPU" "$log")
	if [ $rc -ne 0 ]; then
		say "FAIL $name (exit $rc): ${result:-no result line}; see $log"
		grep -E "panicked|^---- " "$log" | head -5 | tee -a "$summary"
		failed=1
	elif [ "$skipped" -gt 0 ] && [ $gpu = 1 ]; then
		say "FAIL $name: $skipped GPU tests skipped on a machine with a GPU; see $log"
		failed=1
	elif [ "$skipped" -gt 0 ]; then
		say "pass $name: $result ($skipped skipped: no GPU)"
	else
		say "pass $name: $result"
	fi
done

# The bench: its table goes to the log and here; exit 77 without a GPU.
log=$logs/bench.log
# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
timeout 600 "$here/bench" ${BENCH_ARGS:-} >"$log" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
	say "bench: skipped (no GPU)"
	[ $gpu = 0 ] || failed=1
elif [ $rc -ne 0 ]; then
	say "FAIL bench (exit $rc); see $log"
	tail -5 "$log" | tee -a "$summary"
	failed=1
else
	tee -a "$summary" <"$log"
	misses=$(grep -c "MISS" "$log")
	rows=$(sed -n '/^ratios/,$p' "$log" | grep -cE "^ +[0-9]+ ")
	say "bench: ran; in-flight counts missing a target: $misses of $rows"
fi
if [ $failed -eq 0 ]; then
	say "rust: PASS"
else
	say "rust: FAIL"
fi
exit $failed
