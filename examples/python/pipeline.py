#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two processes of a pipeline, "prefill" and "decode", handing a tensor over.

    pipeline.py [--device gpu|sim] [--mode asyncio|gpu-wait|ipc-event|ipc-poll|poll-byte]

Prefill computes a tensor into memory that decode maps (CUDA IPC memory on
the GPU; a shared page on the simulated device) and tells decode it is
there; decode then computes on it. How decode learns of it (--mode):

  asyncio    prefill signals an exported cuflag slot after its work
             (Slot.signal); decode imported the slot and awaits the value
             on its asyncio loop (Slot.wait_async): cuflagd rings its eventfd
  gpu-wait   the same slot, but decode's stream waits for the value on the
             GPU (Slot.cuda_wait, queued before prefill's work even starts);
             no host thread waits
  ipc-event  prefill records a CUDA IPC event after its work; decode, told
             of the record, has a thread synchronize it (the event blocks,
             cudaEventBlockingSync); every other hand-off its stream waits
             for the event on the GPU instead (cuStreamWaitEvent), after the
             message that says it was recorded
  ipc-poll   the IPC event, queried by a loop that yields with
             asyncio.sleep(0) in between
  poll-byte  prefill's stream stores the hand-off's number into a shared
             host word (cuStreamWriteValue32); decode's loop polls the word

The hand-off is timed from the end of prefill's work to the start of
decode's: on the GPU by the GPU's own clock (%globaltimer, read by a
kernel after prefill's work and by the first kernel of decode's), on the
simulated device by CLOCK_MONOTONIC (the device thread's store, decode's
wake-up). It prints, per mode, the hand-offs' p50 and p99 and the CPU time
per hand-off of each process and of cuflagd (from /proc), and checks every
tensor decode read (the value prefill wrote last) and, for the slot, that
each hand-off was counted once. --device sim needs no GPU: a thread of
prefill stands in for its device; gpu-wait and the IPC-event modes need a
GPU and say so without one (exit 77).

    cuflagd --socket /tmp/cuflag.sock &
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 pipeline.py --device sim --mode asyncio
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 pipeline.py --mode asyncio --mode ipc-poll --rounds 5
"""

import argparse
import asyncio
import ctypes
import json
import mmap
import os
import queue
import socket
import struct
import subprocess
import sys
import threading
import time

import cuflag
from serve import cpu_seconds, percentile

SKIP = 77
MODES = ("asyncio", "gpu-wait", "ipc-event", "ipc-poll", "poll-byte")
GPU_ONLY = ("gpu-wait", "ipc-event", "ipc-poll")
SIDE = 1024            # the tensor: SIDE x SIDE float32
# The shared page: the hand-off word at 0, the device's done stamp (ns) at 8,
# the simulated tensor from 64 on.
PAGE = 1 << 16
SIM_TENSOR = 64
MSG = struct.Struct("<16sqQ")  # a control message: what, a number, a value


def send(chan, what, n=0, value=0):
    chan.send(MSG.pack(what.encode(), n, value))


def unpack(msg):
    what, n, value = MSG.unpack(msg)
    return what.rstrip(b"\0").decode(), n, value


# ---- the GPU: CuPy, and the two driver calls CuPy does not make ----

STAMP_SRC = r"""
extern "C" __global__ void stamp(unsigned long long *out)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	*out = t;
}
extern "C" __global__ void take(const float *tensor, const unsigned long long *end,
				const unsigned long long *start, unsigned long long *res)
{
	res[0] = *end;
	res[1] = *start;
	res[2] = (unsigned long long)tensor[0];
}
"""


def need_gpu():
    """CuPy and a GPU, or exit 77 saying what is missing. Asked of another
    process: CUDA started here would not survive the fork."""
    probe = ("import cupy\n"
             "n = cupy.cuda.runtime.getDeviceCount()\n"
             "assert n > 0, 'no GPU here'\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no usable GPU here"])[-1]
        print(f"pipeline.py: --device gpu needs CuPy and a GPU ({why}); --device sim runs "
              "asyncio and poll-byte without one", file=sys.stderr)
        sys.exit(SKIP)


class Gpu:
    """The CUDA side of one process: a stream, the stamp kernel, libcuda."""

    def __init__(self):
        import cupy
        self.cp = cupy
        self.rt = cupy.cuda.runtime
        cupy.cuda.Device(0).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        mod = cupy.RawModule(code=STAMP_SRC)
        self.stamp_k = mod.get_function("stamp")
        self.take_k = mod.get_function("take")
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuStreamWriteValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                                    ctypes.c_uint32, ctypes.c_uint]
        self.cu.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                                         ctypes.c_void_p, ctypes.c_uint]

    def host_device_pointer(self, addr):
        """The device address of registered host memory."""
        ptr = ctypes.c_uint64()
        rc = self.cu.cuMemHostGetDevicePointer_v2(ctypes.byref(ptr), addr, 0)
        if rc != 0:
            raise RuntimeError(f"cuMemHostGetDevicePointer failed: CUresult {rc}")
        return ptr.value

    def array(self, ptr, shape, dtype, nbytes):
        cp = self.cp
        mem = cp.cuda.UnownedMemory(ptr, nbytes, None)
        return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0))

    def stamp(self, ptr):
        with self.stream:
            self.stamp_k((1,), (1,), (self.cp.uint64(ptr),))

    def write_value(self, devptr, value):
        rc = self.cu.cuStreamWriteValue32_v2(self.stream.ptr, devptr, value, 0)
        if rc != 0:
            raise RuntimeError(f"cuStreamWriteValue32 failed: CUresult {rc}")

    def event_done(self, ev):
        try:
            return self.rt.eventQuery(ev) == 0
        except self.rt.CUDARuntimeError as e:
            if e.status == 600:  # cudaErrorNotReady
                return False
            raise


# ---- prefill ----

class SimDevice:
    """Prefill's simulated device: one thread doing the queued work in order."""

    def __init__(self, page, work_s):
        self.page = page
        self.work_s = work_s
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            k, finish = job
            time.sleep(self.work_s)
            # The tensor, then the stamp, then the hand-off's store.
            self.page[SIM_TENSOR:SIM_TENSOR + 4096] = struct.pack("<I", k) * 1024
            struct.pack_into("<Q", self.page, 8, time.monotonic_ns())
            finish()


