#!/bin/sh
# Build the Debian packages from this tree and check them with lintian.
#   scripts/build-debs.sh [OUTDIR]     (default: ./debs)
# The tree (tracked and untracked files that git does not ignore) is copied
# to a scratch directory first: dpkg-buildpackage writes its results next to
# the source and would otherwise litter the parent of the checkout. Missing
# build dependencies are installed (as root) from debian/control.
# DEB_BUILD_OPTIONS is passed through (nocheck skips the build's test suites,
# as scripts/test.sh does after running them itself).
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
need_packages dpkg-dev debhelper lintian fakeroot
out=$(realpath -m "${1:-debs}")
mkdir -p "$out"

work=$(mktemp -d /tmp/cuflag-debs.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/cuflag"
# (A tracked file deleted in the tree is skipped, not an error.) Outside a
# git checkout (an unpacked tarball), everything but build trees and debs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		tar --null --ignore-failed-read -T - -cf - 2>/dev/null
else
	tar --exclude='./build*' --exclude='./obj-*' --exclude=./debs -cf - .
fi | tar -xf - -C "$work/cuflag"
cd "$work/cuflag"
if ! dpkg-checkbuilddeps >/dev/null 2>&1; then
	[ "$(id -u)" = 0 ] || { dpkg-checkbuilddeps; exit 1; }
	echo "installing the build dependencies"
	DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq ./ >/dev/null
fi
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=${JOBS:-2}"
case " $DEB_BUILD_OPTIONS " in
*" nocheck "*) echo "building the packages (DEB_BUILD_OPTIONS=nocheck: no test suites)" ;;
*) echo "building the packages; dpkg-buildpackage runs the unit, integration and api" \
	"suites first (minutes; DEB_BUILD_OPTIONS=nocheck skips them)" ;;
esac
dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1 || { tail -60 "$work/build.log"; exit 1; }
changes=$(ls "$work"/cuflag_*.changes)
# Errors fail the build; warnings are printed for the record.
lintian --fail-on error --info "$changes" >"$work/lintian.log" 2>&1 || {
	cat "$work/lintian.log"
	echo "lintian: errors"
	exit 1
}
sed 's/^/lintian: /' "$work/lintian.log"
echo "lintian: no errors ($(grep -c '^W:' "$work/lintian.log" || true) warnings)"
rm -f "$out"/*.deb
cp "$work"/*.deb "$out"/
ls -1 "$out"/*.deb
