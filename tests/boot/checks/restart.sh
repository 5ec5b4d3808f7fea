# SPDX-License-Identifier: MIT
# Restarts nobody notices but the log, under systemd as PID 1 (boot.sh
# --destdir, --file resume-soak): a client program with no restart code in it
# (resume-soak: 4 processes x 8 threads arming and completing, one thread per
# process counting through epoll) keeps every completion, exactly once,
# across `systemctl restart`, `systemctl kill -s KILL` (Restart=on-failure)
# and a daemon frozen with SIGSTOP, which the watchdog replaces. Prints the
# longest pause each process saw: what a restart costs a client.
. /opt/cuflag-boot/lib.sh

soak=$BOOT_FILES/resume-soak
sock=/run/cuflagd/cuflagd.sock
expect "sysusers, tmpfiles, units, socket" activate_install
useradd --create-home alice
usermod -a -G cuflag alice
useradd --create-home bob

main_pid() { systemctl show -P MainPID cuflagd.service; }
running() { [ "$(main_pid)" != 0 ] && [ "$(main_pid)" != "$1" ]; }

# Socket activation for a member; a user outside the group is refused.
expect "a member of cuflag is served (socket activation)" as_user alice "$soak" "$sock" 1 1 2
expect "cuflagd.service started by the connection" systemctl is-active cuflagd.service
refuse "a user outside group cuflag is refused" as_user bob "$soak" "$sock" 1 1 2

# systemctl restart: the gap a client sees.
as_user alice "$soak" "$sock" 6 4 8 >/tmp/soak-restart.log 2>&1 &
soak_pid=$!
sleep 2
old=$(main_pid)
t0=$(date +%s%N)
expect "systemctl restart cuflagd" systemctl restart cuflagd.service
ok "systemctl restart took $((($(date +%s%N) - t0) / 1000000)) ms"
wait_for 10 running "$old" || fail "no new cuflagd after the restart"
wait $soak_pid || { cat /tmp/soak-restart.log; fail "completions lost or counted twice across systemctl restart"; }
sed 's/^/  /' /tmp/soak-restart.log
ok "4 x 8 threads exact across systemctl restart"

# SIGKILL (Restart=on-failure), then a frozen daemon that the watchdog replaces.
as_user alice "$soak" "$sock" 26 4 8 >/tmp/soak-kill.log 2>&1 &
soak_pid=$!
sleep 2
old=$(main_pid)
expect "systemctl kill -s KILL cuflagd" systemctl kill -s KILL cuflagd.service
wait_for 10 running "$old" || fail "no new cuflagd after SIGKILL"
ok "restarted after SIGKILL"
sleep 3
old=$(main_pid)
kill -STOP "$old"
stopped=$(date +%s)
wdog=$(systemctl show -P WatchdogUSec cuflagd.service)
wait_for 25 running "$old" || fail "the watchdog did not replace a frozen cuflagd"
ok "a frozen cuflagd (SIGSTOP) replaced by the watchdog after $(($(date +%s) - stopped)) s (WatchdogSec $wdog)"
wait $soak_pid || { cat /tmp/soak-kill.log; fail "completions lost or counted twice across SIGKILL and the watchdog"; }
sed 's/^/  /' /tmp/soak-kill.log
ok "4 x 8 threads exact across SIGKILL and a watchdog restart"
expect "cuflagctl status" cuflagctl status
