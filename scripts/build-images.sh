#!/bin/sh
# The cuflagd image with no registry: a Debian 12 root made by debootstrap
# (from the Debian archive, as apt uses it), the Debian packages of this tree
# installed in it as deploy/Dockerfile's target cuflagd does (user cuflag
# with the fixed id 9431), committed by buildah. The image also holds
# libcuflag-client0, python3-cuflag and python3, so that a client container
# can be started from it too.
#   scripts/build-images.sh [--cuda | --no-cuda] [IMAGE]
#        IMAGE: default localhost/cuflagd:VERSION
#   DEBS=dir scripts/build-images.sh   on packages built before
# The packages are built by scripts/build-debs.sh (DEB_BUILD_OPTIONS=nocheck:
# the suites are scripts/test.sh's job): with the CUDA binding where the
# toolkit's cuda.h is found (CUDADIR, default /usr/local/cuda), --cuda makes
# a missing toolkit an error, --no-cuda leaves the binding out. As root.
# BOOT_CACHE (default /var/tmp/cuflag-boot) keeps the debootstrap root,
# BOOT_MIRROR names the Debian mirror.
set -eu
cd "$(dirname "$0")/.."
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
cuda=auto
CUDADIR=${CUDADIR:-/usr/local/cuda}
export CUDADIR
case "${1:-}" in
--cuda) cuda=enabled; shift ;;
--no-cuda) cuda=disabled; shift ;;
-*) echo "usage: scripts/build-images.sh [--cuda | --no-cuda] [IMAGE]" >&2; exit 2 ;;
esac
image=${1:-localhost/cuflagd:$version}
[ "$(id -u)" = 0 ] || { echo "build-images: run it as root" >&2; exit 1; }
. scripts/deps.sh
need_packages buildah debootstrap

work=$(mktemp -d /var/tmp/cuflag-images.XXXXXX)
ctr=
cleanup() {
	[ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

debs=${DEBS:-}
if [ -z "$debs" ]; then
	debs=$work/debs
	CUFLAG_CUDA=$cuda DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-nocheck}" \
		scripts/build-debs.sh "$debs" >"$work/debs.log" 2>&1 ||
		{ tail -40 "$work/debs.log"; echo "build-images: the packages did not build"; exit 1; }
fi

cache=${BOOT_CACHE:-/var/tmp/cuflag-boot}
mkdir -p "$cache"
base=$cache/containers-bookworm
if [ ! -e "$base/.complete" ]; then
	rm -rf "$base.tmp"
	debootstrap --variant=minbase --include=systemd-standalone-sysusers bookworm "$base.tmp" \
		"${BOOT_MIRROR:-http://deb.debian.org/debian}" >"$cache/containers.log" 2>&1 || {
		echo "build-images: debootstrap failed (log: $cache/containers.log)"
		exit 1
	}
	touch "$base.tmp/.complete"
	mv "$base.tmp" "$base"
fi
root=$work/root
cp -a "$base/." "$root/"
mkdir -p "$root/tmp/debs"
cp "$debs"/cuflagd_*.deb "$debs"/libcuflag-client0_*.deb "$debs"/python3-cuflag_*.deb \
	"$root/tmp/debs/"
chroot "$root" sh -euc '
	groupadd --system --gid 9431 cuflag
	useradd --system -K SYS_UID_MAX=65535 --uid 9431 --gid cuflag --no-create-home \
		--home-dir / --shell /usr/sbin/nologin cuflag
	apt-get install -y --no-install-recommends /tmp/debs/*.deb python3 >/dev/null
	rm -rf /tmp/debs /var/cache/apt/archives/*.deb' ||
	{ echo "build-images: the packages do not install in the image root"; exit 1; }
ctr=$(buildah from scratch)
mnt=$(buildah mount "$ctr")
cp -a "$root/." "$mnt/"
buildah umount "$ctr" >/dev/null
buildah config --user 9431:9431 --entrypoint '["/usr/sbin/cuflagd"]' \
	--cmd '--socket /run/cuflagd/cuflagd.sock' "$ctr"
buildah commit -q "$ctr" "$image" >/dev/null
buildah rm "$ctr" >/dev/null
ctr=
echo "build-images: built $image (CUDA binding: $cuda; auto: where $CUDADIR/include/cuda.h was)"