def peer_pid(fd):
    """The pid at the other end of a Unix socket: the client's cuflagd,
    whichever it connected to ($CUFLAG_SOCKET, the node's, a user's)."""
    with socket.socket(fileno=os.dup(fd)) as s:
        creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def prefill(chan, page, args, child):
    with cuflag.Client() as client:
        dpid = peer_pid(client.fd)
        slot = client.acquire()
        fd = slot.export()
        extra = b""
        if args.device == "gpu":
            gpu = Gpu()
            cp, rt = gpu.cp, gpu.rt
            nbytes = SIDE * SIDE * 4
            base = rt.malloc(nbytes + 64)  # not CuPy's pool: IPC maps whole allocations
            tensor = gpu.array(base, (SIDE, SIDE), cp.float32, nbytes)
            end_stamp = base + nbytes
            a = cp.random.random((SIDE, SIDE), dtype=cp.float32)
            b = cp.random.random((SIDE, SIDE), dtype=cp.float32)
            event = cp.cuda.Event(block=True, disable_timing=True, interprocess=True)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
            rt.hostRegister(addr, PAGE, 2)  # cudaHostRegisterMapped
            word = gpu.host_device_pointer(addr)
            cp.cuda.Device().synchronize()  # a and b, made on the default stream
            extra = bytes(rt.ipcGetMemHandle(base)) + bytes(rt.ipcGetEventHandle(event.ptr))
        else:
            dev = SimDevice(page, args.work_us * 1e-6)
        socket.send_fds(chan, [extra], [fd])
        os.close(fd)
        chan.recv(MSG.size)  # imported: an import counts from when it is made
        results = []

        def work(k):
            """Queue hand-off k's work: the tensor, its last value k."""
            if args.device == "gpu":
                with gpu.stream:
                    for _ in range(args.matmuls):
                        cp.matmul(a, b, out=tensor)
                    tensor[0, 0] = k
                gpu.stamp(end_stamp)

        def signal(mode, k):
            """The hand-off of mode after hand-off k's work; the slot's value."""
            if args.device == "sim":
                if mode == "asyncio":
                    target = slot.arm()
                    dev.jobs.put((k, lambda: slot.complete(target)))
                    return target
                dev.jobs.put((k, lambda: struct.pack_into("<I", page, 0, k)))
                return 0
            if mode in ("asyncio", "gpu-wait"):
                return slot.signal(gpu.stream)
            if mode in ("ipc-event", "ipc-poll"):
                event.record(gpu.stream)
                return 0
            gpu.write_value(word, k)
            return 0

        # The first hand-off tells decode where the slot's timeline is.
        work(0)
        send(chan, "first", 0, signal("asyncio", 0))
        k = 1
        for r in range(args.rounds):
            for mode in args.mode:
                send(chan, mode, args.handoffs, 0)
                c0 = cpu_seconds(os.getpid()), cpu_seconds(child), cpu_seconds(dpid)
                for _ in range(args.handoffs):
                    what, _, _ = unpack(chan.recv(MSG.size))
                    assert what == "go", what
                    work(k)
                    send(chan, "queued", k, signal(mode, k))
                    k += 1
                what, _, _ = unpack(chan.recv(MSG.size))
                assert what == "done", what
                c1 = cpu_seconds(os.getpid()), cpu_seconds(child), cpu_seconds(dpid)
                stats = json.loads(chan.recv(1 << 20))
                stats.update(round=r, mode=mode, handoffs=args.handoffs,
                             prefill_cpu_us=(c1[0] - c0[0]) / args.handoffs * 1e6,
                             decode_cpu_us=(c1[1] - c0[1]) / args.handoffs * 1e6,
                             daemon_cpu_us=(c1[2] - c0[2]) / args.handoffs * 1e6)
                results.append(stats)
                print_row(stats)
        send(chan, "end")
        chan.recv(MSG.size)  # decode is through: its imports go before the slot
        if args.device == "gpu":
            gpu.stream.synchronize()
            rt.hostUnregister(addr)
        else:
            dev.jobs.put(None)
        slot.release()
    return results


