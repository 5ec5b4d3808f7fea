#!/bin/sh
# The library exports exactly the functions of its version script, each with
# its version node, and nothing else.
#   check-symbols.sh LIBRARY MAPFILE
set -eu
command -v nm >/dev/null 2>&1 || { echo "nm not found: skipped"; exit 77; }
lib=$1
map=$2
want=$(sed -n 's/^[[:space:]]*\(cuflag_[a-z0-9_]*\);.*/\1/p' "$map" | sort)
got=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort)
if [ "$want" != "$got" ]; then
	echo "exported symbols differ from $map:"
	printf '%s\n' "$want" >/tmp/cuflag-want.$$
	printf '%s\n' "$got" >/tmp/cuflag-got.$$
	diff /tmp/cuflag-want.$$ /tmp/cuflag-got.$$ || true
	rm -f /tmp/cuflag-want.$$ /tmp/cuflag-got.$$
	exit 1
fi
# Every exported function carries the version node.
if nm -D --defined-only "$lib" | awk '$2 == "T"' | grep -v '@@CUFLAG_' >/dev/null; then
	echo "a function without a version node"
	exit 1
fi
echo "exports: $(printf '%s\n' "$got" | wc -l) functions, all versioned"
