#!/bin/sh
# The GPU run recorded in docs/gpu.md: build without systemd and check (not
# on the GPU machine), run the gpu and integration suites, the demo on the
# GPU, and the GPU benchmark. Logs go to $OUT (default: ./gpu-run-logs).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-run-logs}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	uname -r
	gcc --version | head -1
} >"$OUT/machine.txt" 2>&1
meson setup "$BUILD" -Dsystemd=disabled -Dwerror=true >"$OUT/setup.log" 2>&1 &&
	ninja -C "$BUILD" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/setup.log" "$OUT/build.log"; exit 1; }
meson test -C "$BUILD" --suite gpu --print-errorlogs >"$OUT/gpu-suite.log" 2>&1
echo "gpu suite: $?" >>"$OUT/summary.txt"
cp "$BUILD/meson-logs/testlog.txt" "$OUT/gpu-testlog.txt" 2>/dev/null
meson test -C "$BUILD" --suite integration --print-errorlogs >"$OUT/integration.log" 2>&1
echo "integration suite: $?" >>"$OUT/summary.txt"
"$BUILD/daemon/cuflagd" --socket /tmp/cuflag-gpu-demo.sock --log-level warning &
d=$!
sleep 0.5
"$BUILD/tools/cuflag-demo" --socket /tmp/cuflag-gpu-demo.sock >"$OUT/demo.log" 2>&1
echo "demo: $?" >>"$OUT/summary.txt"
kill $d
"$BUILD/bench/cuflag-bench" --mode gpu --json >"$OUT/bench-gpu.json" 2>"$OUT/bench-gpu.err"
echo "bench gpu: $?" >>"$OUT/summary.txt"
"$BUILD/bench/cuflag-bench" --mode gpu >"$OUT/bench-gpu.txt" 2>&1
grep -E "^ *[0-9]+/[0-9]+ |^Ok|^Fail|^Skip" "$OUT/gpu-suite.log" "$OUT/integration.log"
cat "$OUT/summary.txt" "$OUT/demo.log"