# ---- decode ----

class Decode:
    def __init__(self, chan, page, args, imported, client, extra):
        self.chan = chan
        self.page = page
        self.args = args
        self.imported = imported
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.expected = None  # the slot's next value
        if args.device == "gpu":
            gpu = self.gpu = Gpu()
            cp, rt = gpu.cp, gpu.rt
            nbytes = SIDE * SIDE * 4
            base = rt.ipcOpenMemHandle(extra[:64], 1)
            self.tensor = gpu.array(base, (SIDE, SIDE), cp.float32, nbytes)
            self.end_stamp = base + nbytes
            self.event = rt.ipcOpenEventHandle(extra[64:128])
            self.start = cp.zeros(1, cp.uint64)
            self.res = cp.zeros(3, cp.uint64)
            self.host = cp.cuda.alloc_pinned_memory(24)
            self.host_res = (ctypes.c_uint64 * 3).from_address(self.host.ptr)
            self.w = cp.random.random((SIDE, SIDE), dtype=cp.float32)
            self.out = cp.empty((SIDE, SIDE), cp.float32)
            self.own = client.acquire()
            cp.cuda.Device().synchronize()  # w, made on the default stream

    async def recv(self):
        return unpack(await self.loop.sock_recv(self.chan, MSG.size))

    def queue_decode(self):
        """Decode's work on the GPU, after whatever its stream waits for:
        stamp its start, compute on the tensor, take the stamps and the
        tensor's value to the host; the own slot's value that says done."""
        gpu = self.gpu
        gpu.stamp(self.start.data.ptr)
        with gpu.stream:
            gpu.cp.matmul(self.tensor, self.w, out=self.out)
            gpu.take_k((1,), (1,), (self.tensor, gpu.cp.uint64(self.end_stamp), self.start,
                                           self.res))
            gpu.rt.memcpyAsync(self.host.ptr, self.res.data.ptr, 24, 2, gpu.stream.ptr)
        return self.own.signal(gpu.stream)

    async def handoff(self, mode, k, gpu_side):
        """One hand-off: returns (latency in ns, the tensor's value seen)."""
        args, page = self.args, self.page
        own = None
        if mode == "gpu-wait":
            self.imported.cuda_wait(self.gpu.stream, self.expected)
            own = self.queue_decode()
        send(self.chan, "go", k)
        if mode in ("asyncio", "gpu-wait"):
            value = self.expected
            self.expected = (self.expected + 1) & 0xFFFFFFFF
        if mode == "asyncio":
            await self.imported.wait_async(value)
        elif mode in ("ipc-event", "ipc-poll"):
            what, n, _ = await self.recv()  # the event is recorded
            if mode == "ipc-poll":
                while not self.gpu.event_done(self.event):
                    await asyncio.sleep(0)
            elif gpu_side:
                self.gpu.rt.streamWaitEvent(self.gpu.stream.ptr, self.event, 0)
                own = self.queue_decode()
            else:
                await asyncio.to_thread(self.gpu.rt.eventSynchronize, self.event)
        elif mode == "poll-byte":
            while struct.unpack_from("<I", page, 0)[0] != (k & 0xFFFFFFFF):
                await asyncio.sleep(0)
        if args.device == "sim":
            woke = time.monotonic_ns()
            seen = struct.unpack_from("<I", page, SIM_TENSOR)[0]
            lat = woke - struct.unpack_from("<Q", page, 8)[0]
        else:
            if own is None:
                own = self.queue_decode()
            await self.own.wait_async(own)
            self.own.consume()
            end, start, seen = self.host_res
            lat = start - end
        if mode not in ("ipc-event", "ipc-poll"):
            what, n, value = await self.recv()
        assert what == "queued" and n == k, (what, n, k)
        if mode in ("asyncio", "gpu-wait") and value != (self.expected - 1) & 0xFFFFFFFF:
            raise SystemExit(f"pipeline.py: FAIL slot value {value}, expected {self.expected - 1}")
        if seen != k:
            raise SystemExit(f"pipeline.py: FAIL hand-off {k} ({mode}): decode read the "
                             f"tensor of {seen}")
        return lat

    async def run(self):
        what, _, first = await self.recv()
        assert what == "first"
        await self.imported.wait_async(first)
        self.expected = (first + 1) & 0xFFFFFFFF
        counted = self.imported.consume()
        signalled = 1
        k = 1
        while True:
            mode, n, _ = await self.recv()
            if mode == "end":
                break
            lat, lat_gpu = [], []
            for i in range(n):
                gpu_side = mode == "ipc-event" and i % 2 == 1
                (lat_gpu if gpu_side else lat).append(await self.handoff(mode, k, gpu_side))
                k += 1
            if mode in ("asyncio", "gpu-wait"):
                signalled += n
            counted += self.imported.consume()
            send(self.chan, "done")
            stats = summary(lat)
            if lat_gpu:
                stats["gpu_side"] = summary(lat_gpu)
            await self.loop.sock_sendall(self.chan, json.dumps(stats).encode())
        # Each of prefill's signals counted once by the imported slot (the
        # last may land before cuflagd rings for it: the flag is seen first).
        deadline = time.monotonic() + 5
        while True:
            counted += self.imported.consume()
            if counted >= signalled or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        counted += self.imported.consume()  # none more: a double count shows here
        if counted != signalled:
            raise SystemExit(f"pipeline.py: FAIL {counted} completions counted for "
                             f"{signalled} signals")
        if self.args.device == "gpu":
            self.gpu.stream.synchronize()
            self.own.release()
            self.gpu.rt.ipcCloseMemHandle(self.tensor.data.ptr)


