# SPDX-License-Identifier: MIT
# The harness itself: systemd is PID 1, the system reached multi-user.target
# and no unit failed. The smallest check; copy it to start a new one.
. /opt/cuflag-boot/lib.sh

[ "$(cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(cat /proc/1/comm), not systemd"
ok "systemd is PID 1"
expect "multi-user.target is active" systemctl is-active multi-user.target
failed=$(systemctl --failed --no-legend --plain | grep -v '^cuflag-boot-check' || true)
[ -z "$failed" ] || { echo "$failed"; fail "units failed"; }
ok "no unit failed"
