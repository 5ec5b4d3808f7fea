#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An HTTP load generator on aiohttp's client, closed or open loop.

    loadgen.py URL (--concurrency C | --rate R) [--duration S] [--warmup S]
               [--processes P] [--json FILE]

--concurrency C keeps C requests in flight (each of C connections sends its
next request when its answer is in); --rate R sends R requests a second at
Poisson times, whether or not the answers are in (an open loop: a slow
server is not given time to catch up, and a request's latency counts from
when it was due, not from when it went out). The load is split over P
processes (uvloop where it is installed), all measuring the same window:
after --warmup seconds of load, --duration seconds whose answers count. It
prints requests/s, p50 and p99 latency and the errors (a status other than
200, a failed connection); exit 1 if there were any.

Used by scripts/serve-bench.sh (through LoadGen) where wrk is not
installed; wrk drives the same server as well.
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import random
import sys
import time

MAX_OUTSTANDING = 20000  # an open loop's requests in flight before it counts drops
FAILS = (OSError, asyncio.TimeoutError)  # and aiohttp.ClientError, added at its import


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def fetch(session, url):
    """One request: whether it was answered 200."""
    try:
        async with session.get(url) as resp:
            await resp.read()
            return resp.status == 200
    except FAILS:
        return False


async def closed_loop(session, url, concurrency, begin, t0, t1):
    """concurrency connections, each sending as soon as its answer is in."""
    latencies, errors = [], 0

    async def connection():
        nonlocal errors
        while True:
            start = time.monotonic()
            if start >= t1:
                return
            ok = await fetch(session, url)
            end = time.monotonic()
            if t0 <= end < t1:  # answered in the window, wherever it began
                latencies.append(end - start)
                errors += not ok

    await asyncio.sleep(max(0.0, begin - time.monotonic()))
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return latencies, errors


async def open_loop(session, url, rate, begin, t0, t1, seed):
    """Requests at Poisson times of mean rate `rate`, each latency counted
    from its due time."""
    rng = random.Random(seed)
    latencies, errors, tasks = [], 0, set()

    async def one(due):
        nonlocal errors
        ok = await fetch(session, url)
        end = time.monotonic()
        if t0 <= due < t1:
            latencies.append(end - due)
            errors += not ok

    due = begin
    while due < t1:
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(tasks) >= MAX_OUTSTANDING:
            errors += t0 <= due < t1  # dropped: the server is far behind
        else:
            task = asyncio.ensure_future(one(due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        due += rng.expovariate(rate)
    if tasks:
        await asyncio.gather(*tasks)
    return latencies, errors


async def work(job):
    global FAILS
    import aiohttp

    FAILS = (OSError, asyncio.TimeoutError, aiohttp.ClientError)

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        if job["concurrency"]:
            return await closed_loop(session, job["url"], job["concurrency"], job["begin"],
                                     job["t0"], job["t1"])
        return await open_loop(session, job["url"], job["rate"], job["begin"], job["t0"],
                               job["t1"], job["seed"])


def worker(conn):
    """A load process: runs the jobs its parent sends, answers each."""
    try:
        import uvloop
        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        while True:
            job = conn.recv()
            if job is None:
                return
            conn.send(runner.run(work(job)))


class LoadGen:
    """P load processes, kept between runs (a run costs no start-up)."""

    def __init__(self, processes=4):
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker, args=(child,), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        self.seed = 0

    def start(self, url, concurrency=None, rate=None, warmup=0.3, duration=1.0, margin=0.05):
        """Start a run; returns the window (t0, t1) on time.monotonic()'s
        clock, which is the system's (CLOCK_MONOTONIC): the caller times
        the server's CPU over it. Then finish() for the results."""
        if (concurrency is None) == (rate is None):
            raise ValueError("give one of concurrency and rate")
        n = len(self.conns) if rate is not None else min(len(self.conns), concurrency)
        begin = time.monotonic() + margin
        t0 = begin + warmup
        t1 = t0 + duration
        self.running = self.conns[:n]
        for i, conn in enumerate(self.running):
            self.seed += 1
            share = None if concurrency is None else concurrency // n + (i < concurrency % n)
            conn.send({"url": url, "concurrency": share, "rate": None if rate is None else rate / n,
                       "begin": begin, "t0": t0, "t1": t1, "seed": self.seed})
        self.window = (t0, t1)
        return self.window

    def finish(self):
        """The last run's results: requests answered within the window, their
        rate, p50 and p99 (seconds), errors."""
        latencies, errors = [], 0
        for conn in self.running:
            lat, err = conn.recv()
            latencies += lat
            errors += err
        latencies.sort()
        t0, t1 = self.window
        return {"requests": len(latencies), "req_per_s": len(latencies) / (t1 - t0),
                "p50_s": percentile(latencies, 0.5), "p99_s": percentile(latencies, 0.99),
                "errors": errors}

    def run(self, url, **kw):
        self.start(url, **kw)
        return self.finish()

    def close(self):
        for conn in self.conns:
            conn.send(None)
        for p in self.procs:
            p.join(timeout=5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--concurrency", type=int, help="requests in flight (a closed loop)")
    how.add_argument("--rate", type=float, help="requests a second (an open loop)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds measured")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of load before")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--json", help="also write the result to this file")
    args = ap.parse_args()
    if (args.concurrency or 1) < 1 or (args.rate is not None and args.rate <= 0):
        ap.error("concurrency and rate must be positive")
    gen = LoadGen(args.processes)
    try:
        r = gen.run(args.url, concurrency=args.concurrency, rate=args.rate, warmup=args.warmup,
                    duration=args.duration)
    finally:
        gen.close()
    print(f"{r['requests']} requests in {args.duration:g} s: {r['req_per_s']:.0f} req/s, "
          f"p50 {r['p50_s'] * 1e3:.3f} ms, p99 {r['p99_s'] * 1e3:.3f} ms, {r['errors']} errors")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
    return 1 if r["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
