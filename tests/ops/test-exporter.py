#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The exporter (cuflagctl metrics --listen) as a server, without Prometheus:
":PORT" answers on IPv6 and IPv4 alike, or on IPv4 alone where there is no
IPv6 (socket(AF_INET6) refused, as under ipv6.disable=1); an idle TCP
connection, one that sends half a request, and more idle ones than it serves
at once delay no scrape (each answered in under a second, where one request
at a time with a 5 s peer timeout took 5 s); the half request is still
answered once it is whole; the oldest idle peer makes room for a new one,
and a silent peer is let go after a short while (2 s)."""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opsutil import CUFLAGCTL, expect, free_port, running_daemon, wait_for  # noqa: E402

# More than the exporter serves at once (CONNS_MAX in ctl/exporter.c).
MANY = 24


def has_ipv6():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def scrape(host, port, timeout=5):
    """GET /metrics: the seconds it took, and the body."""
    t0 = time.monotonic()
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read().decode()
        expect(r.status == 200, f"{url}: {r.status}")
    expect("cuflag_up 1" in body, f"{url}: the daemon's metrics")
    return time.monotonic() - t0, body


def exporter(sock, port, env=None):
    """The exporter on :port, once it answers there; the process and what it
    said of where it listens."""
    p = subprocess.Popen([CUFLAGCTL, "--socket", sock, "metrics", "--listen", f":{port}"],
                         stderr=subprocess.PIPE, text=True, env=env)
    where = p.stderr.readline()

    def up():
        try:
            return scrape("127.0.0.1", port)
        except OSError:
            return None
    wait_for("the exporter", up)
    return p, where


def stop(p):
    p.terminate()
    p.wait(timeout=10)
    p.stderr.close()


def prompt(what, port):
    took, _ = scrape("127.0.0.1", port)
    expect(took < 1.0, f"{what}: a scrape took {took:.2f} s")
    return took


def check_prompt(port):
    idle = socket.create_connection(("127.0.0.1", port))
    took = [prompt("beside an idle connection", port)]
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    took.append(prompt("beside half a request", port))
    half.sendall(b"\r\n")
    half.settimeout(5)
    head = half.recv(64)
    expect(head.startswith(b"HTTP/1.1 200"), f"the half request, once whole: {head!r}")
    many = [socket.create_connection(("127.0.0.1", port)) for _ in range(MANY)]
    took.append(prompt(f"beside {MANY} idle connections", port))
    # To make room, the peer that has waited longest for its request goes.
    idle.settimeout(5)
    expect(idle.recv(1) == b"", "the oldest idle connection is closed for a new one")
    for s in [half, idle, *many]:
        s.close()
    # A peer that says nothing is let go after a short while.
    silent = socket.create_connection(("127.0.0.1", port))
    silent.settimeout(10)
    t0 = time.monotonic()
    expect(silent.recv(1) == b"", "a silent connection is closed")
    waited = time.monotonic() - t0
    expect(1.0 <= waited < 4.5, f"a silent connection let go after {waited:.1f} s")
    silent.close()
    print(f"exporter: scrapes beside idle peers in {max(took) * 1e3:.1f} ms at most; "
          f"a silent peer let go after {waited:.1f} s")


def main():
    with tempfile.TemporaryDirectory(prefix="cuflag-exporter-") as tmp:
        with running_daemon(tmp) as sock:
            port = free_port()
            p, where = exporter(sock, port)
            try:
                if has_ipv6():
                    expect("(IPv6 and IPv4)" in where, f"where it listens: {where}")
                    took, _ = scrape("[::1]", port)
                    print(f"exporter: :{port} answers on ::1 and 127.0.0.1")
                else:
                    print("exporter: no IPv6 here: 127.0.0.1 only")
                check_prompt(port)
            finally:
                stop(p)
            # No IPv6 at all: 0.0.0.0, and it says why.
            port = free_port()
            env = dict(os.environ, LD_PRELOAD=os.environ["NO_IPV6_PRELOAD"])
            p, where = exporter(sock, port, env=env)
            try:
                expect("0.0.0.0" in where and "IPv4 only" in where, f"without IPv6: {where}")
                print(f"exporter: without IPv6: {where.strip()}")
            finally:
                stop(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
