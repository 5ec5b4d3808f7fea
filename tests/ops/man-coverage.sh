#!/bin/sh
# SPDX-License-Identifier: MIT
# The man pages document what the code offers: every long option cuflagd and
# cuflagctl accept, every cuflagctl command, every exported function and
# every function of cuflag_device.h (with a man3 link of its name), and each
# function's errors as its header comment lists them (man-errors.py);
# cuflagd(8)'s SYNOPSIS is exactly what `cuflagd --help` lists, and so is the
# table of options of docs/running.md.
#   man-coverage.sh SOURCE_ROOT CUFLAGD
set -eu
src=$1
cuflagd=$2
fail=0
missing() { echo "$1"; fail=1; }

# Long options from a getopt_long table: { "name", ...
options() { sed -n 's/^[[:space:]]*{ "\([a-z-]*\)",.*_argument.*/\1/p' "$1"; }

for opt in $(options "$src/daemon/base/config.c"); do
	roff=$(printf '%s' "--$opt" | sed 's/-/\\-/g')
	grep -qF -- "$roff" "$src/man/cuflagd.8" || missing "cuflagd.8: --$opt undocumented"
done
# --help's options, in its order; those of the SYNOPSIS's first form.
help_opts=$("$cuflagd" --help | sed -n 's/^  \(-h, \)\{0,1\}--\([a-z-]*\).*/\2/p' |
	grep -vx 'help\|version')
synopsis_opts=$(sed -n '/^\.SH SYNOPSIS/,/^\.YS/p' "$src/man/cuflagd.8" |
	sed -n 's/^\.OP \\-\\-\([^ ]*\).*/\1/p' | sed 's/\\-/-/g')
[ "$help_opts" = "$synopsis_opts" ] || {
	echo "cuflagd.8: the SYNOPSIS differs from cuflagd --help (< help, > synopsis):"
	printf '%s\n' "$help_opts" >/tmp/cuflag-help.$$
	printf '%s\n' "$synopsis_opts" >/tmp/cuflag-synopsis.$$
	diff /tmp/cuflag-help.$$ /tmp/cuflag-synopsis.$$ || true
	rm -f /tmp/cuflag-help.$$ /tmp/cuflag-synopsis.$$
	fail=1
}
for opt in $help_opts; do
	[ "$opt" = test-hooks ] && continue # for the tests only
	grep -q -- "^| \`--$opt[ \`]" "$src/docs/running.md" ||
		grep -q -- "^|.* / \`--$opt[ \`]" "$src/docs/running.md" ||
		missing "docs/running.md: --$opt not in the table of options"
done
for opt in $(options "$src/ctl/cuflagctl.c"); do
	roff=$(printf '%s' "--$opt" | sed 's/-/\\-/g')
	grep -qF -- "$roff" "$src/man/cuflagctl.1" || missing "cuflagctl.1: --$opt undocumented"
done
# cuflag-bench: its own options and those of the harness it shares with tests/perf/.
for opt in $(options "$src/bench/main.c") $(options "$src/bench/harness/opts.c"); do
	roff=$(printf '%s' "--$opt" | sed 's/-/\\-/g')
	grep -qF -- "$roff" "$src/man/cuflag-bench.1" || missing "cuflag-bench.1: --$opt undocumented"
done
for cmd in $(grep -o 'strcmp(cmd, "[a-z]*")' "$src/ctl/cuflagctl.c" | cut -d'"' -f2 | sort -u); do
	grep -qx "\.B $cmd" "$src/man/cuflagctl.1" || missing "cuflagctl.1: command $cmd undocumented"
done

# Each exported function: in the synopsis and with an entry of its own.
for fn in $(cat "$src"/client/include/cuflag/*.h |
	    sed -n 's/^CUFLAG_API[^(]*[ *]\(cuflag_[a-z0-9_]*\)(.*/\1/p'); do
	page=$src/man/libcuflag-client.3
	grep -qF "$fn(" "$page" || missing "libcuflag-client.3: $fn not in the synopsis"
	grep -A1 -x '\.TP' "$page" | grep -qx "\.BR $fn ()" ||
		missing "libcuflag-client.3: $fn has no entry"
	grep -qF "'$fn'" "$src/man/meson.build" || missing "man/meson.build: no $fn.3 link"
done
# The device header's functions (inline, for kernels): in the synopsis, with a man3 link.
for fn in $(sed -n 's/^static __device__[^(]*[ *]\(cuflag_device_[a-z0-9_]*\)(.*/\1/p' \
	    "$src/client/include/cuflag/cuflag_device.h"); do
	grep -qF "$fn(" "$src/man/libcuflag-client.3" || missing "libcuflag-client.3: $fn not in the synopsis"
	grep -qF "'$fn'" "$src/man/meson.build" || missing "man/meson.build: no $fn.3 link"
done
# Each function's errors, as its header comment lists them, in its entry.
python3 "$(dirname "$0")/man-errors.py" "$src" || fail=1
[ $fail -eq 0 ] && echo "man coverage: ok"
exit $fail
