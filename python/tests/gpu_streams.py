# SPDX-License-Identifier: MIT
"""Python on a real GPU, through the real cuflagd: PyTorch and CuPy streams
awaited with Client.synchronize_async() and synchronize(), a device fault,
and a CUDA graph that signals at each replay.

    python3 gpu_streams.py torch|cupy

Exits 77 (skipped) without the library, without a GPU, or without a
driver; 0 when every check passed. The fault runs in a child process (a
faulted context is lost for good): ``gpu_streams.py fault-torch|fault-cupy``.
"""

import asyncio
import ctypes
import errno
import os
import random
import subprocess
import sys
import threading
import time

import cuflag
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too
from daemon import Daemon

SKIP = 77
STREAMS = 8
PER_STREAM = 500
TIMEOUT_S = 60


def fail(what):
    print(f"FAIL: {what}", flush=True)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


# Hand-written PTX, loaded by the driver: no CUDA compiler needed.
# busy(ns): one thread busy for ns of %globaltimer; bad(addr): a load from
# addr, which faults for an address no allocation covers.
_PTX = b"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry busy(.param .u64 ns)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [ns];
	mov.u64 %rd2, %globaltimer;
	add.u64 %rd3, %rd2, %rd1;
$L_busy:
	mov.u64 %rd4, %globaltimer;
	setp.lt.u64 %p1, %rd4, %rd3;
	@%p1 bra $L_busy;
	ret;
}

.visible .entry bad(.param .u64 addr)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [addr];
	ld.volatile.global.u32 %r1, [%rd1];
	st.volatile.global.u32 [%rd1+4], %r1;
	ret;
}
"""


class Torch:
    """The few operations the checks need, in PyTorch."""

    def __init__(self):
        import torch
        self.torch = torch

    @staticmethod
    def available():
        try:
            import torch
        except ImportError:
            return "no torch"
        return None if torch.cuda.is_available() else "torch sees no GPU"

    def stream(self):
        return self.torch.cuda.Stream()

    def work(self, stream, us):
        """Work of about us microseconds on stream, then an event after it."""
        with self.torch.cuda.stream(stream):
            self.torch.cuda._sleep(int(us * 2000))  # cycles: about 0.5 ns each
            ev = self.torch.cuda.Event()
            ev.record(stream)
        return ev

    @staticmethod
    def done(ev):
        return ev.query()

    def fault(self, stream):
        """Queue a long kernel, then one that reads a bad address, on the
        torch stream (PyTorch has no kernel that faults so: its checks are
        assertions). The kernels are the PTX below, launched through the
        driver in PyTorch's context."""
        cu = ctypes.CDLL("libcuda.so.1")
        mod, busy, bad = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        check(cu.cuModuleLoadData(ctypes.byref(mod), _PTX) == 0, "cuModuleLoadData")
        check(cu.cuModuleGetFunction(ctypes.byref(busy), mod, b"busy") == 0, "busy")
        check(cu.cuModuleGetFunction(ctypes.byref(bad), mod, b"bad") == 0, "bad")
        for fn, arg in ((busy, 50_000_000), (bad, 0x10)):
            value = ctypes.c_uint64(arg)
            params = (ctypes.c_void_p * 1)(ctypes.addressof(value))
            check(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0,
                                    ctypes.c_void_p(stream.cuda_stream), params, None) == 0,
                  "cuLaunchKernel")


class Cupy:
    def __init__(self):
        import cupy
        import numpy
        self.cupy = cupy
        self.u64 = numpy.uint64
        self.module = cupy.cuda.function.Module()
        self.module.load(_PTX)
        self.busy = self.module.get_function("busy")
        self.bad = self.module.get_function("bad")

    @staticmethod
    def available():
        try:
            import cupy
        except ImportError:
            return "no cupy"
        try:
            return None if cupy.cuda.runtime.getDeviceCount() > 0 else "cupy sees no GPU"
        except Exception as e:  # cupy raises its own CUDARuntimeError without a driver
            return f"cupy sees no GPU ({e})"

    def stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def work(self, stream, us):
        self.busy((1,), (1,), (self.u64(int(us * 1000)),), stream=stream)
        ev = self.cupy.cuda.Event(disable_timing=True)
        ev.record(stream)
        return ev

    @staticmethod
    def done(ev):
        return ev.done

    def fault(self, stream):
        self.busy((1,), (1,), (self.u64(50_000_000),), stream=stream)
        self.bad((1,), (1,), (self.u64(0x10),), stream=stream)


LIBS = {"torch": Torch, "cupy": Cupy}


