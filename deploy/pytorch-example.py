#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch work awaited through cuflagd from an asyncio loop, in a pod.

Two CUDA streams each run a series of matrix products; one coroutine per
stream awaits its stream's work with Client.synchronize_async(), so no
thread blocks or spins in the driver while the GPU works: cuflagd's scanner
sees each stream's flag store and wakes the loop through an eventfd.

The socket is $CUFLAG_SOCKET, else /run/cuflagd/cuflagd.sock (the hostPath
directory of the DaemonSet, mounted into the pod).
"""

import asyncio
import os
import time

import torch

import cuflag


async def work(client, name, rounds, n):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        a = torch.randn(n, n, device="cuda")
    took = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with torch.cuda.stream(stream):
            b = a @ a
            a = b / b.norm()
        await client.synchronize_async(stream)
        took.append(time.perf_counter() - t0)
    took.sort()
    print(f"{name}: {rounds} rounds of {n}x{n} products, median {took[len(took) // 2] * 1e3:.2f} ms "
          f"each, awaited through cuflagd", flush=True)


async def main():
    print(f"pid {os.getpid()} uid {os.getuid()}: connecting to "
          f"{os.environ.get('CUFLAG_SOCKET', '/run/cuflagd/cuflagd.sock')}", flush=True)
    with cuflag.Client() as client:
        await asyncio.gather(work(client, "stream 1", 200, 2048),
                             work(client, "stream 2", 200, 1024))


if __name__ == "__main__":
    asyncio.run(main())
