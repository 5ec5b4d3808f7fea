#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagd started by hand (no socket activation) with --socket-group and
--socket-mode: the socket has that group and mode, and so has the
directory it makes for it, at every start; a member of the group connects,
a user outside it is refused with a hint to join the group (from the
library's cuflag_connect_hint(), as a program prints it). A socket path
naming the directory is -ENOTSOCK, not "Connection refused". A mode the
owner cannot both read and write is refused at the start (no root needed).

Needs root (to take on the test's uids): exit 77 with one line otherwise."""
import grp
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from opsutil import CUFLAGD, copies_for_users, ctl, expect, running_daemon

SLOT_HOLDER = os.environ["SLOT_HOLDER"]
CUFLAG_DEMO = os.environ["CUFLAG_DEMO"]
# A member and a stranger, and the socket's group: ids no one else on a
# test machine uses.
MEMBER, STRANGER, GROUP = 47120, 47122, 47121


def as_user(uid, gids, *argv):
    groups = f"--groups={','.join(map(str, gids))}" if gids else "--clear-groups"
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", groups, *argv]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(argv[0]))
    return subprocess.run(cmd, env=env, input="", capture_output=True, text=True,
                          timeout=30)


def check_modes(run_dir, sock):
    st, dt = os.stat(sock), os.stat(run_dir)
    expect(stat.S_ISSOCK(st.st_mode), f"{sock} is a socket")
    expect((st.st_gid, stat.S_IMODE(st.st_mode)) == (GROUP, 0o660),
           f"socket group {st.st_gid} mode {stat.S_IMODE(st.st_mode):o}, not {GROUP} 660")
    expect((dt.st_gid, stat.S_IMODE(dt.st_mode)) == (GROUP, 0o750),
           f"directory group {dt.st_gid} mode {stat.S_IMODE(dt.st_mode):o}, not {GROUP} 750")
    print(f"socket-perms: socket root:{GROUP} 0660, directory root:{GROUP} 0750")


def check_mode_parsing():
    for mode in ("0400", "0200", "0460", "0000", "1660", "0800", "rw", ""):
        r = subprocess.run([CUFLAGD, "--socket", "/nonexistent/s", "--socket-mode", mode],
                           capture_output=True, text=True, timeout=10)
        expect(r.returncode == 2 and "--socket-mode" in r.stderr,
               f"--socket-mode {mode!r} refused: exit {r.returncode}: {r.stderr}")
    print("socket-perms: --socket-mode refuses modes the owner cannot read and write")


def check_named_group(tmp, holder):
    """A group with a name: the hint and the daemon's log name it."""
    named = [g for g in grp.getgrall() if g.gr_gid not in (0, GROUP) and not g.gr_mem]
    if not named:
        print("socket-perms: no named group without members here: named hint not checked")
        return
    g = named[0]
    sock = os.path.join(tmp, "run-named", "cuflagd.sock")  # a directory it makes
    with running_daemon(tmp, "--socket-group", g.gr_name, sock=sock) as s:
        r = as_user(STRANGER, [], holder, s, "1", "0")
        expect(r.returncode == 1 and f"join its group {g.gr_name} " in r.stderr and
               f"usermod -a -G {g.gr_name} " in r.stderr,
               f"the hint names the socket's group {g.gr_name}: {r.stderr}")
        print(f"socket-perms: a stranger, group {g.gr_name}: {r.stderr.strip()}")


def main():
    check_mode_parsing()
    if os.geteuid() != 0:
        print("socket-perms: skipped: not root")
        sys.exit(77)
    if not shutil.which("setpriv"):
        print("socket-perms: skipped: setpriv not found")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="cuflag-perms-") as tmp:
        os.chmod(tmp, 0o755)
        holder, demo = copies_for_users(tmp, SLOT_HOLDER, CUFLAG_DEMO)
        run_dir = os.path.join(tmp, "run-cuflagd")  # made by cuflagd
        sock = os.path.join(run_dir, "cuflagd.sock")
        args = ("--socket-group", str(GROUP), "--socket-mode", "0660")
        with running_daemon(tmp, *args, sock=sock):
            check_modes(run_dir, sock)
            r = as_user(MEMBER, [GROUP], holder, sock, "1", "0")
            expect(r.returncode == 0 and r.stdout.startswith("ready"),
                   f"a member of the group connects: exit {r.returncode}: {r.stderr}")
            print("socket-perms: a member of the group connects")
            # The socket's group here has no name: the hint gives its
            # number and how a process gets it, never cuflag's usermod.
            r = as_user(STRANGER, [], holder, sock, "1", "0")
            expect(r.returncode == 1 and "Permission denied" in r.stderr and
                   f"its group is gid {GROUP}, which has no name" in r.stderr and
                   "usermod" not in r.stderr,
                   f"a stranger is refused with a hint: exit {r.returncode}: {r.stderr}")
            print(f"socket-perms: a stranger: {r.stderr.strip()}")
            r = as_user(STRANGER, [], demo, "--socket", sock, "--device", "sim")
            expect(r.returncode == 1 and f"gid {GROUP}" in r.stderr,
                   f"cuflag-demo says so too: exit {r.returncode}: {r.stderr}")
            r = ctl("--socket", run_dir, "status", check=False)
            expect(r.returncode != 0 and "not a socket" in r.stderr,
                   f"the directory is not the socket: {r.stderr}")
            print(f"socket-perms: {r.stderr.strip()}")
        # A chgrp by hand is not what keeps it: the next start sets both again.
        os.chown(run_dir, 0, 0)
        with running_daemon(tmp, *args, sock=sock):
            st = os.stat(sock)
            expect(st.st_gid == GROUP, f"the socket's group again at a restart: {st.st_gid}")
        check_named_group(tmp, holder)
    print("socket-perms: ok")


if __name__ == "__main__":
    main()
