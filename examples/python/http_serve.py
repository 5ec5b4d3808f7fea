#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An HTTP model server (aiohttp) whose requests await their GPU work.

    http_serve.py [--device gpu|sim] [--mode cuflag|to_thread|poll|block|hostfunc]
                  [--loop asyncio|uvloop] [--port N]

`GET /` runs one inference, batch 1, and answers 200 with the next token
("token 1234"); `GET /stats` answers the server's counters as JSON. Each
request in flight takes one CUDA stream of a pool (--streams), queues its
work there and waits for it in one of these ways (--mode):

  cuflag     await client.synchronize_async(stream): the loop serves other
             requests; cuflagd rings an eventfd the loop watches
  to_thread  await asyncio.to_thread(stream.synchronize): a thread per wait
  poll       a task polls every pending request's event.query() and yields
             with asyncio.sleep(0) in between, for as long as the server
             runs (what busy-polling engine loops do)
  block      stream.synchronize() in the handler: what a naive server does
  hostfunc   cuLaunchHostFunc after the work (PyTorch exposes no host
             callback: the driver's, through ctypes); the callback, on the
             driver's thread, hands the completion to the loop

--device gpu (the default) serves a small GPT-style model with random
weights (token and position embeddings, --layers pre-norm blocks of causal
attention and an MLP, a tied head; bf16), built in plain PyTorch and
captured into one CUDA graph per stream, so that a request is three
launches: its prompt in, the graph, the token out. --device sim needs no
GPU: a host thread stands in for the device and finishes each request's
fixed work (--work-us) in the order a stream would; in mode cuflag it
completes the request's slot (the flag's store the GPU would make), and
the await still learns of it from cuflagd.

    cuflagd --socket /tmp/cuflag.sock &
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 http_serve.py --port 8080 &
    wrk -c 64 -d 10 http://127.0.0.1:8080/
"""

import argparse
import asyncio
import ctypes
import heapq
import os
import signal
import sys
import threading
import time

MODES = ("cuflag", "to_thread", "poll", "block", "hostfunc")
DEVICES = ("gpu", "sim")
LOOPS = ("asyncio", "uvloop")


# ---- the simulated device: a thread that finishes work when it is due ----

class SimJob:
    __slots__ = ("done", "event", "slot", "target", "callback")

    def __init__(self, slot, target):
        self.done = False
        self.event = threading.Event()
        self.slot = slot
        self.target = target
        self.callback = None


class SimDevice:
    """Work finishes work_s after it starts; a stream's work starts when the
    stream's previous work is done (one stream: in order)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.heap = []
        self.seq = 0
        self.running = True
        self.thread = threading.Thread(target=self.run, name="sim-device", daemon=True)
        self.thread.start()

    def queue(self, entry, job, work_s):
        with self.cond:
            due = max(time.monotonic(), entry.busy_until) + work_s
            entry.busy_until = due
            self.seq += 1
            heapq.heappush(self.heap, (due, self.seq, job))
            if self.heap[0][2] is job:
                self.cond.notify()

    def run(self):
        with self.cond:
            while self.running:
                if not self.heap:
                    self.cond.wait()
                    continue
                wait = self.heap[0][0] - time.monotonic()
                if wait > 0:
                    self.cond.wait(wait)
                    continue
                job = heapq.heappop(self.heap)[2]
                self.cond.release()
                try:
                    self.finish(job)
                finally:
                    self.cond.acquire()

    @staticmethod
    def finish(job):
        if job.slot is not None:
            job.slot.complete(job.target)  # the GPU's flag store
        callback = job.callback
        job.done = True
        job.event.set()
        if callback is not None:
            callback()
        # A callback set after done was read is called by its setter.

    def stop(self):
        with self.cond:
            self.running = False
            self.cond.notify()
        self.thread.join()


class SimEntry:
    """One stream of the simulated device, with a slot in mode cuflag."""

    def __init__(self, device, work_s, slot, vocab=50257):
        self.device = device
        self.work_s = work_s
        self.slot = slot
        self.vocab = vocab
        self.busy_until = 0.0
        self.job = None
        self.n = 0

    def submit(self, n):
        self.n = n
        target = self.slot.arm() if self.slot is not None else None
        self.job = SimJob(self.slot, target)
        self.device.queue(self, self.job, self.work_s)

    def synchronize(self):
        self.job.event.wait()

    def record(self):
        pass  # the job is its own event

    def query(self):
        return self.job.done

    def on_done(self, callback):
        """callback() on the device's thread once the work is done."""
        job = self.job
        job.callback = callback
        if job.done and job.callback is not None:
            job.callback = None
            callback()  # it finished before the callback was set

    async def cuflag_wait(self, client):
        await self.slot.wait_async(self.job.target, spin_us=client.spin_us)

    def result(self):
        return (self.n * 2654435761) % self.vocab


