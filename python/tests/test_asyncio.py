# SPDX-License-Identifier: MIT
"""Waiting in an asyncio loop: many slots completed by another thread in
random order, exact counts, several waiters on one slot, cancellation."""

import asyncio
import errno
import gc
import random
import threading
import time
import unittest

from daemon import DaemonTestCase
from cuflag import aio
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too

TIMEOUT_S = 10


def complete_later(pairs, seed):
    """The simulated device: a thread that stores each (slot, target) in a
    random order, sometimes letting the waiters run in between."""
    order = list(pairs)
    rng = random.Random(seed)
    rng.shuffle(order)

    def device():
        for slot, target in order:
            slot.store(target)
            if rng.random() < 0.1:
                threading.Event().wait(0.001)

    thread = threading.Thread(target=device)
    thread.start()
    return thread


async def count_until(slot, expected):
    """Sum the slot's completions until expected; then none may follow."""
    total = 0
    async with within(TIMEOUT_S):
        async for n in slot.completions():
            total += n
            if total >= expected:
                break
    await asyncio.sleep(0.02)
    return total + slot.consume()


class AsyncioTest(DaemonTestCase):
    def test_hundred_slots_random_order(self):
        slots = self.client.acquire_many(100)
        targets = [s.arm() for s in slots]

        async def main():
            device = complete_later(zip(slots, targets), seed=1)
            async with within(TIMEOUT_S):
                await asyncio.gather(*(s.wait_async(t) for s, t in zip(slots, targets)))
            await asyncio.to_thread(device.join)
            counts = await asyncio.gather(*(count_until(s, 1) for s in slots))
            self.assertEqual(counts, [1] * 100)
            # Every reader is gone once nobody awaits.
            self.assertTrue(all(s._watch is None for s in slots))

        asyncio.run(main())
        for s in slots:
            s.release()

    def test_completions_exact(self):
        """Completions that land faster than the loop looks are counted
        together, never lost or doubled."""
        with self.client.acquire() as slot:
            targets = [slot.arm() for _ in range(200)]

            def device():
                # In order, as a stream's writes are, sometimes several at once.
                rng = random.Random(2)
                for t in targets:
                    if t == targets[-1] or rng.random() < 0.5:
                        slot.store(t)

            async def main():
                thread = threading.Thread(target=device)
                thread.start()
                total = await count_until(slot, 200)
                await asyncio.to_thread(thread.join)
                return total

            self.assertEqual(asyncio.run(main()), 200)

    def test_in_order_one_by_one(self):
        with self.client.acquire() as slot:

            async def main():
                for _ in range(50):
                    target = slot.arm()
                    asyncio.get_running_loop().call_later(0.001, slot.store, target)
                    async with within(TIMEOUT_S):
                        await slot.wait_async(target)
                return await count_until(slot, 50)

            self.assertEqual(asyncio.run(main()), 50)

    def test_fast_path(self):
        """A value already landed needs no reader."""
        with self.client.acquire() as slot:
            target = slot.arm()
            slot.store(target)

            async def main():
                await slot.wait_async(target)
                self.assertIsNone(slot._watch)

            asyncio.run(main())

    def test_two_waiters_one_slot(self):
        with self.client.acquire() as slot:
            first, second = slot.arm(), slot.arm()

            async def main():
                waits = [asyncio.create_task(slot.wait_async(t)) for t in (first, second)]
                await asyncio.sleep(0)
                slot.store(first)
                async with within(TIMEOUT_S):
                    await waits[0]
                self.assertFalse(waits[1].done())
                slot.store(second)
                async with within(TIMEOUT_S):
                    await waits[1]
                return await count_until(slot, 2)

            self.assertEqual(asyncio.run(main()), 2)

    def test_cancel(self):
        with self.client.acquire() as slot:
            target = slot.arm()

            async def main():
                with self.assertRaises(TimeoutError):
                    async with within(0.05):
                        await slot.wait_async(target)
                await asyncio.sleep(0)
                self.assertIsNone(slot._watch)
                self.assertEqual(self.client._dispatchers, {})
                # The slot still works after the abandoned wait.
                slot.store(target)
                await slot.wait_async(target)
                return await count_until(slot, 1)

            self.assertEqual(asyncio.run(main()), 1)

    def test_errors(self):
        with self.client.acquire() as slot:
            target = slot.arm()

            async def never_armed():
                await slot.wait_async(target + 5)

            with self.assertRaises(OSError) as e:
                asyncio.run(never_armed())
            self.assertEqual(e.exception.errno, errno.EINVAL)

            async def released_while_waiting():
                task = asyncio.create_task(slot.wait_async(target))
                await asyncio.sleep(0)
                slot.release()
                await task

            with self.assertRaises(ValueError):
                asyncio.run(released_while_waiting())


if __name__ == "__main__":
    unittest.main()



class SpinBudgetTest(DaemonTestCase):
    """An await spins its budget by the clock, not the loop's: uvloop's
    loop.time() moves in whole milliseconds, and a 50 us budget timed by it
    held the loop for up to a millisecond (941 us measured)."""

    def setUp(self):
        try:
            import uvloop
            uvloop.new_event_loop().close()  # uvloop's first loop keeps 2 fds for good
            gc.collect()
        except ImportError:
            pass
        super().setUp()

    def median_spin_s(self, new_loop):
        slot = self.client.acquire()
        self.addCleanup(slot.release)
        target = slot.arm()

        async def spins():
            spans = []
            for _ in range(21):
                t0 = time.monotonic()
                self.assertFalse(aio.spin(slot, target, 50))  # nothing lands
                spans.append(time.monotonic() - t0)
            return sorted(spans)[len(spans) // 2]

        loop = new_loop()
        try:
            return loop.run_until_complete(spins())
        finally:
            loop.close()
            del loop
            gc.collect()  # uvloop's fds go with the loop object
            slot.complete(target)

    def test_asyncio(self):
        self.assertLess(self.median_spin_s(asyncio.new_event_loop), 0.0004)

    def test_uvloop(self):
        try:
            import uvloop
        except ImportError:
            self.skipTest("no uvloop here")
        self.assertLess(self.median_spin_s(uvloop.new_event_loop), 0.0004)
