#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Who sees what in cuflagctl metrics and stuck (as in clients): a user
sees its own clients and its own user's record, not another user's; a
member of --admin-group sees everyone's, as root does. And what the
per-user pending limit holds back is not stuck: with --max-pending-per-uid 1,
a client that arms 3 slots has 1 arm taken, 1 slot in flight and 1 stuck,
the other 2 arms waiting unread in its queue.

Needs root (to take on the test's uids): exit 77 with one line otherwise."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from opsutil import CUFLAGCTL, copies_for_users, expect, running_daemon

SLOT_HOLDER = os.environ["SLOT_HOLDER"]
# Three users and the admin group: ids no one else on a test machine uses.
ALICE, BOB, ADMIN, SOCKGROUP, CAROL = 47130, 47131, 47132, 47133, 47134


def run_as(uid, gids, *argv, stdin=None):
    groups = f"--groups={','.join(map(str, gids))}"
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", groups, *argv]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(argv[0]))
    return subprocess.Popen(cmd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def ctl_as(uid, gids, ctl, sock, *args):
    p = run_as(uid, gids, ctl, "--socket", sock, *args)
    out, err = p.communicate(timeout=30)
    expect(p.returncode == 0, f"cuflagctl {' '.join(args)} as {uid}: {err}")
    return out


def value(text, name, uid):
    """The value of the sample of name labelled uid (one of them)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and f'uid="{uid}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def check_held_back(holder, sock):
    """Carol arms 3 slots; her limit of 1 pending slot holds 2 arms back."""
    h = run_as(CAROL, [SOCKGROUP], holder, sock, "3", "3", stdin=subprocess.PIPE)
    expect(h.stdout.readline().startswith("ready"), "carol's holder")
    time.sleep(0.3)  # past --stuck-ms
    m = subprocess.run([CUFLAGCTL, "--socket", sock, "metrics"], capture_output=True,
                       text=True, check=True).stdout
    got = {n: value(m, n, CAROL) for n in ("cuflag_arms_total", "cuflag_in_flight",
                                           "cuflag_stuck_slots", "cuflag_user_pending_slots")}
    expect(all(v == 1 for v in got.values()), f"held back: 1 taken, in flight, stuck: {got}")
    s = subprocess.run([CUFLAGCTL, "--socket", sock, "stuck", "--json"], capture_output=True,
                       text=True, check=True).stdout
    expect(s.count(f'"uid":{CAROL}') == 1, f"one stuck slot of carol's listed: {s}")
    print("metrics-view: of 3 arms over a pending limit of 1, 1 taken, in flight and stuck")
    h.stdin.close()
    h.wait(timeout=10)


def main():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("metrics-view: skipped: not root, or no setpriv")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="cuflag-view-") as tmp:
        os.chmod(tmp, 0o755)
        holder, ctl = copies_for_users(tmp, SLOT_HOLDER, CUFLAGCTL)
        sock = os.path.join(tmp, "run", "cuflagd.sock")
        args = ("--socket-group", str(SOCKGROUP), "--admin-group", str(ADMIN),
                "--stuck-ms", "100", "--max-pending-per-uid", "1")
        with running_daemon(tmp, *args, sock=sock):
            holders = []
            for uid in (ALICE, BOB):
                h = run_as(uid, [SOCKGROUP], holder, sock, "2", "1", stdin=subprocess.PIPE)
                expect(h.stdout.readline().startswith("ready"), f"holder of {uid}")
                holders.append(h)
            time.sleep(0.3)  # past --stuck-ms
            a = ctl_as(ALICE, [SOCKGROUP], ctl, sock, "metrics")
            expect(f'uid="{ALICE}"' in a and f'uid="{BOB}"' not in a,
                   "alice sees her client and not bob's")
            expect(a.count("cuflag_in_flight{") == 1, "alice: one client")
            s = ctl_as(ALICE, [SOCKGROUP], ctl, sock, "stuck", "--json")
            expect(f'"uid":{ALICE}' in s and f'"uid":{BOB}' not in s,
                   "alice's stuck list is hers alone")
            m = ctl_as(BOB, [SOCKGROUP, ADMIN], ctl, sock, "metrics")
            expect(f'uid="{ALICE}"' in m and f'uid="{BOB}"' in m,
                   "a member of --admin-group sees both")
            s = ctl_as(BOB, [SOCKGROUP, ADMIN], ctl, sock, "stuck", "--json")
            expect(f'"uid":{ALICE}' in s and f'"uid":{BOB}' in s, "and both stuck slots")
            print("metrics-view: a user sees its own clients, the admin group everyone's")
            for h in holders:
                h.stdin.close()
                h.wait(timeout=10)
            check_held_back(holder, sock)


if __name__ == "__main__":
    main()
