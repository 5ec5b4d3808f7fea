#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An asyncio server loop that awaits its PyTorch work, three ways.

N requests are in flight at once on one event loop; each runs its PyTorch
work on one of K CUDA streams and waits for it:

  cuflag     await client.synchronize_async(stream)      (this package)
  to_thread  await asyncio.to_thread(stream.synchronize) (a thread per wait)
  poll       a scheduler task that polls each request's event.query() and
             yields with asyncio.sleep(0) in between (what busy-polling
             engine loops do; it polls while the server runs)

For each it prints requests/s, p50/p99 request latency, CPU seconds per
1000 requests counting cuflagd's CPU over the same window (the daemon's pid
comes from its socket, SO_PEERCRED), and the CPU the loop takes while no
request is in flight. With --processes P, P server processes run each
phase at the same time (same mode, same moment), and the figures are their
sums (requests/s, CPU) and their merged latencies.

    cuflagd --socket /tmp/cuflag.sock &
    python3 serve.py --socket /tmp/cuflag.sock --concurrency 1 8 64 --streams 8
    python3 serve.py --socket /tmp/cuflag.sock --concurrency 16 --processes 4

The part to copy is serve_cuflag(): one client, one await per request.
"""

import argparse
import asyncio
import glob
import json
import multiprocessing as mp
import os
import socket
import struct
import sys
import threading
import time

import cuflag

MODES = ("cuflag", "to_thread", "poll")


# ---- the request: a little PyTorch work on one of the streams ----

class Model:
    """One bf16 matmul per request, on preallocated tensors of each stream."""

    def __init__(self, torch, streams, size):
        self.torch = torch
        self.streams = [torch.cuda.Stream() for _ in range(streams)]
        self.tensors = []
        for s in self.streams:
            with torch.cuda.stream(s):
                a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
                self.tensors.append((a, a.clone(), torch.empty_like(a)))
        torch.cuda.synchronize()

    def submit(self, i):
        """Queue request i's work on its stream; return the stream."""
        s = self.streams[i % len(self.streams)]
        a, b, c = self.tensors[i % len(self.streams)]
        with self.torch.cuda.stream(s):
            self.torch.mm(a, b, out=c)
        return s


# ---- the three ways to await it ----

async def serve_cuflag(client, model, i, spin_us=None):
    stream = model.submit(i)
    # Returns once the stream's work queued so far is done; the loop serves
    # other requests meanwhile. spin_us None: the client's default budget.
    await client.synchronize_async(stream, spin_us=spin_us)


async def serve_to_thread(model, i):
    stream = model.submit(i)
    await asyncio.to_thread(stream.synchronize)


class Poller:
    """The polling scheduler: one task that looks at every pending event and
    yields to the loop in between, for as long as the server runs."""

    def __init__(self, torch):
        self.torch = torch
        self.pending = []
        self.running = True
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def run(self):
        while self.running:
            if self.pending:
                still = []
                for ev, fut in self.pending:
                    if ev.query():
                        fut.set_result(None)
                    else:
                        still.append((ev, fut))
                self.pending = still
            await asyncio.sleep(0)

    async def serve(self, model, i):
        stream = model.submit(i)
        ev = self.torch.cuda.Event()
        ev.record(stream)
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((ev, fut))
        await fut

    async def stop(self):
        self.running = False
        await self.task


# ---- one phase in one process ----

def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def phase(mode, model, client, torch, concurrency, seconds, idle_s, spin_us):
    """Requests for `seconds`, then `idle_s` with none in flight. Returns the
    latencies and this process's CPU over each part."""
    poller = Poller(torch) if mode == "poll" else None
    if mode == "cuflag":
        async def one(i):
            await serve_cuflag(client, model, i, spin_us)
    elif mode == "to_thread":
        async def one(i):
            await serve_to_thread(model, i)
    else:
        async def one(i):
            await poller.serve(model, i)

    # Warm-up: thread pool, stream slots, readers, cuBLAS.
    await asyncio.gather(*(one(i) for i in range(max(64, concurrency * 4))))
    latencies = []
    deadline = time.perf_counter() + seconds

    async def worker(w):
        i = w
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await one(i)
            latencies.append(time.perf_counter() - t0)
            i += concurrency
            # The response: a real handler writes to its socket here, and the
            # loop turns to the other requests (an await that finds its work
            # done does not yield, and one worker would keep the loop).
            await asyncio.sleep(0)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    cpu1, t1 = time.process_time(), time.perf_counter()
    await asyncio.sleep(idle_s)
    cpu2, t2 = time.process_time(), time.perf_counter()
    if poller is not None:
        await poller.stop()
    return {"latencies": latencies, "wall": t1 - t0, "cpu": cpu1 - cpu0,
            "idle_cpu": cpu2 - cpu1, "idle_wall": t2 - t1}