# ---- the model on the GPU: a small GPT, one CUDA graph per stream ----

def gpt(torch, vocab, seq, d_model, heads, layers):
    """A GPT-style decoder with random weights, in bf16 on the GPU: returns
    forward(ids) -> the next token after ids (batch 1)."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.fc = nn.Linear(d_model, 4 * d_model)
            self.out = nn.Linear(4 * d_model, d_model)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d_model)
            self.wpe = nn.Embedding(seq, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d_model)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe.weight[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x[:, -1]) @ self.wte.weight.t()  # the tied head, last position
            return logits.argmax(-1)

    torch.manual_seed(0)
    return GPT().to("cuda", torch.bfloat16).eval()


class GpuEntry:
    """One stream of the pool: its graph of the model and its buffers."""

    def __init__(self, torch, model, seq, vocab, cuda):
        self.torch = torch
        self.cuda = cuda
        self.stream = torch.cuda.Stream()
        self.event = torch.cuda.Event()
        self.host_in = torch.empty((1, seq), dtype=torch.long, pin_memory=True)
        self.host_out = torch.zeros(1, dtype=torch.long, pin_memory=True)
        self.vocab = vocab
        self.ids = torch.randint(0, vocab, (1, seq), device="cuda")
        self.graph = torch.cuda.CUDAGraph()
        with torch.inference_mode():
            warm = torch.cuda.Stream()
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):
                for _ in range(2):
                    model(self.ids)
            torch.cuda.current_stream().wait_stream(warm)
            with torch.cuda.graph(self.graph):
                self.token = model(self.ids)
        torch.cuda.synchronize()
        self.callback = None

    def submit(self, n):
        """Queue request n: its prompt in, the model, the token out."""
        torch = self.torch
        # A prompt of the request's own: the previous one's work is done.
        self.host_in[0, 0] = n % self.vocab
        with torch.cuda.stream(self.stream):
            self.ids.copy_(self.host_in, non_blocking=True)
            self.graph.replay()
            self.host_out.copy_(self.token, non_blocking=True)

    def synchronize(self):
        self.stream.synchronize()

    def record(self):
        self.event.record(self.stream)

    def query(self):
        return self.event.query()

    def on_done(self, callback):
        self.callback = callback
        self.cuda.host_func(self.stream.cuda_stream, self.cuda_callback)

    def cuda_callback(self):
        self.callback()

    async def cuflag_wait(self, client):
        await client.synchronize_async(self.stream)

    def result(self):
        return int(self.host_out[0])


class HostFunc:
    """cuLaunchHostFunc through ctypes: PyTorch has no host callback."""

    FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, self.FN, ctypes.c_void_p]
        self.pending = {}
        self.next = 0
        self.lock = threading.Lock()
        self.trampoline = self.FN(self.called)  # kept: the driver calls it

    def host_func(self, stream, fn):
        with self.lock:
            self.next += 1
            key = self.next
            self.pending[key] = fn
        rc = self.lib.cuLaunchHostFunc(stream, self.trampoline, key)
        if rc != 0:
            with self.lock:
                self.pending.pop(key, None)
            raise OSError(f"cuLaunchHostFunc failed: CUresult {rc}")

    def called(self, key):
        with self.lock:
            fn = self.pending.pop(key)
        fn()


def gpu_pool(args):
    # The flag's store queued behind each stream's work holds one of the
    # driver's hardware queues (8 by default) until that work ends.
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    try:
        import torch
    except ImportError as e:
        sys.exit(f"http_serve.py: --device gpu needs PyTorch with CUDA ({e}); "
                 "--device sim runs without a GPU")
    if not torch.cuda.is_available():
        sys.exit("http_serve.py: PyTorch sees no CUDA device here; --device sim runs without a GPU")
    torch.backends.cuda.matmul.allow_tf32 = True
    model = gpt(torch, args.vocab, args.seq, args.d_model, args.heads, args.layers)
    cuda = HostFunc() if args.mode == "hostfunc" else None
    return [GpuEntry(torch, model, args.seq, args.vocab, cuda) for _ in range(args.streams)]


# ---- the ways to wait ----

def waiter(mode, client):
    """The coroutine function that waits for an entry's submitted work."""
    loop = asyncio.get_running_loop()
    if mode == "cuflag":
        return lambda entry: entry.cuflag_wait(client)
    if mode == "to_thread":
        return lambda entry: asyncio.to_thread(entry.synchronize)
    if mode == "poll":
        # serve.py's polling scheduler: one task that looks at every pending
        # request's query() and yields to the loop in between, for as long
        # as the server runs.
        from serve import Poller
        poller = Poller(None)

        async def poll(entry):
            entry.record()
            fut = loop.create_future()
            poller.pending.append((entry, fut))
            await fut
        poll.poller = poller  # stopped with the server
        return poll
    if mode == "block":
        async def block(entry):
            entry.synchronize()  # the whole loop waits
        return block

    async def hostfunc(entry):
        fut = loop.create_future()
        entry.on_done(lambda: loop.call_soon_threadsafe(fut.set_result, None))
        await fut
    return hostfunc


