#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerate the wake-latency CDF of the CPU mode as a PNG with gnuplot.
#
#   bench/plot.sh [CUFLAG_BENCH [OUT.png]]
#
# CUFLAG_BENCH defaults to build/bench/cuflag-bench, OUT.png to
# docs/latency-cdf-cpu.png; the handoff rows come from tests/perf/perf-handoff
# beside it in the build tree ($PERF_HANDOFF names another). Extra options for
# the runs go in $CUFLAG_BENCH_ARGS
# (for example "--iterations 5000"); $CUFLAGD names the daemon as for the bench.
set -eu

bench=${1:-build/bench/cuflag-bench}
out=${2:-docs/latency-cdf-cpu.png}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM

# shellcheck disable=SC2086 # word splitting of the extra options is wanted
"$bench" --mode cpu --dump-samples "$dir" ${CUFLAG_BENCH_ARGS:-} >"$dir/report.txt"
cat "$dir/report.txt"
# The handoff rows come from their own program, beside the bench in a build tree.
handoff=${PERF_HANDOFF:-$(dirname "$bench")/../tests/perf/perf-handoff}
if [ -x "$handoff" ]; then
	# shellcheck disable=SC2086
	"$handoff" --dump-samples "$dir/handoff" ${CUFLAG_BENCH_ARGS:-} || true
	mv "$dir"/handoff/handoff-*.txt "$dir/" 2>/dev/null || true
fi

plot=""
for name in eventfd-direct inproc-scanner cuflagd handoff-thread handoff-process; do
	f="$dir/$name.txt"
	[ -s "$f" ] || continue
	n=$(wc -l <"$f")
	plot="$plot${plot:+, }'$f' using 1:((\$0+1)/$n) with lines lw 2 title '$name'"
done
[ -n "$plot" ] || { echo "plot.sh: no samples were written" >&2; exit 1; }

gnuplot <<GP
set terminal pngcairo size 900,560 font ",11"
set output '$out'
set title "cuflag-bench --mode cpu: wake latency, store to waiter running"
set xlabel "latency (us, log scale)"
set ylabel "fraction of wakes at or below"
set logscale x
set grid xtics mxtics ytics
set key bottom right
set yrange [0:1]
plot $plot
GP
echo "wrote $out"