def server(args, index, barrier, results):
    """One server process: every phase, in step with the others. If it
    fails, it breaks the barrier: the parent stops at once, not for ever."""
    try:
        import torch
        torch.cuda.init()
        model = Model(torch, args.streams, args.size)
        with cuflag.Client(args.socket) as client:
            for mode, concurrency, spin_us in plan(args):
                barrier.wait()
                r = asyncio.run(phase(mode, model, client, torch, concurrency, args.seconds,
                                      args.idle, spin_us))
                results.put((index, mode, concurrency, spin_us, r))
                barrier.wait()
    except BaseException:
        barrier.abort()
        raise


def need_torch():
    """PyTorch with a CUDA device, or exit at once saying what is missing."""
    try:
        import torch
    except ImportError as e:
        sys.exit(f"serve.py: needs PyTorch with CUDA ({e}); without a GPU, "
                 "examples/python/quickstart.py shows cuflag on a simulated device")
    if not torch.cuda.is_available():
        sys.exit("serve.py: PyTorch sees no CUDA device here; without a GPU, "
                 "examples/python/quickstart.py shows cuflag on a simulated device")


def plan(args):
    """The phases, in order: every mode at each concurrency."""
    for concurrency in args.concurrency:
        for mode in args.modes:
            spins = args.spin_us if mode == "cuflag" else [None]
            for spin_us in spins:
                yield mode, concurrency, spin_us


# ---- the daemon's CPU ----

def daemon_pid(path):
    """cuflagd's pid, from its socket's peer credentials."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(path)
        creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def cpu_seconds(pid):
    """CPU time of every thread of pid (schedstat: nanoseconds on a CPU)."""
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1e9


# ---- the parent: start the servers, time the daemon, print ----

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", default=os.environ.get("CUFLAG_SOCKET"),
                    help="cuflagd's socket (default: $CUFLAG_SOCKET, else cuflagd's own)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64],
                    help="requests in flight at once, per process (several: one run each)")
    ap.add_argument("--streams", type=int, default=8, help="CUDA streams per process")
    ap.add_argument("--processes", type=int, default=1, help="server processes in lockstep")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--spin-us", type=int, nargs="+", default=[None],
                    help="cuflag's spin budgets to run (default: the client's)")
    ap.add_argument("--size", type=int, default=512, help="matmul size of a request")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each phase")
    ap.add_argument("--idle", type=float, default=1.0, help="idle time measured after it")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    need_torch()
    path = args.socket or "/run/cuflagd/cuflagd.sock"
    dpid = daemon_pid(path)

    ctx = mp.get_context("spawn")  # CUDA and fork do not mix
    barrier = ctx.Barrier(args.processes + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=server, args=(args, k, barrier, results))
             for k in range(args.processes)]
    for p in procs:
        p.start()
    rows = []
    print(f"{'mode':<10} {'spin':>5} {'procs':>5} {'conc':>5} {'req/s':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'cpu s/1k':>9} {'daemon':>7} {'idle cpu':>9}")
    try:
        run_phases(args, procs, barrier, results, dpid, rows)
    except threading.BrokenBarrierError:
        for p in procs:
            p.join()
        sys.exit("serve.py: a server process failed (its error is above)")
    for p in procs:
        p.join()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(p.exitcode == 0 for p in procs) else 1


def run_phases(args, procs, barrier, results, dpid, rows):
    """Each phase: start the servers together, time the daemon, print a row."""
    for mode, concurrency, spin_us in plan(args):
        barrier.wait()
        d0 = cpu_seconds(dpid)
        got = [results.get(timeout=600) for _ in procs]
        d1 = cpu_seconds(dpid)
        barrier.wait()
        lat = sorted(x for g in got for x in g[4]["latencies"])
        wall = max(g[4]["wall"] for g in got)
        cpu = sum(g[4]["cpu"] for g in got)
        idle = sum(g[4]["idle_cpu"] / g[4]["idle_wall"] for g in got) / len(got)
        n = len(lat)
        row = {"mode": mode, "spin_us": spin_us if spin_us is not None else
               (cuflag.DEFAULT_SPIN_US if mode == "cuflag" else None),
               "processes": args.processes, "concurrency": concurrency,
               "streams": args.streams, "requests": n, "req_per_s": n / wall,
               "p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
               # The daemon's CPU over the requests and the idle time after
               # them: what cuflag costs the node, whoever pays it.
               "cpu_s_per_1k": (cpu + (d1 - d0)) / n * 1e3,
               "daemon_cpu_s": d1 - d0, "idle_loop_cpu": idle}
        rows.append(row)
        spin = "" if row["spin_us"] is None else str(row["spin_us"])
        print(f"{mode:<10} {spin:>5} {args.processes:>5} {concurrency:>5} "
              f"{row['req_per_s']:>9.0f} {row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f} "
              f"{row['cpu_s_per_1k']:>9.3f} {row['daemon_cpu_s']:>7.3f} "
              f"{idle * 100:>8.1f}%", flush=True)


if __name__ == "__main__":
    sys.exit(main())
