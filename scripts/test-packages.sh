#!/bin/sh
# Build the Debian packages (lintian-clean) and test them as an admin would
# use them: installed with apt into Debian 12 booted with systemd as PID 1
# (tests/boot/checks/packages.sh says what is checked).
#   scripts/test-packages.sh          build, then the boot test
#   DEBS=dir scripts/test-packages.sh the boot test on packages built before
# DEB_BUILD_OPTIONS passes through to the build (scripts/test.sh sets nocheck:
# it has run the suites itself). Exit 77 (one line) where this machine cannot
# boot a container.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
need_packages debootstrap systemd-container
debs=${DEBS:-}
if [ -z "$debs" ]; then
	debs=$(mktemp -d /tmp/cuflag-test-debs.XXXXXX)
	trap 'rm -rf "$debs"' EXIT INT TERM
	scripts/build-debs.sh "$debs"
fi
set --
for d in "$debs"/*.deb; do
	case $d in *-dbgsym_*) ;; *) set -- "$@" --file "$d" ;; esac
done
tests/boot/boot.sh --packages python3 "$@" --file tests/boot/files/steady-client.py \
	tests/boot/checks/packages.sh
# The packaged exporter scraped by Debian's Prometheus (a base root of its own).
tests/boot/boot.sh --packages "python3 prometheus" "$@" --file tests/boot/files/hold-stuck.py \
	tests/boot/checks/exporter.sh
# The DaemonSet's pod under podman, from images of the same packages (77:
# this machine cannot; the line says why).
rc=0
DEBS=$debs scripts/test-containers.sh || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
