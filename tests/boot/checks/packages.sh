# SPDX-License-Identifier: MIT
# The Debian packages as a node's admin installs them, on Debian 12 booted
# with systemd as PID 1. Host side: scripts/test-packages.sh passes the .debs
# and steady-client.py with --file.
. /opt/cuflag-boot/lib.sh
cd "$BOOT_FILES"
sock=/run/cuflagd/cuflagd.sock

# 1. Install with apt, from the files alone (the base root has python3; the container has no network).
expect "apt installs the packages" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y "$BOOT_FILES"/cuflagd_*.deb "$BOOT_FILES"/libcuflag-client0_*.deb \
	"$BOOT_FILES"/libcuflag-client-dev_*.deb "$BOOT_FILES"/python3-cuflag_*.deb
expect "user cuflag exists" getent passwd cuflag
expect "group cuflag exists" getent group cuflag
expect "cuflagd.socket is enabled" systemctl is-enabled cuflagd.socket
expect "cuflagd.socket is listening" systemctl is-active cuflagd.socket
[ "$(stat -c '%F %a %U %G' $sock)" = "socket 660 root cuflag" ] ||
	fail "socket is $(stat -c '%F %a %U %G' $sock), not socket 660 root cuflag"
ok "$sock is a socket, 0660 root:cuflag"
refuse "cuflagd.service is not started by the installation" systemctl is-active cuflagd.service

# 2. Who is served.
useradd --create-home alice
useradd --create-home bob
usermod -a -G cuflag alice
cat >one.py <<'PY'
import cuflag
with cuflag.Client() as c:
    s = c.acquire()
    t = s.arm()
    s.store(t)
    s.wait(t, timeout=5)
    print("served, epoch", c.epoch)
PY
expect "a member of cuflag is served (the daemon starts on its connection)" \
	as_user alice python3 one.py
expect "cuflagd.service runs after that connection" systemctl is-active cuflagd.service
# A user outside cuflag: the node daemon refuses him (EACCES), and with no
# socket named his client falls back to a cuflagd of his own, which the
# library starts from the installed binary and which says why.
out=$(as_user bob env CUFLAG_SOCKET=$sock python3 one.py 2>&1) &&
	fail "a user outside cuflag was served by the node daemon: $out"
echo "$out" | grep -q PermissionError || { echo "$out"; fail "bob's refusal is not EACCES"; }
ok "a user outside cuflag is refused by the node daemon (EACCES)"
node=$(as_user alice python3 one.py) || fail "alice: $node"
own=$(as_user bob python3 one.py 2>&1) || { echo "$own"; fail "bob is not served by his own daemon"; }
[ "$own" != "$node" ] || fail "bob was served by the node daemon ($own)"
bobs=""  # the minimal root has no procps: look in /proc
for d in /proc/[0-9]*; do
	[ "$(cat "$d/comm" 2>/dev/null)" = cuflagd ] && [ "$(stat -c %U "$d")" = bob ] && bobs="$bobs ${d#/proc/}"
done
[ -n "$bobs" ] || fail "no cuflagd of bob's runs"
st=$(as_user bob cuflagctl status --json) || { echo "$st"; fail "cuflagctl status as bob"; }
echo "$st" | python3 -c 'import json, sys
d = json.load(sys.stdin)
sys.exit(0 if d["daemon"] == "user" and "not in group cuflag" in d["daemon_why"] else 1)' ||
	{ echo "$st"; fail "bob's status does not say his own daemon and why"; }
ok "a user outside cuflag falls back to his own cuflagd, and status says why ($own)"
kill $bobs
expect "cuflagctl status" cuflagctl status
expect "cuflag-demo as a member of cuflag" \
	as_user alice cuflag-demo --device sim --completions 200 --samples 100
expect "python3 -c 'import cuflag'" python3 -c 'import cuflag; print(cuflag.library_version())'
for page in man8/cuflagd.8 man1/cuflagctl.1 man1/cuflag-bench.1 man1/cuflag-demo.1 \
	man3/libcuflag-client.3 \
	man3/cuflag_connect.3; do
	[ -e "/usr/share/man/$page.gz" ] || fail "man page $page not installed"
done
ok "man pages installed"
expect "headers and pkg-config files" test -f /usr/include/cuflag/cuflag.h \
	-a -f /usr/include/cuflag/cuflag_cuda.h \
	-a -f /usr/lib/x86_64-linux-gnu/pkgconfig/cuflag-client.pc \
	-a -f /usr/lib/x86_64-linux-gnu/pkgconfig/cuflag-client-cuda.pc

# 3. An upgrade in the middle of a client's run keeps its completions: the
# client has no restart code, the library resumes with the new daemon.
pid_before=$(systemctl show -P MainPID cuflagd.service)
run=$(mktemp -d)
chown alice "$run"
cd "$run"
as_user alice python3 "$BOOT_FILES/steady-client.py" progress stop >client.out 2>&1 &
client=$!
counted() { [ -f progress ] && [ "$(cut -d' ' -f2 progress)" -ge "$1" ]; }
wait_for 30 counted 2000 || { cat client.out; fail "the client did not get going"; }
expect "apt-get install --reinstall cuflagd (an upgrade)" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --reinstall "$BOOT_FILES"/cuflagd_*.deb
pid_after=$(systemctl show -P MainPID cuflagd.service)
[ "$pid_after" != "$pid_before" ] || fail "the upgrade did not restart cuflagd (MainPID $pid_before)"
ok "the upgrade restarted cuflagd (MainPID $pid_before -> $pid_after)"
before=$(cut -d' ' -f2 progress)
wait_for 30 counted $((before + 2000)) || { cat client.out; fail "no completions after the upgrade"; }
touch stop
wait $client || { cat client.out; fail "the client lost or doubled completions across the upgrade"; }
cat client.out
grep -q "epochs=2" client.out || fail "the client did not see the new daemon"
ok "every completion counted once across the upgrade"

# 4. Purge leaves nothing behind.
expect "apt-get purge" env DEBIAN_FRONTEND=noninteractive apt-get purge -y \
	cuflagd libcuflag-client0 libcuflag-client-dev python3-cuflag
left=$(find /etc/systemd /lib/systemd /usr/lib/systemd /run/systemd/system -name 'cuflagd*' 2>/dev/null)
[ -z "$left" ] || { echo "$left"; fail "unit files or links left"; }
loaded=$(systemctl list-units --all --no-legend --plain 'cuflagd*')
[ -z "$loaded" ] || { echo "$loaded"; fail "units still loaded"; }
refuse "no user cuflag left" getent passwd cuflag
refuse "no group cuflag left" getent group cuflag
refuse "no group cuflag-admin left" getent group cuflag-admin
[ ! -e $sock ] || fail "$sock left"
[ ! -e /run/cuflagd ] || fail "/run/cuflagd left"
grep -qx cuflagd /proc/[0-9]*/comm 2>/dev/null && fail "a cuflagd process is left"
ok "purge left no unit, user, group, socket or process"
