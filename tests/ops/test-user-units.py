#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The systemd --user units as the user manager runs them: a user who is not
root gets the socket of systemd/user/cuflagd.socket (%t is their runtime
directory, 0700 as DirectoryMode= makes it) from systemd-socket-activate,
which starts the ExecStart= of systemd/user/cuflagd.service (cuflagd --user,
here the build's) on it. A client of that user with no socket named, no
node daemon and CUFLAG_AUTOSPAWN=0 (so the library starts nothing itself)
reaches that daemon and runs the demo, every count exact; cuflagctl status
says it is the user's daemon.

In a mount namespace of its own: an empty /run (no node daemon), a copy of
/etc with the user in it. Needs root, unshare, setpriv, useradd,
systemd-socket-activate and a cuflagd built with libsystemd (the socket it
is passed): 77 without."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

from opsutil import copies_for_users, expect, wait_for

SOURCE_ROOT = os.environ["SOURCE_ROOT"]
CUFLAGD = os.environ["CUFLAGD"]
USER = "cuflag-units"


def unit_value(path, key):
    with open(path) as f:
        for line in f:
            if line.startswith(key + "="):
                return line.split("=", 1)[1].strip()
    sys.exit(f"user-units: no {key}= in {path}")


def inside():
    tmp = tempfile.mkdtemp(prefix="cuflag-units-")
    os.chmod(tmp, 0o755)
    subprocess.run(["cp", "-a", "/etc", os.path.join(tmp, "etc")], check=True)
    subprocess.run(["mount", "--bind", os.path.join(tmp, "etc"), "/etc"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run"], check=True)
    subprocess.run(["useradd", "--no-create-home", "--user-group", USER], check=True)
    pw = pwd.getpwnam(USER)
    daemon, demo, ctl = copies_for_users(tmp, CUFLAGD, os.environ["CUFLAG_DEMO"],
                                         os.environ["CUFLAGCTL"])
    runtime = os.path.join(tmp, "run-user")
    os.mkdir(runtime, 0o700)
    os.chown(runtime, pw.pw_uid, pw.pw_gid)
    units = os.path.join(SOURCE_ROOT, "systemd", "user")
    listen = unit_value(os.path.join(units, "cuflagd.socket"), "ListenSequentialPacket")
    expect(unit_value(os.path.join(units, "cuflagd.socket"), "DirectoryMode") == "0700",
           "the socket's directory is made 0700")
    sock = listen.replace("%t", runtime)
    # What the user manager does for DirectoryMode=0700: the directory, the user's.
    os.mkdir(os.path.dirname(sock), 0o700)
    os.chown(os.path.dirname(sock), pw.pw_uid, pw.pw_gid)
    argv = unit_value(os.path.join(units, "cuflagd.service.in"), "ExecStart").split()
    expect(argv[0] == "@sbindir@/cuflagd" and argv[1:] == ["--user"],
           f"the user's service runs cuflagd --user: {argv}")
    env = {"XDG_RUNTIME_DIR": runtime, "PATH": "/usr/bin:/bin", "HOME": tmp,
           "LD_LIBRARY_PATH": os.path.dirname(daemon), "CUFLAG_AUTOSPAWN": "0"}
    as_user = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]
    act = subprocess.Popen(
        as_user + [os.environ["SYSTEMD_SOCKET_ACTIVATE"], "--seqpacket", "-l", sock,
                   "--fdname=cuflagd", "-E", "XDG_RUNTIME_DIR", daemon, *argv[1:]],
        env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the socket", lambda: os.path.exists(sock))
        r = subprocess.run(as_user + [demo, "--device", "sim"], env=env, capture_output=True,
                           text=True, timeout=60)
        out = r.stdout + r.stderr
        expect(r.returncode == 0 and "every count exact" in out,
               f"the demo on the socket-activated user daemon: exit {r.returncode}\n{out}")
        r = subprocess.run(as_user + [ctl, "status"], env=env, capture_output=True, text=True,
                           timeout=30)
        expect(r.returncode == 0 and "user" in r.stdout.splitlines()[0],
               f"cuflagctl status names the user's daemon:\n{r.stdout}{r.stderr}")
        # The daemon that served is the one started on the passed socket.
        expect(os.readlink(f"/proc/{act.pid}/exe") == daemon,
               "systemd-socket-activate ran the unit's cuflagd")
    finally:
        act.terminate()
        try:
            _, err = act.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            act.kill()
            _, err = act.communicate()
        shutil.rmtree(tmp, ignore_errors=True)
    expect("using the socket passed by the service manager" in err,
           f"cuflagd used the passed socket:\n{err}")
    print("user-units: the socket-activated cuflagd --user served its user: ok")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--inside":
        inside()
        return
    if os.geteuid() != 0:
        print("user-units: skipped: not root (a test user is made)")
        sys.exit(77)
    if not os.environ.get("SYSTEMD_SOCKET_ACTIVATE"):
        print("user-units: skipped: systemd-socket-activate not found")
        sys.exit(77)
    for tool in ("unshare", "setpriv", "useradd"):
        if not shutil.which(tool):
            print(f"user-units: skipped: {tool} not found")
            sys.exit(77)
    ldd = subprocess.run(["ldd", CUFLAGD], capture_output=True, text=True).stdout
    if "libsystemd" not in ldd:
        print("user-units: skipped: cuflagd built without libsystemd (no socket activation)")
        sys.exit(77)
    sys.exit(subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                             os.path.abspath(__file__), "--inside"]).returncode)


if __name__ == "__main__":
    main()
