#!/bin/sh
# Model-check park.pml with spin, then check that the checker can fail: the
# same model without the scanner's second look before it blocks must be
# caught losing a wake-up. Exit 77 without spin or a C compiler.
#   check-model.sh MODEL
set -eu
command -v spin >/dev/null 2>&1 || { echo "spin not found: skipped"; exit 77; }
command -v cc >/dev/null 2>&1 || { echo "cc not found: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

check() { # model file -> pan output in $dir/out.txt
	rm -f "$dir"/pan*
	cp "$1" "$dir/model.pml"
	(cd "$dir" && spin -a model.pml >/dev/null && cc -O2 -DSAFETY -o pan pan.c &&
		./pan -m100000 >out.txt 2>&1) || true
}

check "$1"
grep -E "errors|states, stored" "$dir/out.txt"
grep -q "errors: 0" "$dir/out.txt" || { cat "$dir/out.txt"; exit 1; }

sed 's/:: PENDING -> parked = 0/:: false -> parked = 0/' "$1" >"$dir/mutant.pml"
grep -q ":: false -> parked = 0" "$dir/mutant.pml" || { echo "mutation not applied"; exit 1; }
check "$dir/mutant.pml"
if grep -q "errors: 0" "$dir/out.txt"; then
	echo "the model without the second look passed: the check proves nothing"
	exit 1
fi
echo "without the second look: a lost wake-up found, as it must be"