# ---- the server ----

class Stats:
    def __init__(self):
        self.started = 0
        self.answered = 0
        self.inflight = 0
        self.signalled = 0  # --device sim, mode cuflag: completions cuflagd signalled


async def serve(args, ready):
    from aiohttp import web
    import cuflag

    device = None
    if args.device == "gpu":
        entries = gpu_pool(args)  # first: without PyTorch, say so before connecting
    client = cuflag.Client(args.socket) if args.mode == "cuflag" else None
    if args.device == "sim":
        device = SimDevice()
        slots = client.acquire_many(args.streams) if client is not None else [None] * args.streams
        entries = [SimEntry(device, args.work_us * 1e-6, s) for s in slots]
    pool = asyncio.Queue()
    for e in entries:
        pool.put_nowait(e)
    wait = waiter(args.mode, client)
    stats = Stats()

    async def infer(request):
        stats.started += 1
        stats.inflight += 1
        n = stats.started
        entry = await pool.get()
        try:
            entry.submit(n)
            await wait(entry)
            token = entry.result()
        finally:
            pool.put_nowait(entry)
            stats.inflight -= 1
        stats.answered += 1
        return web.Response(text=f"token {token}\n")

    async def report(request):
        body = {"device": args.device, "mode": args.mode, "loop": args.loop,
                "pid": os.getpid(), "started": stats.started, "answered": stats.answered,
                "inflight": stats.inflight, "streams": len(entries)}
        if args.device == "sim" and client is not None:
            # Every completion cuflagd signalled, from the slots' eventfd
            # counters: one per request, none lost or doubled.
            stats.signalled += sum(e.slot.consume() for e in entries)
            body["signalled"] = stats.signalled
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/", infer)
    app.router.add_get("/stats", report)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=4096, reuse_address=True)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready(port)
    await stop.wait()
    await runner.cleanup()
    poller = getattr(wait, "poller", None)
    if poller is not None:
        await poller.stop()
    if device is not None:
        device.stop()
    print(f"http_serve.py: stopped: {stats.answered} of {stats.started} requests answered",
          flush=True)
    if client is not None:
        client.close()


def run(args):
    def ready(port):
        print(f"http_serve.py: listening on http://{args.host}:{port}/ (device {args.device}, "
              f"mode {args.mode}, loop {args.loop}, {args.streams} streams, pid {os.getpid()})",
              flush=True)

    if args.loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            sys.exit("http_serve.py: --loop uvloop needs uvloop (python3-uvloop, or pip install uvloop)")
        factory = uvloop.new_event_loop
    else:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args, ready))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=DEVICES, default="gpu")
    ap.add_argument("--mode", choices=MODES, default="cuflag")
    ap.add_argument("--loop", choices=LOOPS, default="asyncio")
    ap.add_argument("--port", type=int, default=8080, help="0: any free port (printed)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--socket", default=os.environ.get("CUFLAG_SOCKET"),
                    help="cuflagd's socket (default: $CUFLAG_SOCKET, else cuflagd's own)")
    ap.add_argument("--streams", type=int, default=16, help="CUDA streams in the pool")
    ap.add_argument("--work-us", type=float, default=200.0,
                    help="--device sim: the work of a request, in microseconds")
    ap.add_argument("--layers", type=int, default=12, help="the model's blocks")
    ap.add_argument("--d-model", type=int, default=2048, help="the model's width")
    ap.add_argument("--heads", type=int, default=16, help="attention heads")
    ap.add_argument("--seq", type=int, default=512, help="the prompt's tokens")
    ap.add_argument("--vocab", type=int, default=32000, help="the vocabulary")
    args = ap.parse_args()
    if args.streams < 1:
        ap.error("--streams must be at least 1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
