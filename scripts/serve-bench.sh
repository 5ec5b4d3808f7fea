#!/bin/sh
# The serving bench of docs/BENCHMARKS.md, in one call on a GPU machine:
# build cuflagd and the client library (no systemd, no tests), start cuflagd
# on a private socket, then
#   - examples/python/pipeline.py: the prefill-to-decode hand-off in every
#     mode, ROUNDS rounds taken in turn: pipeline.json
#   - bench/serve/serve_bench.py: examples/python/http_serve.py in every
#     mode (cuflag, to_thread, poll, block, hostfunc) under asyncio and
#     uvloop, driven by examples/python/loadgen.py at concurrency 1, 8, 64,
#     256 and at 20, 50, 90 % of each loop's best peak, ROUNDS rounds taken
#     in turn: serve.json
# Logs and the JSON go to $OUT (default ./serve-bench-logs); then, here,
# bench/serve/record.py OUT TAG "MACHINE" records them in docs/bench-data/
# (serve-TAG.json, pipeline-TAG.json) and writes the tables (docs/serving.md).
#   OUT=dir ROUNDS=5 DEVICE=gpu COMMIT=$(git rev-parse --short HEAD) scripts/serve-bench.sh
# DEVICE=sim runs the same without a GPU (the simulated device; pipeline in
# its two modes that need none): for trying the script, not for figures.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/serve-bench-logs}
BUILD=${BUILD:-build-serve}
ROUNDS=${ROUNDS:-5}
DEVICE=${DEVICE:-gpu}
PYTHON=${PYTHON:-python3}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$OUT"
SOCK=/tmp/cuflag-serve-bench.sock
meson setup "$BUILD" -Dsystemd=disabled -Dtests=false >"$OUT/build.log" 2>&1 &&
	ninja -C "$BUILD" daemon/cuflagd client/libcuflag-client.so.0.1.0 >>"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
export PYTHONPATH="$PWD/python" CUFLAG_LIBRARY="$PWD/$BUILD/client/libcuflag-client.so.0" \
	CUFLAG_SOCKET=$SOCK PYTHONUNBUFFERED=1
rm -f $SOCK
"$BUILD/daemon/cuflagd" --socket $SOCK --log-level warning 2>"$OUT/cuflagd.log" &
d=$!
for i in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
modes="--mode asyncio --mode gpu-wait --mode ipc-event --mode ipc-poll --mode poll-byte"
[ "$DEVICE" = sim ] && modes="--mode asyncio --mode poll-byte"
timeout 60 "$PYTHON" examples/python/pipeline.py --device "$DEVICE" $modes --rounds "$ROUNDS" \
	--handoffs "${HANDOFFS:-300}" --commit "$COMMIT" --json "$OUT/pipeline.json" \
	>"$OUT/pipeline.txt" 2>&1
prc=$?
echo "pipeline: $prc"
"$PYTHON" bench/serve/serve_bench.py --device "$DEVICE" --rounds "$ROUNDS" --commit "$COMMIT" \
	--json "$OUT/serve.json" ${SERVE_ARGS:-} >"$OUT/serve.txt" 2>&1
rc=$?
echo "serve bench: $rc"
kill $d
wait $d
cat "$OUT/pipeline.txt"
tail -75 "$OUT/serve.txt"
[ $rc = 0 ] && [ $prc = 0 ]
