#!/bin/sh
# The GPU run recorded in docs/gpu.md and docs/bench-log/: build without
# systemd and check (not on the GPU machine), run the gpu suite and the load
# shapes, the demo on the GPU, the CPU bench's scanner-cost rows on this host,
# the GPU bench against the default (adaptive) daemon and the spinning one,
# and the PyTorch server loop. Logs go to $OUT (default: ./gpu-run-logs), at
# most eight files; summary.txt has the gpu tests' PASS lines with figures.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-run-logs}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
S="$OUT/summary.txt"
{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	uname -r
	nproc
	gcc --version | head -1
} >"$S" 2>&1
meson setup "$BUILD" -Dsystemd=disabled -Dwerror=true >"$OUT/build.log" 2>&1 &&
	ninja -C "$BUILD" >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
meson test -C "$BUILD" --suite gpu --print-errorlogs >"$OUT/gpu-suite.log" 2>&1
echo "gpu suite: $?" >>"$S"
# The tests' PASS lines carry their figures (rates, counts, where a restart
# fell): copied from meson's log, which the next meson test replaces, each
# after the name of its test (the -ipc twins print the same words).
awk '/^test: / { n = $NF; sub(/.*:/, "", n) }
	/(^|: )PASS[: ]/ { print (n == "" ? "" : n ": ") $0 }' \
	"$BUILD/meson-logs/testlog.txt" >>"$S" 2>/dev/null
meson test -C "$BUILD" --print-errorlogs test-load-shapes >>"$OUT/gpu-suite.log" 2>&1
echo "load shapes: $?" >>"$S"
grep -h "load shapes (" "$BUILD/meson-logs/testlog.txt" >>"$S" 2>/dev/null
"$BUILD/daemon/cuflagd" --socket /tmp/cuflag-gpu-demo.sock --log-level warning &
d=$!
sleep 0.5
"$BUILD/tools/cuflag-demo" --socket /tmp/cuflag-gpu-demo.sock >>"$S" 2>&1
echo "demo: $?" >>"$S"
if [ "${SERVE:-1}" = 1 ] && python3 -c 'import torch' 2>/dev/null; then
	PYTHONPATH=$PWD/python CUFLAG_LIBRARY=$PWD/$BUILD/client/libcuflag-client.so.0 \
		timeout 120 python3 examples/python/serve.py --socket /tmp/cuflag-gpu-demo.sock \
		--concurrency 1 8 64 --streams 8 --seconds 2 >"$OUT/serve.txt" 2>&1
	echo "serve: $?" >>"$S"
fi
kill $d
"$BUILD/bench/cuflag-bench" --mode cpu --no-scale >"$OUT/bench-cpu.txt" 2>&1
echo "bench cpu: $?" >>"$S"
"$BUILD/bench/cuflag-bench" --mode gpu >"$OUT/bench-gpu.txt" 2>&1
echo "bench gpu: $?" >>"$S"
"$BUILD/bench/cuflag-bench" --mode gpu --scanner-mode spin >"$OUT/bench-gpu-spin.txt" 2>&1
echo "bench gpu spin: $?" >>"$S"
grep -E "^ *[0-9]+/[0-9]+ |^Ok|^Fail|^Skip" "$OUT/gpu-suite.log" >>"$S"
cat "$S"