def summary(lat_ns):
    lat = sorted(x / 1e3 for x in lat_ns)
    return {"n": len(lat), "p50_us": percentile(lat, 0.5), "p99_us": percentile(lat, 0.99),
            "min_us": lat[0] if lat else float("nan")}


def decode(chan, page, args):
    msg, fds, _, _ = socket.recv_fds(chan, 256, 1)
    with cuflag.Client() as client:
        imported = client.import_slot(fds[0])
        os.close(fds[0])
        send(chan, "imported")
        chan.setblocking(False)

        async def main():
            await Decode(chan, page, args, imported, client, msg).run()

        asyncio.run(main())
        chan.setblocking(True)
        send(chan, "bye")
        imported.release()


def print_row(s):
    g = s.get("gpu_side")
    extra = (f"   stream waits (cuStreamWaitEvent): p50 {g['p50_us']:.1f} p99 {g['p99_us']:.1f} us"
             if g else "")
    print(f"{s['mode']:<10} round {s['round']}: hand-off p50 {s['p50_us']:8.1f} us  p99 "
          f"{s['p99_us']:8.1f} us  CPU per hand-off: prefill {s['prefill_cpu_us']:7.1f} us, "
          f"decode {s['decode_cpu_us']:7.1f} us, cuflagd {s['daemon_cpu_us']:6.1f} us{extra}",
          flush=True)


