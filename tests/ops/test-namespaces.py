#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A client as a Kubernetes pod runs it: in its own user, pid and mount
namespaces (unshare), as an unprivileged user outside that is root inside,
seeing only the daemon's socket directory, mounted read-only at /run/cuflagd
(as deploy/pytorch-example.yaml mounts it). It is
served with exact counts, and cuflagctl names it by its pid and uid outside
the namespaces, which is what the daemon's per-uid limits apply to; a
daemon in a pid namespace of its own (a DaemonSet without hostPID) sees no
pid for it (0), only the uid. Without
the socket's group it is refused: being root in its own user namespace
gives it nothing outside.

The pod's user runs copies of the programs (and of the library they load)
in the test's own directory, never the build tree: a checkout in a
directory other users cannot enter (0700, as under /root) must pass too.
Inside, the checkout is hidden under an empty tmpfs where the pod's user
could reach it, so a path into the build tree would fail here as well.

Needs root (to take on the test's uid and group) and user namespaces:
exit 77 with one line where either is missing."""
import os
import shutil
import subprocess
import sys
import tempfile

from opsutil import copies_for_users, ctl_json, expect, running_daemon, wait_for

SLOT_HOLDER = os.environ["SLOT_HOLDER"]
CUFLAG_DEMO = os.environ["CUFLAG_DEMO"]
# What the pod must not need: the checkout and the build tree.
HIDE = [os.environ["SOURCE_ROOT"], os.environ["BUILD_ROOT"]]
POD = {}  # the copies the pod runs (copies_for_users)
# The pod's user outside its user namespace, and the group that may use the
# socket (a pod's supplementalGroups): ids no one else on a test machine uses.
UID, SOCKET_GID = 47110, 47111

# In the new namespaces: a fresh /run with only the socket directory in it,
# and the daemon's own path to it hidden, then the client.
INSIDE = r'''
set -e
host_dir=$1
shift
for d in $HIDE; do
        if [ -d "$d" ]; then mount -t tmpfs -o mode=0700 tmpfs "$d"; fi
done
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir /run/cuflagd
mount --bind "$host_dir" /run/cuflagd
mount -o remount,bind,ro /run/cuflagd
grep -q ' /run/cuflagd ro[ ,]' /proc/self/mountinfo
mount -t tmpfs -o mode=0755 tmpfs "$host_dir"
[ ! -e "$host_dir/cuflagd.sock" ] && [ -S /run/cuflagd/cuflagd.sock ]
echo "inside: uid $(id -u) pid $$"
exec "$@"
'''


def skip(why):
    print(f"namespaces: skipped: {why}")
    sys.exit(77)


def in_pod(host_dir, *argv, groups=f"--groups={SOCKET_GID}", **kw):
    """argv in new user (uid UID outside, 0 inside), pid and mount
    namespaces, as the pod's user with the socket's group (groups: the
    setpriv option for the supplementary groups)."""
    cmd = ["setpriv", f"--reuid={UID}", f"--regid={UID}", groups,
           "unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
           "--mount-proc", "sh", "-c", INSIDE, "sh", host_dir, *argv]
    env = dict(os.environ, CUFLAG_SOCKET="/run/cuflagd/cuflagd.sock", HIDE=" ".join(HIDE),
               LD_LIBRARY_PATH=os.path.dirname(argv[0]))
    return subprocess.Popen(cmd, env=env, text=True, **kw)



def outside_pid(unshare_pid):
    """The pid outside of unshare's child, the namespace's pid 1."""
    with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
        kids = f.read().split()
    expect(len(kids) == 1, f"unshare has one child: {kids}")
    pid = int(kids[0])
    with open(f"/proc/{pid}/status") as f:
        nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
    expect(nspid == [str(pid), "1"], f"pid {pid} is pid 1 of its namespace: {nspid}")
    return pid


def hold(host_dir):
    """A client in the pod's namespaces holding 3 slots, 1 armed; returns
    it once it is ready."""
    holder = in_pod(host_dir, POD["holder"], "/run/cuflagd/cuflagd.sock", "3", "1",
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        inside = holder.stdout.readline().split()
        expect(inside == ["inside:", "uid", "0", "pid", "1"], f"root and pid 1 inside: {inside}")
        ready = holder.stdout.readline().split()
        expect(ready == ["ready", "1"], f"the holder is pid 1 in its namespace: {ready}")
    except BaseException:
        holder.kill()
        raise
    return holder


def release(holder, sock):
    holder.stdin.close()
    rc = holder.wait(timeout=10)
    expect(rc == 0, f"holder exit status {rc}")
    wait_for("the holder to go", lambda: ctl_json(sock, "clients")["clients"] == [])


def the_client(sock):
    """cuflagctl's one client, once its arm has reached the daemon."""
    clients = wait_for("the holder's arm", lambda: (lambda c: c if c["clients"] and
                       c["clients"][0]["pending"] == 1 else None)(ctl_json(sock, "clients")))
    expect(len(clients["clients"]) == 1, "one client")
    c = clients["clients"][0]
    expect(c["uid"] == UID and c["gid"] == UID, f"named by its uid outside, {UID}: {c}")
    expect(c["slots"] == 3 and c["armed"] == 1, f"3 slots, 1 armed: {c}")
    return c


def check_named(host_dir, sock):
    holder = hold(host_dir)
    try:
        pid = outside_pid(holder.pid)
        c = the_client(sock)
        expect(c["pid"] == pid, f"named by its pid outside, {pid}: {c['pid']}")
        print(f"namespaces: pid 1 uid 0 inside is pid {pid} uid {UID} to cuflagd")
    finally:
        release(holder, sock)


def check_daemon_in_pod(tmp, host_dir):
    """cuflagd in a pid namespace of its own, as in a DaemonSet without
    hostPID: a client of another pid namespace has no pid there (0), and is
    still named by its uid."""
    with running_daemon(tmp, sock=os.path.join(host_dir, "cuflagd.sock"),
                        wrap=("unshare", "--pid", "--fork", "--mount-proc")) as sock:
        os.chown(sock, 0, SOCKET_GID)
        holder = hold(host_dir)
        try:
            c = the_client(sock)
            expect(c["pid"] == 0, f"no pid across sibling pid namespaces: {c['pid']}")
            print(f"namespaces: to a cuflagd in its own pid namespace: pid 0 uid {UID}")
        finally:
            release(holder, sock)


def check_refused(host_dir):
    """Root inside its user namespace is nobody to the socket: without the
    socket's group the pod is refused."""
    p = in_pod(host_dir, POD["holder"], "/run/cuflagd/cuflagd.sock", "1", "0",
               groups="--clear-groups", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
               stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=30)
    expect(p.returncode == 1 and "Permission denied" in err,
           f"a pod without the socket's group is refused: exit {p.returncode}: {out} {err}")
    print("namespaces: without the socket's group: refused (EACCES)")


def check_counts(host_dir, sock):
    before = ctl_json(sock, "stats")["completions"]
    slots, per_slot, samples = 8, 2000, 100
    demo = in_pod(host_dir, POD["demo"], "--device", "sim", "--slots", str(slots),
                  "--completions", str(per_slot), "--samples", str(samples),
                  stdout=subprocess.PIPE)
    out = demo.communicate(timeout=120)[0]
    expect(demo.returncode == 0 and "every count exact" in out,
           f"cuflag-demo in the namespaces: exit {demo.returncode}: {out}")
    want = slots * per_slot + samples
    done = wait_for("the daemon's count", lambda: (lambda n: n if n - before >= want else None)(
        ctl_json(sock, "stats")["completions"]))
    expect(done - before == want, f"the daemon signalled {done - before}, not {want}")
    print(f"namespaces: {want} completions counted exactly on both sides")


def main():
    if os.geteuid() != 0:
        skip("not root")
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            skip(f"{tool} not found")
    probe = subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
                            "unshare", "--user", "--map-root-user", "--pid", "--fork",
                            "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        skip(f"no user namespaces here: {probe.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="cuflag-ns-") as tmp:
        os.chmod(tmp, 0o755)
        POD["holder"], POD["demo"] = copies_for_users(tmp, SLOT_HOLDER, CUFLAG_DEMO)
        # The node's directory that a DaemonSet shares by hostPath.
        host_dir = os.path.join(tmp, "host-run-cuflagd")
        os.mkdir(host_dir, 0o755)
        with running_daemon(tmp, sock=os.path.join(host_dir, "cuflagd.sock")) as sock:
            os.chown(sock, 0, SOCKET_GID)
            check_named(host_dir, sock)
            check_refused(host_dir)
            check_counts(host_dir, sock)
        check_daemon_in_pod(tmp, host_dir)
    print("namespaces: ok")


if __name__ == "__main__":
    main()
