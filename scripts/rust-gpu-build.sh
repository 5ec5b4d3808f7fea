#!/bin/sh
# rust-gpu-build.sh OUTDIR: the Rust crate's test executables and its GPU
# bench (examples/bench.rs), built here for a GPU machine that has no Rust
# toolchain: offline from Debian's crates, release, features cuda and tokio,
# linked against this tree's meson build of libcuflag-client (build/client,
# or $CUFLAG_LIB_DIR). Stripped into OUTDIR/tests/NAME and OUTDIR/bench, with
# OUTDIR/run.sh, which runs them there against that machine's own meson
# build of the same tree (libcuflag-client and cuflagd of build-gpu/).
# They need only libc, libgcc_s and libcuflag-client (libcuda.so.1 is
# loaded at run time); run.sh checks that before it runs anything.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${CUFLAG_LIB_DIR:-$root/build/client}
target=${CARGO_TARGET_DIR:-$root/build/rust-gpu-target}
if [ ! -e "$lib/libcuflag-client.so" ]; then
	echo "no $lib/libcuflag-client.so: build the library first (meson setup build && ninja -C build)" >&2
	exit 1
fi
mkdir -p "$1" "$target"
out=$(cd "$1" && pwd)
rm -rf "$out/tests" "$out/bench" "$out/run.sh"
mkdir "$out/tests"

# cargo reads rust/.cargo/config.toml (Debian's registry, offline) from rust/.
cd "$root/rust"
CUFLAG_LIB_DIR=$lib CARGO_TARGET_DIR=$target cargo test --offline --locked --release -j2 \
	-p cuflag --features cuda,tokio --no-run --message-format=json >"$target/artifacts.json"

# Each test executable as tests/NAME (NAME: its file under tests/), the bench
# example as bench.
python3 - "$target/artifacts.json" "$out" <<'EOF'
import json, shutil, sys
art, out = sys.argv[1], sys.argv[2]
n = 0
for line in open(art):
    m = json.loads(line)
    exe = m.get("executable") if m.get("reason") == "compiler-artifact" else None
    if not exe:
        continue
    kind, name = m["target"]["kind"], m["target"]["name"]
    if kind == ["test"]:
        shutil.copy(exe, "%s/tests/%s" % (out, name))
        n += 1
    elif kind == ["example"] and name == "bench":
        shutil.copy(exe, "%s/bench" % out)
if not n:
    sys.exit("no test executable in cargo's output")
EOF
[ -e "$out/bench" ] || { echo "cargo built no bench example" >&2; exit 1; }
strip --strip-all "$out/bench" "$out"/tests/*
cp "$root/scripts/rust-gpu-run.sh" "$out/run.sh"
chmod +x "$out/run.sh"

# Nothing beyond libc, libm, libgcc_s and libcuflag-client; glibc symbols of
# 2.36 (Debian 12) at most, which Ubuntu 24.04's 2.39 has.
bad=0
for f in "$out/bench" "$out"/tests/*; do
	for need in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		case $need in
		libc.so.6 | libm.so.6 | libgcc_s.so.1 | ld-linux-x86-64.so.2 | libcuflag-client.so.0) ;;
		*) echo "$f needs $need" >&2; bad=1 ;;
		esac
	done
	glibc=$(objdump -T "$f" | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | tail -1)
	minor=${glibc#GLIBC_2.}
	if [ "${minor%%.*}" -gt 36 ]; then
		echo "$f needs $glibc" >&2
		bad=1
	fi
done
[ $bad -eq 0 ] || exit 1
n=$(find "$out/tests" -type f | wc -l)
echo "$n test executables and the bench in $out ($(du -sh "$out" | cut -f1)); there: $out/run.sh [BUILD]"