def spread(values):
    values = sorted(v for v in values if v == v)
    if not values:
        return None
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return {"median": median, "min": values[0], "max": values[-1], "n": len(values)}


def write_json(args, results):
    """Every round's figures, and per mode their medians with min-max."""
    summary = []
    for mode in args.mode:
        rows = [r for r in results if r["mode"] == mode]
        s = {"mode": mode}
        for f in ("p50_us", "p99_us", "prefill_cpu_us", "decode_cpu_us", "daemon_cpu_us"):
            s[f] = spread([r[f] for r in rows])
        s["cpu_us"] = spread([r["prefill_cpu_us"] + r["decode_cpu_us"] + r["daemon_cpu_us"]
                              for r in rows])
        if any("gpu_side" in r for r in rows):
            s["gpu_side_p50_us"] = spread([r["gpu_side"]["p50_us"] for r in rows])
            s["gpu_side_p99_us"] = spread([r["gpu_side"]["p99_us"] for r in rows])
        summary.append(s)
    try:
        machine = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=20).stdout.strip() or "no GPU"
    except (OSError, subprocess.TimeoutExpired):
        machine = "no GPU"
    with open(args.json, "w") as f:
        json.dump({"bench": "pipeline", "commit": args.commit, "device": args.device,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "machine": f"{machine}; {os.cpu_count()} CPUs",
                   "config": {"rounds": args.rounds, "handoffs": args.handoffs,
                              "matmuls": args.matmuls, "work_us": args.work_us},
                   "summary": summary, "rows": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("gpu", "sim"), default="gpu")
    ap.add_argument("--mode", choices=MODES, action="append",
                    help="how decode learns of the tensor (several: taken in turn, each round)")
    ap.add_argument("--handoffs", type=int, default=500, help="hand-offs per mode and round")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--matmuls", type=int, default=4,
                    help="--device gpu: prefill's work, SIDE x SIDE float32 matmuls")
    ap.add_argument("--work-us", type=float, default=200.0,
                    help="--device sim: prefill's work, in microseconds")
    ap.add_argument("--json", help="also write every round's figures to this file")
    ap.add_argument("--commit", default="", help="the commit measured, for --json")
    args = ap.parse_args()
    args.mode = args.mode or ["asyncio"]
    if args.handoffs < 1 or args.rounds < 1:
        ap.error("--handoffs and --rounds must be at least 1")
    if args.device == "sim":
        gpu_only = [m for m in args.mode if m in GPU_ONLY]
        if gpu_only:
            print(f"pipeline.py: --mode {gpu_only[0]} needs a GPU (--device gpu): the "
                  "simulated device runs asyncio and poll-byte", file=sys.stderr)
            return SKIP
    else:
        need_gpu()
    page = mmap.mmap(-1, PAGE)  # shared: both processes see it after the fork
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Two processes, each starting CUDA on its own after the fork.
    pid = os.fork()
    if pid == 0:
        a.close()
        code = 0
        try:
            decode(b, page, args)
        except BaseException as e:  # noqa: BLE001 - reported, then the exit status
            if not isinstance(e, SystemExit):
                print(f"pipeline.py decode: {e!r}", file=sys.stderr)
            elif isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            code = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 1
        os._exit(code)
    b.close()
    try:
        results = prefill(a, page, args, pid)
    except (AssertionError, OSError, EOFError) as e:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print(f"pipeline.py prefill: {e!r}", file=sys.stderr)
        return 1
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if args.json:
        write_json(args, results)
    if code == 0:
        print(f"pipeline.py: ok ({len(results) * args.handoffs} hand-offs, every tensor read "
              "after its work, every signal counted once)")
    return code


if __name__ == "__main__":
    sys.exit(main())
