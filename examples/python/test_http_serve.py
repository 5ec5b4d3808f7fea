#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""http_serve.py --device sim under wrk, against the cuflagd of
$CUFLAG_SOCKET (the test suite's private one): every request answered 200,
the server's counts exact (requests started = answered = completions
cuflagd signalled; within wrk's count and its connections in flight when it
stopped; exactly 100 more after 100 requests of our own), and its CPU idle
once the load is gone. Then each other mode, under wrk for a second, every
request answered, and mode cuflag on uvloop where it is installed. Exit 77
without wrk or aiohttp."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

from serve import cpu_seconds  # beside this file: the per-thread schedstat reader

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE = os.path.join(HERE, "http_serve.py")
CONNECTIONS = 16
SKIP = 77


def fail(msg):
    print(f"test_http_serve: FAIL {msg}", flush=True)
    sys.exit(1)


class Server:
    def __init__(self, mode, loop="asyncio"):
        self.proc = subprocess.Popen([sys.executable, SERVE, "--device", "sim", "--mode", mode,
                                      "--loop", loop, "--port", "0", "--streams", "8"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[\d.]+:\d+/)", line)
        if not m:
            fail(f"{mode}: the server did not start: {line}{self.proc.stdout.read()}")
        self.url = m.group(1)

    def stats(self):
        with urllib.request.urlopen(self.url + "stats", timeout=10) as r:
            return json.load(r)

    def get(self):
        with urllib.request.urlopen(self.url, timeout=10) as r:
            body = r.read().decode()
            if r.status != 200 or not body.startswith("token "):
                fail(f"GET / answered {r.status} {body!r}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        out = self.proc.communicate(timeout=20)[0]
        if self.proc.returncode != 0:
            fail(f"the server exited with {self.proc.returncode}: {out}")
        return out


def wrk(url, seconds):
    """wrk's count of answered requests; fails on any error it reports."""
    # A request slower than 10 s is an error (wrk's own limit, 2 s, is a
    # CPU-starved build machine's stall, not a lost answer: the counts below
    # catch one that never comes).
    out = subprocess.run(["wrk", "-t", "2", "-c", str(CONNECTIONS), "-d", f"{seconds}s",
                          "--timeout", "10s", url],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    print(out, flush=True)
    m = re.search(r"(\d+) requests in", out)
    if not m:
        fail(f"no count from wrk: {out}")
    if "Non-2xx" in out or "Socket errors" in out:
        fail(f"wrk saw errors: {out}")
    return int(m.group(1))


def settled(server, want):
    """The stats once nothing is in flight and cuflagd signalled every
    completion (its eventfd may ring a little after the flag landed)."""
    deadline = time.monotonic() + 5
    while True:
        s = server.stats()
        if s["inflight"] == 0 and s.get("signalled", want) >= want or time.monotonic() > deadline:
            return s
        time.sleep(0.05)


def main():
    if shutil.which("wrk") is None:
        print("test_http_serve: wrk is not installed (apt-get install wrk)")
        return SKIP
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        print("test_http_serve: aiohttp is not installed (apt-get install python3-aiohttp)")
        return SKIP

    server = Server("cuflag")
    n = wrk(server.url, 3)
    s = settled(server, n)
    if not (s["started"] == s["answered"] == s["signalled"] and s["inflight"] == 0):
        fail(f"counts differ after wrk: {s}")
    if not n <= s["answered"] <= n + CONNECTIONS:
        fail(f"wrk counted {n} answers, the server {s['answered']}")
    if n < 100:
        fail(f"only {n} requests answered in 3 s")
    for _ in range(100):
        server.get()
    t = settled(server, s["answered"] + 100)
    if not (t["answered"] - s["answered"] == t["signalled"] - s["signalled"] == 100):
        fail(f"100 requests, counted {s} then {t}")
    # Idle: no loop turn, no thread awake, once the load is gone.
    pid = server.proc.pid
    c0, w0 = cpu_seconds(pid), time.monotonic()
    time.sleep(1.0)
    idle = (cpu_seconds(pid) - c0) / (time.monotonic() - w0)
    if idle > 0.02:
        fail(f"the idle server used {idle * 100:.1f} % of a core")
    out = server.stop()
    print(f"cuflag: {n} requests under wrk, {t['answered']} answered and signalled, "
          f"idle CPU {idle * 100:.2f} % of a core; {out.strip()}", flush=True)

    runs = [(mode, "asyncio") for mode in ("to_thread", "poll", "block", "hostfunc")]
    try:
        import uvloop  # noqa: F401
        runs.append(("cuflag", "uvloop"))
    except ImportError:
        print("test_http_serve: no uvloop here (python3-uvloop): --loop uvloop not tried")
    for mode, loop in runs:
        server = Server(mode, loop)
        n = wrk(server.url, 1)
        s = settled(server, n)
        if not (s["started"] == s["answered"] and n <= s["answered"] <= n + CONNECTIONS):
            fail(f"{mode} on {loop}: wrk counted {n}, the server {s}")
        if s.get("signalled", s["answered"]) != s["answered"]:
            fail(f"{mode} on {loop}: {s['answered']} answered, {s['signalled']} signalled")
        server.stop()
        print(f"{mode} on {loop}: {n} requests under wrk, {s['answered']} answered", flush=True)
    print("test_http_serve: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
