#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The HTTP serving bench: examples/python/http_serve.py in every mode and
both loops, driven by examples/python/loadgen.py, in rounds taken in turn.

One server per (loop, mode) is started at once and kept for the whole run,
stopped (SIGSTOP) while another is measured, so a polling server's idle
loop takes no core from the one measured. A short calibration pass finds
each loop's best peak (the highest req/s of any mode at the two highest
concurrencies); then each round, in an order rotated from round to round,
measures every server in turn: its idle CPU with no traffic, then closed
loops at each --concurrency and open loops at each --fraction of its loop's
best peak. A point's CPU per request is the server's and cuflagd's CPU over
the measured window (every thread, /proc/PID/task/*/schedstat) over the
requests answered in it. It writes every point of every round and the
medians with min-max to --json, and prints the medians and the targets'
ratios.

Run by scripts/serve-bench.sh, which builds cuflagd and starts it.
"""

import argparse
import datetime
import functools
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "python")
sys.path.insert(0, EXAMPLES)

import loadgen  # noqa: E402
from serve import cpu_seconds, daemon_pid  # noqa: E402

MODES = ("cuflag", "to_thread", "poll", "block", "hostfunc")
LOOPS = ("asyncio", "uvloop")


class Server:
    def __init__(self, args, loop, mode, port):
        self.loop, self.mode, self.port = loop, mode, port
        self.url = f"http://127.0.0.1:{port}/"
        cmd = [sys.executable, os.path.join(EXAMPLES, "http_serve.py"), "--device", args.device,
               "--mode", mode, "--loop", loop, "--port", str(port)] + args.server_arg
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        self.ready = threading.Event()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "listening on" in line:
                self.ready.set()
        self.ready.set()

    def wait_ready(self, timeout):
        if not self.ready.wait(timeout) or self.proc.poll() is not None:
            raise SystemExit(f"serve_bench: the {self.loop} {self.mode} server did not start:\n"
                             + "\n".join(self.lines[-20:]))

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is not None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def sleep_until(t):
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def point(gen, server, dpid, args, concurrency=None, rate=None):
    """One measured point: the load, and the CPU over its window."""
    t0, t1 = gen.start(server.url, concurrency=concurrency, rate=rate, warmup=args.warmup,
                       duration=args.seconds)
    sleep_until(t0)
    s0, d0 = cpu_seconds(server.proc.pid), cpu_seconds(dpid)
    sleep_until(t1)
    s1, d1 = cpu_seconds(server.proc.pid), cpu_seconds(dpid)
    r = gen.finish()
    n = max(r["requests"], 1)
    return {"req_per_s": r["req_per_s"], "requests": r["requests"], "errors": r["errors"],
            "p50_ms": r["p50_s"] * 1e3, "p99_ms": r["p99_s"] * 1e3,
            "server_cpu_us": (s1 - s0) / n * 1e6, "daemon_cpu_us": (d1 - d0) / n * 1e6,
            "cpu_us_per_req": (s1 - s0 + d1 - d0) / n * 1e6,
            "server_cores": (s1 - s0) / (t1 - t0)}


def idle(server, dpid, seconds):
    """The server's and cuflagd's CPU with no traffic, in % of a core."""
    time.sleep(0.1)
    s0, d0, t0 = cpu_seconds(server.proc.pid), cpu_seconds(dpid), time.monotonic()
    time.sleep(seconds)
    s1, d1, t1 = cpu_seconds(server.proc.pid), cpu_seconds(dpid), time.monotonic()
    return {"server_pct": (s1 - s0) / (t1 - t0) * 100, "daemon_pct": (d1 - d0) / (t1 - t0) * 100}


def spread(values):
    values = [v for v in values if v == v]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def summarize(points, idles):
    """Medians with min-max over rounds, per loop, mode and point."""
    keys = {}
    for p in points:
        keys.setdefault((p["loop"], p["mode"], p["kind"], p["at"]), []).append(p)
    rows = []
    for (loop, mode, kind, at), ps in keys.items():
        row = {"loop": loop, "mode": mode, "kind": kind, "at": at}
        for f in ("req_per_s", "p50_ms", "p99_ms", "cpu_us_per_req", "server_cpu_us",
                  "daemon_cpu_us", "rate"):
            if f in ps[0]:
                row[f] = spread([p[f] for p in ps])
        row["errors"] = sum(p["errors"] for p in ps)
        rows.append(row)
    idle_rows = []
    for (loop, mode) in sorted({(i["loop"], i["mode"]) for i in idles}):
        its = [i for i in idles if (i["loop"], i["mode"]) == (loop, mode)]
        idle_rows.append({"loop": loop, "mode": mode,
                          "server_pct": spread([i["server_pct"] for i in its]),
                          "daemon_pct": spread([i["daemon_pct"] for i in its])})
    return rows, idle_rows


def targets(rows, idle_rows):
    """The issue's ratios, from the medians: cuflag against its peers at
    each point, and uvloop against asyncio."""
    med = {(r["loop"], r["mode"], r["kind"], r["at"]): r for r in rows}
    out = []
    for (loop, mode, kind, at), r in sorted(med.items(), key=lambda kv: str(kv[0])):
        if mode != "cuflag":
            continue
        t = {"loop": loop, "kind": kind, "at": at}

        def m(row, f):
            return row[f]["median"] if row and row.get(f) else float("nan")

        tt = med.get((loop, "to_thread", kind, at))
        pl = med.get((loop, "poll", kind, at))
        t["req_vs_to_thread"] = m(r, "req_per_s") / m(tt, "req_per_s")
        t["p99_vs_to_thread"] = m(r, "p99_ms") / m(tt, "p99_ms")
        t["req_vs_poll"] = m(r, "req_per_s") / m(pl, "req_per_s")
        t["cpu_vs_poll"] = m(r, "cpu_us_per_req") / m(pl, "cpu_us_per_req")
        if loop == "uvloop":
            a = med.get(("asyncio", "cuflag", kind, at))
            t["uvloop_req_vs_asyncio"] = m(r, "req_per_s") / m(a, "req_per_s")
            t["uvloop_p99_vs_asyncio"] = m(r, "p99_ms") / m(a, "p99_ms")
        out.append(t)
    return out


@functools.lru_cache(maxsize=None)
def machine():
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        gpu = "no GPU"
    return f"{gpu}; {os.cpu_count()} CPUs; {platform.platform()}"


def write(args, peak, points, idles):
    """The JSON of the points so far, and their medians; returns it."""
    rows, idle_rows = summarize(points, idles)
    result = {
        "bench": "serve", "commit": args.commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(), "device": args.device,
        "config": {"rounds": args.rounds, "seconds": args.seconds, "warmup": args.warmup,
                   "concurrency": args.concurrency, "fractions": args.fractions,
                   "server_args": args.server_arg, "peak": peak,
                   "loadgen_processes": args.loadgen_processes},
        "summary": rows, "idle": idle_rows, "targets": targets(rows, idle_rows),
        "points": points, "idle_rounds": idles,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("gpu", "sim"), default="gpu")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--loops", nargs="+", default=list(LOOPS), choices=LOOPS)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64, 256])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.2, 0.5, 0.9],
                    help="open-loop rates, as fractions of the loop's best peak")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5, help="measured window of a point")
    ap.add_argument("--warmup", type=float, default=0.25, help="load before the window")
    ap.add_argument("--idle", type=float, default=0.4, help="idle CPU window per server")
    ap.add_argument("--loadgen-processes", type=int, default=6)
    ap.add_argument("--port", type=int, default=18100, help="the first server's port")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="passed to every http_serve.py (repeat: --server-arg=--layers ...)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--commit", default="")
    args = ap.parse_args()
    dpid = daemon_pid(os.environ.get("CUFLAG_SOCKET") or "/run/cuflagd/cuflagd.sock")
    started = time.monotonic()
    servers = [Server(args, loop, mode, args.port + i)
               for i, (loop, mode) in enumerate((l, m) for l in args.loops for m in args.modes)]
    gen = loadgen.LoadGen(args.loadgen_processes)
    points, idles = [], []
    try:
        for s in servers:
            s.wait_ready(300)
            s.pause()
        print(f"serve_bench: {len(servers)} servers ready in {time.monotonic() - started:.1f} s",
              flush=True)
        # Calibration: each loop's best peak.
        peak = {}
        top = sorted(args.concurrency)[-2:]
        for s in servers:
            s.resume()
            for c in top:
                r = point(gen, s, dpid, args, concurrency=c)
                peak[s.loop] = max(peak.get(s.loop, 0), r["req_per_s"])
            s.pause()
        print("serve_bench: best peak " + ", ".join(f"{k} {v:.0f} req/s" for k, v in peak.items()),
              flush=True)
        for rnd in range(args.rounds):
            k = rnd % len(servers)
            for s in servers[k:] + servers[:k]:
                s.resume()
                i = idle(s, dpid, args.idle)
                idles.append({"round": rnd, "loop": s.loop, "mode": s.mode, **i})
                for c in args.concurrency:
                    p = point(gen, s, dpid, args, concurrency=c)
                    points.append({"round": rnd, "loop": s.loop, "mode": s.mode,
                                   "kind": "closed", "at": c, **p})
                for f in args.fractions:
                    rate = f * peak[s.loop]
                    p = point(gen, s, dpid, args, rate=rate)
                    points.append({"round": rnd, "loop": s.loop, "mode": s.mode,
                                   "kind": "open", "at": f, "rate": rate, **p})
                s.pause()
            write(args, peak, points, idles)  # what a cut-off run leaves
            print(f"serve_bench: round {rnd + 1} of {args.rounds} done at "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        gen.close()
        for s in servers:
            s.stop()
    print_summary(write(args, peak, points, idles))
    return 0


def print_summary(result):
    fmt = "{:<8} {:<10} {:<6} {:>6} {:>9} {:>8} {:>8} {:>9} {:>6}"
    print(fmt.format("loop", "mode", "load", "at", "req/s", "p50 ms", "p99 ms", "CPU us/r", "err"))
    for r in result["summary"]:
        at = f"{r['at']:g}" if r["kind"] == "closed" else f"{r['at'] * 100:.0f}%"
        print(fmt.format(r["loop"], r["mode"], r["kind"], at, f"{r['req_per_s']['median']:.0f}",
                         f"{r['p50_ms']['median']:.3f}", f"{r['p99_ms']['median']:.3f}",
                         f"{r['cpu_us_per_req']['median']:.0f}", r["errors"]))
    for i in result["idle"]:
        print(f"idle {i['loop']:<8} {i['mode']:<10} server {i['server_pct']['median']:.1f}% "
              f"cuflagd {i['daemon_pct']['median']:.1f}%")
    for t in result["targets"]:
        print("target " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in t.items()))


if __name__ == "__main__":
    sys.exit(main())
