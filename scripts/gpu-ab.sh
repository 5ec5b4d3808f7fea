#!/bin/sh
# gpu-ab.sh BASE: this tree's daemon against BASE's (a commit, or a source
# tree's directory where there is no git history, as on a machine that got
# a copy of the working tree: `git archive BASE | tar -x -C DIR`), on the same
# machine in one go, as the A/B studies of docs/bench-log/ were measured:
# the scanner-cost rows (`cuflag-bench --mode cpu --no-scale
# --no-scale-pending`, ROUNDS times each, the two daemons in turn), then the
# GPU rows with the paced CPU rows (`--mode gpu`) for each, then the
# spinning daemon's gate rows. One bench (this tree's) drives both daemons.
# Logs go to $OUT (default: ./gpu-ab-logs), at most eight files; summary.txt
# ends with the rows the targets name, side by side. Without a GPU the GPU
# part is skipped (the bench exits 77) and the CPU rows still run.
set -u
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: $0 BASE-COMMIT|BASE-DIR" >&2; exit 2; }
BASE=$1
OUT=${OUT:-$PWD/gpu-ab-logs}
BUILD=${BUILD:-build-ab}
ROUNDS=${ROUNDS:-2}
ITER=${ITER:-2000}
mkdir -p "$OUT"
S="$OUT/summary.txt"
SRC=$(mktemp -d /tmp/cuflag-ab-XXXXXX)
trap 'rm -rf "$SRC"' EXIT
{
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
	nproc
	rev=$(git rev-parse --short HEAD 2>/dev/null) || rev="this tree"
	[ "$rev" = "this tree" ] || git diff --quiet HEAD || rev="$rev (and changes)"
	echo "new: $rev; base: $BASE"
} >"$S"
# The base tree, built beside this one (the daemon only). Configured from
# inside it: `meson setup DIR` run from this tree's root configures this
# tree, wherever DIR is.
if [ -d "$BASE" ]; then
	cp -r "$BASE"/. "$SRC" && rm -rf "$SRC/build"
else
	git archive "$BASE" | tar -x -C "$SRC" || { echo "no commit $BASE" >&2; exit 2; }
fi
{
	meson setup "$BUILD" -Dsystemd=disabled -Dtests=false &&
		ninja -C "$BUILD" daemon/cuflagd bench/cuflag-bench &&
		(cd "$SRC" && meson setup build -Dsystemd=disabled -Dtests=false) &&
		ninja -C "$SRC/build" daemon/cuflagd
} >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
# Both daemons from this tree would compare a tree with itself.
grep -q "\"source\": *\"$(realpath "$SRC")\"" "$SRC/build/meson-info/meson-info.json" ||
	{ echo "the base build is not of $SRC" >&2; exit 1; }
BENCH=$BUILD/bench/cuflag-bench
NEW=$PWD/$BUILD/daemon/cuflagd
OLD=$SRC/build/daemon/cuflagd
ulimit -n 1048576 2>/dev/null || true
# The CPU rows of every round in one file per daemon, rounds marked.
for i in $(seq "$ROUNDS"); do
	for v in new base; do
		[ $v = new ] && d=$NEW || d=$OLD
		echo "== round $i" >>"$OUT/cpu-$v.txt"
		"$BENCH" --mode cpu --no-scale --no-scale-pending --daemon "$d" >>"$OUT/cpu-$v.txt" 2>&1
		echo "cpu $v round $i: $?" >>"$S"
	done
done
for v in new base; do
	[ $v = new ] && d=$NEW || d=$OLD
	"$BENCH" --mode gpu --iterations "$ITER" --daemon "$d" >"$OUT/gpu-$v.txt" 2>&1
	echo "gpu $v: $?" >>"$S"
done
"$BENCH" --mode gpu --iterations "$ITER" --no-paced --scanner-mode spin --daemon "$NEW" \
	>"$OUT/gpu-spin.txt" 2>&1
echo "gpu spin: $?" >>"$S"
# The rows the targets name, each file's lines one after the other.
for f in cpu-new cpu-base; do
	echo "-- $f: run, asked/s, done/s, % of a core, us/compl, wakes/c, sleeps/c, spin us/c, late us" >>"$S"
	grep -E "^  scan-adaptive-(1k|10k|mixed) +[0-9]+ " "$OUT/$f.txt" >>"$S"
done
for f in gpu-new gpu-base gpu-spin; do
	[ -s "$OUT/$f.txt" ] || continue
	echo "-- $f: mechanism p50 p90 p99 max n; paced CPU us a completion" >>"$S"
	grep -E "^  (cuflagd|cuflagd-group|devsig-blocked|event-blocking|hostfunc) +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]" "$OUT/$f.txt" >>"$S"
	grep -E "^  paced-(1|10)k-[a-z-]+ ((cpu|daemon|spin)_us|wakeups)/completion" "$OUT/$f.txt" >>"$S"
done
cat "$S"
