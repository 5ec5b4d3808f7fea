#!/bin/sh
# SPDX-License-Identifier: MIT
# Build the Python wheel, offline, from this tree: the cuflag package with its
# own libcuflag-client, cuflagd and cuflagctl in cuflag/_native/, console
# entry points cuflagd and cuflagctl. Then, on any machine with a glibc at
# least as new as this one's and any Python from 3.9 on, as any user:
#   python3 -m venv venv && venv/bin/pip install --no-index dist/cuflag-*.whl
#
#   scripts/build-wheel.sh             into dist/ (builds in build-wheel/)
#   BUILD=dir DIST=dir scripts/build-wheel.sh
#
# The programs link only the C library (no libsystemd: the wheel's cuflagd
# runs without socket activation and sd_notify); libcuda.so.1 is loaded at
# first use, as always, so one wheel serves machines with and without a GPU.
# The platform tag is manylinux_2_XX for the newest GLIBC_2.XX symbol version
# the three programs need (objdump -T), checked, not assumed; a library they
# would need outside the manylinux set stops the build. Needs the CUDA
# toolkit's cuda.h (CUDADIR, default /usr/local/cuda) for the CUDA binding:
# without it the wheel's cuflag_cuda_signal() answers ENOSYS, and the build
# says so (CUFLAG_CUDA=enabled makes that an error).
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
need_packages meson ninja-build gcc pkg-config binutils python3 python3-wheel
BUILD=${BUILD:-build-wheel}
DIST=${DIST:-dist}
CUDADIR=${CUDADIR:-/usr/local/cuda}
CUFLAG_CUDA=${CUFLAG_CUDA:-auto}
# Debian's interpreter and its wheel module, whatever python3 the PATH has.
PY=/usr/bin/python3

mkdir -p "$BUILD"
log=$BUILD/wheel-build.log
opts="-Dsystemd=disabled -Dtests=false -Dbuildtype=release -Dcuda=$CUFLAG_CUDA -Dcudadir=$CUDADIR"
if [ -f "$BUILD/build.ninja" ]; then
	# shellcheck disable=SC2086
	meson setup --reconfigure "$BUILD" $opts >"$log" 2>&1 || { cat "$log"; exit 1; }
else
	# shellcheck disable=SC2086
	meson setup "$BUILD" $opts >"$log" 2>&1 || { cat "$log"; exit 1; }
fi
version=$(meson introspect --projectinfo "$BUILD" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["version"])')
# The three programs only, not the tests, tools and benchmarks.
ninja -C "$BUILD" "client/libcuflag-client.so.$version" daemon/cuflagd ctl/cuflagctl >>"$log" 2>&1 ||
	{ tail -40 "$log"; exit 1; }

grep -q "^version = \"$version\"$" python/pyproject.toml ||
	{ echo "python/pyproject.toml's version is not meson.build's $version" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/cuflag-$version
dist_info=$pkg/cuflag-$version.dist-info
mkdir -p "$pkg/cuflag/_native" "$dist_info"
cp python/cuflag/*.py "$pkg/cuflag/"
native=$pkg/cuflag/_native
cp "$BUILD/client/libcuflag-client.so.0" "$native/libcuflag-client.so.0"
cp "$BUILD/daemon/cuflagd" "$BUILD/ctl/cuflagctl" "$native/"
for f in "$native"/*; do
	strip --strip-unneeded "$f"
done
chmod 0755 "$native/cuflagd" "$native/cuflagctl"
chmod 0644 "$native/libcuflag-client.so.0"

# What the programs need of the system: only the C library's parts that
# every manylinux system has, and which glibc version.
for f in "$native"/*; do
	objdump -p "$f" | awk '$1 == "NEEDED" { print $2 }'
done | sort -u >"$stage/needed"
bad=$(grep -Ev '^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2)$' "$stage/needed" || true)
if [ -n "$bad" ]; then
	echo "the wheel's programs need libraries outside the manylinux set: $bad" >&2
	exit 1
fi
glibc=$(for f in "$native"/*; do objdump -T "$f"; done |
	grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
glibc_minor=${glibc#GLIBC_2.}
arch=$(uname -m)
tag=py3-none-manylinux_2_${glibc_minor}_$arch
# meson's summary of the configuration says whether cuda.h was found.
if grep -Eq 'cuda binding *: *(YES|True)' "$log"; then
	cuda=yes
else
	cuda=no
fi

{
	echo "Metadata-Version: 2.1"
	echo "Name: cuflag"
	echo "Version: $version"
	echo "Summary: GPU completion flags from cuflagd, for any event loop (with the library and the daemon)"
	echo "License: MIT"
	echo "Requires-Python: >=3.9"
	echo "Classifier: Operating System :: POSIX :: Linux"
	echo "Classifier: Programming Language :: Python :: 3"
	echo "Description-Content-Type: text/markdown"
	echo
	cat python/README.md
} >"$dist_info/METADATA"
{
	echo "Wheel-Version: 1.0"
	echo "Generator: cuflag scripts/build-wheel.sh"
	echo "Root-Is-Purelib: false"
	echo "Tag: $tag"
} >"$dist_info/WHEEL"
cat >"$dist_info/entry_points.txt" <<EOF
[console_scripts]
cuflagctl = cuflag.ctl:main
cuflagd = cuflag.daemon:main
EOF
cp debian/copyright "$dist_info/LICENSE"

mkdir -p "$DIST"
rm -f "$DIST/cuflag-$version-"*.whl
"$PY" -m wheel pack --dest-dir "$DIST" "$pkg" >/dev/null
whl=$DIST/cuflag-$version-$tag.whl
[ -f "$whl" ] || { echo "wheel pack made no $whl" >&2; exit 1; }
echo "$whl: cuflag $version, $tag (newest symbol $glibc), CUDA binding: $cuda"
if [ "$cuda" = no ]; then
	echo "warning: no cuda.h under $CUDADIR: this wheel's library has no CUDA binding" >&2
fi
