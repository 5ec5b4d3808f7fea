# SPDX-License-Identifier: MIT
# The tree as `meson install` puts it (boot.sh --destdir), under systemd as
# PID 1: the hardened unit starts by socket activation and serves a member of
# cuflag; cuflagctl reports it. Host side: scripts/test.sh, after the plain
# build. The example to start from for checks of a source build.
. /opt/cuflag-boot/lib.sh

expect "sysusers, tmpfiles, units, socket" activate_install
useradd --create-home alice
usermod -a -G cuflag alice
expect "cuflag-demo as a member of cuflag (socket activation)" \
	as_user alice cuflag-demo --device sim --completions 2000 --samples 200
expect "cuflagd.service is active" systemctl is-active cuflagd.service
expect "cuflagctl status" cuflagctl status
expect "a clean stop" systemctl stop cuflagd.service
result=$(systemctl show -P Result cuflagd.service)
[ "$result" = success ] || fail "cuflagd.service stopped with result $result"
ok "cuflagd stopped with result success"
