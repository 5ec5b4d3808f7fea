#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The exporter (cuflagctl metrics --listen) as a server, without Prometheus:
":PORT" answers on IPv6 and IPv4 alike, or on IPv4 alone where there is no
IPv6 (socket(AF_INET6) refused, as under ipv6.disable=1); an idle TCP
connection, one that sends half a request, and more idle ones than it serves
at once delay no scrape (each answered in under a second, where one request
at a time with a 5 s peer timeout took 5 s); the half request is still
answered once it is whole; past the connections it holds, the peer idle
longest makes room for a new one, and a silent peer is let go after a short
while (2 s). And no scrape is dropped beside 60 hostile peers (a 225 KB page
of 60 clients), half of them never reading their answer, half sending their
request a byte at a time, each replaced as soon as it is closed."""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opsutil import CUFLAGCTL, expect, free_port, running_daemon, wait_for  # noqa: E402

SLOT_HOLDER = os.environ["SLOT_HOLDER"]
# Idle peers beside a scrape.
MANY = 24
# More than the exporter holds at once (CONNS_MAX in ctl/exporter.c).
CONNS_MAX = 128
# A new peer is never closed for another this young (GRACE_MS).
GRACE = 0.5
# The hostile peers, and the clients whose metrics make the page large.
HOSTILE = 60
CLIENTS = 60


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


def scrape_late(port, delay, timeout=10):
    """GET /metrics sent delay seconds after the connection is made (in
    time: well within the 2 s a peer has): the seconds it took, and the body."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        time.sleep(delay)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    expect(head.startswith("HTTP/1.1 200"), f"a late request's answer: {head[:40]!r}")
    expect("cuflag_up 1" in body, "a late request: the daemon's metrics")
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
    # Past what it holds, the peer idle longest goes to make room.
    time.sleep(GRACE)
    more = [socket.create_connection(("127.0.0.1", port)) for _ in range(CONNS_MAX)]
    took.append(prompt(f"beside {MANY + CONNS_MAX} idle connections", port))
    idle.settimeout(5)
    expect(idle.recv(1) == b"", "the longest idle connection is closed for a new one")
    for s in [half, idle, *many, *more]:
        s.close()
    # A request sent a moment after its connection (in time: within
    # GRACE), while a crowd connects behind it: the crowd waits, the request
    # is answered.
    late = socket.create_connection(("127.0.0.1", port))
    head = []

    def send_late():
        time.sleep(GRACE / 2)
        late.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        late.settimeout(5)
        head.append(late.recv(64))
    sender = threading.Thread(target=send_late)
    sender.start()
    crowd = [socket.create_connection(("127.0.0.1", port)) for _ in range(CONNS_MAX + 8)]
    sender.join()
    expect(head[0].startswith(b"HTTP/1.1 200"), f"a request sent behind a crowd: {head[0]!r}")
    for s in [late, *crowd]:
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


class Hostile:
    """HOSTILE peers, each replaced as soon as it is closed: half send a
    request and never read the answer (a receive buffer of 4 KB, so that
    the answer cannot just land in it), half send their request a byte
    every 0.3 s."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.conns = 0
        self.threads = [threading.Thread(target=self.never_reads if i % 2 else self.slowloris,
                                         daemon=True) for i in range(HOSTILE)]
        for t in self.threads:
            t.start()

    def connect(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", self.port))
        self.conns += 1
        return s

    def never_reads(self):
        while not self.stop.is_set():
            try:
                s = self.connect()
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                # Closed by the exporter or not, it cannot tell without
                # reading: it gives up on its own, past the 5 s a peer has
                # to take its answer.
                self.stop.wait(6.0)
                s.close()
            except OSError:
                pass

    def slowloris(self):
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000
        while not self.stop.is_set():
            try:
                s = self.connect()
                for b in request:
                    s.sendall(bytes([b]))
                    s.settimeout(0.3)
                    try:
                        if s.recv(1) == b"":
                            break  # closed: replaced at once
                    except socket.timeout:
                        pass
                    if self.stop.is_set():
                        break
                s.close()
            except OSError:
                pass

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)


def check_hostile(sock, port):
    holders = [subprocess.Popen([SLOT_HOLDER, sock, "4", "2"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(CLIENTS)]
    try:
        for h in holders:
            expect(h.stdout.readline().startswith("ready"), "a slot holder")
        _, body = scrape("127.0.0.1", port)
        size = len(body)
        hostile = Hostile(port)
        took, failed = [], []
        try:
            end = time.monotonic() + 10
            while time.monotonic() < end:
                t0 = time.monotonic()
                try:
                    # Every other one sends its request a moment after it connected.
                    if len(took) % 2:
                        t, body = scrape_late(port, 0.1)
                    else:
                        t, body = scrape("127.0.0.1", port, timeout=10)
                    took.append(t)
                    expect(body.rstrip().endswith("1") or body.endswith("\n"), "a whole page")
                except (OSError, AssertionError) as e:
                    failed.append(repr(e))
                time.sleep(max(0.0, 0.25 - (time.monotonic() - t0)))
        finally:
            hostile.end()
        took.sort()
        print(f"exporter: {len(took)} scrapes of {size // 1024} KB beside {HOSTILE} hostile peers "
              f"({hostile.conns} connections): {len(failed)} failed, p50 "
              f"{took[len(took) // 2] * 1e3:.0f} ms, max {took[-1] * 1e3:.0f} ms")
        expect(not failed, f"scrapes failed beside hostile peers: {failed[:3]}")
        expect(took[-1] < 5.0, f"a scrape beside hostile peers took {took[-1]:.1f} s")
    finally:
        for h in holders:
            h.stdin.close()
            h.wait(timeout=10)


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
                check_hostile(sock, port)
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
