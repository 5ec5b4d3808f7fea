#!/bin/sh
# The attack suite in rounds (docs/bench-log/2026-12-02-attack-rounds.md has
# the rounds of 2026-12-02; docs/RELIABILITY.md the suite): a clean
# clone of HEAD in a fresh 0700 directory, built, then the suite run ROUNDS
# times (default 4): the first QUIET rounds (default 2) on the machine as it
# is, the rest beside a process that keeps one CPU busy. Each round runs as
# scripts/test.sh does: an attack that missed a target while the machine
# itself stalled is measured again, up to four times. One line a round: which
# attacks missed at first, and whether the round passed.
#   scripts/attack-rounds.sh [ROUNDS [QUIET]]
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-4}
quiet=${2:-2}
dir=$(mktemp -d /tmp/cuflag-rounds.XXXXXX) # mktemp makes it 0700
git clone -q "$PWD" "$dir/src"
cd "$dir/src"
meson setup build -Dwerror=true >"$dir/build.log" 2>&1
ninja -C build >>"$dir/build.log" 2>&1

results() {
	python3 -c 'import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] not in ("OK", "SKIP", "EXPECTEDFAIL"):
        print(t["name"].split(" / ")[-1])' build/meson-logs/testlog.json
}
again() {
	meson test -C build "$1" >>"$log" 2>&1 && [ -z "$(results)" ]
}

failed=0
r=1
while [ "$r" -le "$rounds" ]; do
	hog=
	if [ "$r" -gt "$quiet" ]; then
		sh -c 'while :; do :; done' &
		hog=$!
	fi
	log="$dir/round-$r.log"
	first=ok
	verdict=passed
	if ! meson test -C build --print-errorlogs --suite attack >"$log" 2>&1; then
		missed=$(results)
		first="missed: $(echo $missed)"
		for t in $missed; do
			again "$t" || again "$t" || again "$t" || again "$t" || verdict=FAILED
		done
		[ -n "$missed" ] || verdict=FAILED
	fi
	[ -n "$hog" ] && kill "$hog"
	[ "$verdict" = passed ] || failed=1
	echo "round $r ($([ -n "$hog" ] && echo "a CPU kept busy" || echo quiet)," \
		"load $(cut -d' ' -f1 /proc/loadavg)): first run $first; $verdict"
	r=$((r + 1))
done
echo "logs: $dir"
exit $failed
