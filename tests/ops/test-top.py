#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflagctl top in a real terminal (tmux, 80 x 24): it shows the daemon's
header and a row per client (its pid, process name, slots, slots in flight
and stuck), redraws, fits 80 columns (and 60, and $COLUMNS for --once), and quits on
q; --once prints one frame. With stdin at its end (</dev/null, a closed pipe) it redraws once a
second as ever, using little CPU, and quits on SIGTERM. Exits 77 without
tmux (after the stdin checks, which need none)."""
import os
import shutil
import signal
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


def cpu_s(pid):
    """User and system time of a running process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_stdin_ended(sock, stdin, what):
    """top with nothing to read on stdin: a frame a second, not a tight
    loop of daemon queries and redraws."""
    with tempfile.TemporaryFile() as out:
        top = subprocess.Popen([CUFLAGCTL, "--socket", sock, "top"], stdin=stdin, stdout=out)
        time.sleep(1.5)
        cpu = cpu_s(top.pid)
        top.send_signal(signal.SIGTERM)
        expect(top.wait(timeout=5) == 0, f"{what}: top quits on SIGTERM")
        out.seek(0)
        frames = out.read().count(b"\033[H\033[2J")
    # One frame at the start and one a second: 2 in 1.5 s (3 at most on a
    # slow machine); the tight loop drew thousands.
    expect(1 <= frames <= 3, f"{what}: {frames} frames in 1.5 s")
    expect(cpu < 0.3, f"{what}: {cpu:.2f} s of CPU in 1.5 s")
    print(f"top: {what}: {frames} frames, {cpu:.2f} s CPU in 1.5 s")


def check_stdin_eof(tmp):
    with running_daemon(tmp, sock=os.path.join(tmp, "eof.sock")) as sock:
        with open(os.devnull) as null:
            check_stdin_ended(sock, null, "</dev/null")
        r, w = os.pipe()
        os.close(w)
        check_stdin_ended(sock, r, "a closed pipe")
        os.close(r)


def check_narrow(server, sock, pid):
    """In a 60-column pane every line fits (no row wraps, the header stays
    on screen), the holder's row still there; --once fits $COLUMNS."""
    tmux(server, "new-session", "-d", "-x", "60", "-y", "24", "-s", "narrow",
         f"{CUFLAGCTL} --socket {sock} top")

    def screen_with_row():
        s = tmux(server, "capture-pane", "-p", "-t", "narrow", check=False).stdout
        return s if row_of(s, pid) else None
    screen = wait_for("top in 60 columns to show the holder's row", screen_with_row,
                      timeout=10)
    lines = screen.splitlines()
    expect(lines[0].startswith("cuflagd  up "), f"60 columns: header on top: {lines[0]!r}")
    expect(all(len(ln) < 60 for ln in lines), f"60 columns: every line fits:\n{screen}")
    r = row_of(screen, pid)
    expect(r[-1] == "3" and r[3] == "4", f"60 columns: slots and stuck still shown: {r}")
    tmux(server, "send-keys", "-t", "narrow", "q")
    once = subprocess.run([CUFLAGCTL, "--socket", sock, "top", "--once"], text=True,
                          capture_output=True, env=dict(os.environ, COLUMNS="60"),
                          timeout=10).stdout
    expect(row_of(once, pid) and all(len(ln) < 60 for ln in once.splitlines()),
           f"COLUMNS=60 top --once fits:\n{once}")
    print("top: 60 columns: " + " ".join(r))


def main():
    tmp = tempfile.mkdtemp(prefix="cuflag-top-")
    try:
        check_stdin_eof(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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

            check_narrow(server, sock, pid)

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
