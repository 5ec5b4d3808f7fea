# SPDX-License-Identifier: MIT
"""What the Python ops tests share: a cuflagd of the build tree on a private
socket, cuflagctl, and the checks' helpers."""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

CUFLAGD = os.environ["CUFLAGD"]
CUFLAGCTL = os.environ["CUFLAGCTL"]


def ctl(*args, env=None, check=True):
    r = subprocess.run([CUFLAGCTL, *args], capture_output=True, text=True, env=env,
                       timeout=30)
    if check and r.returncode != 0:
        sys.exit(f"cuflagctl {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r


def ctl_json(sock, cmd):
    out = ctl("--socket", sock, cmd, "--json").stdout
    return json.loads(out)


def copies_for_users(tmp, *programs):
    """programs of the build tree and the client library they load, copied
    to tmp/bin for other users to run (tmp must be 0755): the build tree
    may lie under a directory only its owner enters (a checkout in /root,
    or in a 0700 temporary directory). Returns the copies' paths; run them
    with LD_LIBRARY_PATH set to their directory."""
    bin_dir = os.path.join(tmp, "bin")
    os.makedirs(bin_dir, 0o755, exist_ok=True)
    shutil.copy(os.environ["CUFLAG_CLIENT_LIB"], os.path.join(bin_dir, "libcuflag-client.so.0"))
    return [shutil.copy(p, bin_dir) for p in programs]


def free_port():
    """A TCP port free on 127.0.0.1 now (for a server the test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, pred, timeout=5.0):
    """Poll pred() until it holds (state the daemon reaches asynchronously)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.01)


def expect(cond, what):
    if not cond:
        sys.exit(f"check failed: {what}")


def start_daemon(tmp, *args, sock=None, wrap=()):
    """cuflagd on a private socket (sock, else in tmp), with args, run by
    the command wrap if any (such as unshare --fork); ready when it says
    READY=1 to us. Returns the process and the socket's path."""
    notify_path = os.path.join(tmp, "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(5)
    sock = sock or os.path.join(tmp, "cuflagd.sock")
    env = dict(os.environ, NOTIFY_SOCKET=notify_path)
    d = subprocess.Popen([*wrap, CUFLAGD, "--socket", sock, *args], env=env)
    while b"READY=1" not in notify.recv(4096).split(b"\n"):
        pass
    notify.close()
    os.unlink(notify_path)
    return d, sock


@contextlib.contextmanager
def running_daemon(tmp, *args, sock=None, wrap=()):
    """start_daemon() for a with block: yields the socket's path; the daemon
    is stopped at the end (SIGTERM to cuflagd itself, the wrapper's child
    when wrapped, whose exit status the wrapper passes on) and must exit 0."""
    d, sock = start_daemon(tmp, *args, sock=sock, wrap=wrap)
    try:
        yield sock
    finally:
        pid = d.pid
        if wrap:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                pid = int(f.read().split()[0])
        os.kill(pid, signal.SIGTERM)
        rc = d.wait(timeout=10)
    expect(rc == 0, f"cuflagd exit status {rc}")
