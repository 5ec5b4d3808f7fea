#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuflag from Python without a GPU: a thread stands in for the device.

A slot is a timeline: arm() reserves its next value, whoever does the work
stores that value into the slot's flag when it is done (on a GPU,
Slot.signal(stream) enqueues that store on the stream), and cuflagd wakes
whoever waits for it: a blocking wait(), an asyncio wait_async(), or an
event loop polling the slot's fd.

    python3 quickstart.py     # the node's cuflagd, else this user's own
    CUFLAG_SOCKET=/tmp/cuflag.sock python3 quickstart.py
"""
import asyncio
import threading
import time

import cuflag


def device(slot, target, delay_s):
    """The simulated device: finish some work, then store the flag (what the
    GPU's cuStreamWriteValue32 after a kernel does)."""
    time.sleep(delay_s)
    slot.complete(target)


def blocking(client):
    with client.acquire() as slot:
        target = slot.arm()
        threading.Thread(target=device, args=(slot, target, 0.01)).start()
        t0 = time.perf_counter()
        slot.wait(target, timeout=5)
        print(f"wait:       slot {slot.id} reached {target} "
              f"after {(time.perf_counter() - t0) * 1e3:.1f} ms")


async def many_at_once(client, n):
    """n requests in flight on one event loop, each awaiting its own slot."""
    slots = client.acquire_many(n)

    async def request(slot, i):
        target = slot.arm()
        threading.Thread(target=device, args=(slot, target, 0.001 * i)).start()
        await slot.wait_async(target)

    t0 = time.perf_counter()
    await asyncio.gather(*(request(s, i) for i, s in enumerate(slots)))
    print(f"wait_async: {n} slots completed, all awaited on one loop "
          f"in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    for s in slots:
        s.release()


def main():
    # $CUFLAG_SOCKET, else the node's cuflagd, else this user's own (started on demand)
    with cuflag.Client() as client:
        blocking(client)
        asyncio.run(many_at_once(client, 16))
    print("quickstart: ok")


if __name__ == "__main__":
    main()