def streams_exact(lib, client):
    """8 streams x 500 awaited completions, two coroutines per stream; each
    await returns only once the event recorded after its own work is done;
    each stream's slot was signalled exactly 500 times."""
    streams = [lib.stream() for _ in range(STREAMS)]
    rng = random.Random(13)
    awaited = [0] * STREAMS

    async def requests(i, n):
        for _ in range(n):
            ev = lib.work(streams[i], rng.choice((0, 2, 10, 40)))
            await client.synchronize_async(streams[i])
            check(lib.done(ev), f"stream {i}: the await returned before its work was done")
            awaited[i] += 1

    async def main():
        # The first signal of each stream takes its slot.
        for s in streams:
            await client.synchronize_async(s)
        start = {i: client._stream_slot(cuflag.stream.handle(s)).flag
                 for i, s in enumerate(streams)}
        t0 = time.perf_counter()
        async with within(TIMEOUT_S):
            await asyncio.gather(*(requests(i, PER_STREAM // 2)
                                   for i in range(STREAMS) for _ in range(2)))
        wall = time.perf_counter() - t0
        for i, s in enumerate(streams):
            slot = client._stream_slot(cuflag.stream.handle(s))
            check(awaited[i] == PER_STREAM, f"stream {i}: {awaited[i]} awaits")
            check((slot.flag - start[i]) & 0xFFFFFFFF == PER_STREAM,
                  f"stream {i}: flag moved {slot.flag - start[i]}")
        return wall

    wall = asyncio.run(main())
    check(len(client._streams) == STREAMS, f"{len(client._streams)} stream slots")
    print(f"streams: {STREAMS} streams x {PER_STREAM} awaited completions exact, "
          f"each after its own work, {wall:.2f} s", flush=True)

    # Blocking, from threads: four threads share each of two streams.
    def worker(s, n):
        for _ in range(n):
            ev = lib.work(s, 5)
            client.synchronize(s, timeout=TIMEOUT_S)
            check(lib.done(ev), "synchronize returned before its work was done")

    threads = [threading.Thread(target=worker, args=(streams[i % 2], 100)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("threads: 8 threads x 100 synchronize() on 2 streams, each after its own work",
          flush=True)


def graph_replays(client, replays=1000):
    """torch.cuda.graph: the captured signal completes the slot at every
    replay; each replay armed with launched() and awaited once, and each
    await sees that replay's own copy to pinned memory."""
    import torch
    x = torch.zeros(1, device="cuda", dtype=torch.int64)
    seen = torch.zeros(1, dtype=torch.int64).pin_memory()
    slot = client.acquire()  # a fresh client: its first CUDA use is in the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
        torch.cuda._sleep(20_000)
        seen.copy_(x, non_blocking=True)
        got = slot.signal(torch.cuda.current_stream())
    check(got is None, f"signal under capture returned {got!r}")
    stream = torch.cuda.current_stream()

    async def main():
        for i in range(replays):
            g.replay()
            target = slot.launched(stream)
            async with within(10):
                await slot.wait_async(target)
            check(int(seen[0]) == i + 1, f"replay {i}: saw {int(seen[0])}")
        # The slot counted each replay once.
        await asyncio.sleep(0.05)
        return slot.consume()

    n = asyncio.run(main())
    check(n == replays, f"{n} completions counted for {replays} replays")
    # A plain signal after the replays carries on the timeline.
    t = slot.signal(stream)
    slot.wait(t, timeout=10)
    slot.release()
    print(f"graph: torch.cuda.graph replayed {replays} times, each awaited once, "
          f"each after its own work, {n} completions counted", flush=True)


def fault_child(name):
    """In a child: the awaited work faults; the await raises EIO."""
    lib = LIBS[name]()
    with cuflag.Client(os.environ["CUFLAG_SOCKET"]) as client:
        stream = lib.stream()
        lib.fault(stream)
        t0 = time.monotonic()

        async def main():
            try:
                async with within(20):
                    await client.synchronize_async(stream)
            except OSError as e:
                return e
            return None

        e = asyncio.run(main())
        took = time.monotonic() - t0
        check(isinstance(e, OSError) and e.errno == errno.EIO,
              f"synchronize_async after a fault: {e!r}")
        try:
            client.synchronize(stream, timeout=20)
        except OSError as e2:
            check(e2.errno == errno.EIO, f"synchronize after a fault: {e2!r}")
        else:
            fail("synchronize after a fault returned")
    print(f"fault ({name}): synchronize_async raised EIO after {took * 1000:.0f} ms, "
          f"synchronize raised EIO", flush=True)


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what.startswith("fault-"):
        fault_child(what[len("fault-"):])
        return 0
    if what not in LIBS:
        print(__doc__)
        return 2
    why = LIBS[what].available()
    if why:
        print(f"{what}: {why}, skipped")
        return SKIP
    lib = LIBS[what]()
    daemon = Daemon()
    try:
        with cuflag.Client(daemon.socket) as client:
            streams_exact(lib, client)
        if what == "torch":
            with cuflag.Client(daemon.socket) as client:
                graph_replays(client)
        env = dict(os.environ, CUFLAG_SOCKET=daemon.socket)
        r = subprocess.run([sys.executable, __file__, "fault-" + what], env=env,
                           timeout=120)
        check(r.returncode == 0, f"fault child exited {r.returncode}")
    finally:
        status = daemon.stop()
    check(status == 0, f"cuflagd exited with status {status}")
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
