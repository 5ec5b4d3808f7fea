#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagctl top in a real terminal (tmux, 80 x 24): it shows the daemon's
header and a row per client (its pid, process name, slots, slots in flight
and stuck), redraws, fits 80 columns, and quits on q; --once prints one
frame. Exits 77 without tmux."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opsutil import CUFLAGCTL, ctl, expect, running_daemon, wait_for  # noqa: E402

TMUX = shutil.which("tmux")


def tmux(server, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    return subprocess.run([TMUX, "-L", server, *args], capture_output=True, text=True,
                          env=env, check=check, timeout=10)


def row_of(screen, pid):
    for line in screen.splitlines():
        f = line.split()
        if f and f[0] == str(pid):
            return f
    return None


def main():
    if not TMUX:
        print("tmux not installed: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="cuflag-top-")
    server = f"cuflag-top-{os.getpid()}"
    holder = None
    try:
        with running_daemon(tmp, "--stuck-ms", "300") as sock:
            holder = subprocess.Popen([os.environ["SLOT_HOLDER"], sock, "4", "3"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            pid = int(holder.stdout.readline().split()[1])
            tmux(server, "new-session", "-d", "-x", "80", "-y", "24", "-s", "top",
                 f"{CUFLAGCTL} --socket {sock} top")

            def screen_with_row():
                s = tmux(server, "capture-pane", "-p", "-t", "top", check=False).stdout
                r = row_of(s, pid)
                # Past --stuck-ms, and redrawn since: the row says 3 stuck.
                return s if r and r[-1] == "3" else None
            screen = wait_for("top to show the holder's row", screen_with_row, timeout=10)
            lines = screen.splitlines()
            expect(lines[0].startswith("cuflagd  up "), f"header: {lines[0]!r}")
            expect("scanner cpu" in screen and "arms/s" in screen, "daemon rates in the header")
            expect(any(ln.split()[:4] == ["PID", "COMM", "UID", "UNIT"] for ln in lines),
                   "column names")
            r = row_of(screen, pid)
            # PID COMM UID UNIT SLOTS FLT DONE/S P50 P99 STK
            expect(r[1] == "slot-holder" and r[2] == str(os.getuid()), f"row: {r}")
            expect(r[4] == "4" and r[5] == "3", f"slots and in flight: {r}")
            expect(all(len(ln) <= 80 for ln in lines), "fits 80 columns")
            print("top: " + " ".join(r))

            tmux(server, "send-keys", "-t", "top", "q")
            wait_for("top to quit on q",
                     lambda: tmux(server, "has-session", "-t", "top", check=False).returncode
                     != 0, timeout=5)

            once = ctl("--socket", sock, "top", "--once").stdout
            r = row_of(once, pid)
            expect(r and r[1] == "slot-holder" and r[-1] == "3", f"--once: {once}")
            expect("\033" not in once, "--once: no terminal control")
            holder.stdin.close()
            holder.wait(timeout=10)
    finally:
        tmux(server, "kill-server", check=False)
        if holder and holder.poll() is None:
            holder.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
