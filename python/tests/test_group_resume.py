# SPDX-License-Identifier: MIT
"""Groups across daemon restarts, with no restart code in the program:
coroutines iterate a group (``async for``) and one awaits a grouped slot
while threads arm and complete its slots in shuffled order, through SIGTERM
and SIGKILL restarts; and a thread that polls the group's fd and drains,
through a SIGKILL with completions landing while no daemon runs. Every
completion must be counted exactly once."""

import asyncio
import collections
import random
import selectors
import threading
import time
import unittest

from daemon import RestartTestCase
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too

SLOTS = 64
ARMING_THREADS = 2
ITERATORS = 2
RUN_S = 0.3  # between restarts
SETTLE_S = RestartTestCase.SETTLE_S


class GroupResumeTest(RestartTestCase):

    def test_async_for_restarts(self):
        group = self.client.group()
        self.addCleanup(group.close)
        slots = group.acquire(SLOTS)
        awaited = group.acquire()
        done = collections.Counter()  # completed (counted before the store)
        counted = collections.Counter()
        errors = []
        stop = threading.Event()

        def arming(seed):
            rng = random.Random(seed)
            mine = slots[seed::ARMING_THREADS]
            try:
                while not stop.is_set():
                    pairs = [(s, s.arm()) for s in rng.sample(mine, 8)]
                    rng.shuffle(pairs)
                    time.sleep(rng.uniform(200e-6, 600e-6))
                    for slot, target in pairs:
                        done[slot] += 1
                        slot.store(target)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
                stop.set()

        async def count():
            async for slot, n in group:
                counted[slot] += n
                if counted[slot] > done[slot]:
                    errors.append(AssertionError(f"slot {slot.id}: {counted[slot]} "
                                                 f"counted, {done[slot]} completed"))
                await asyncio.sleep(0)  # let the other iterators have some

        def complete_awaited(target):
            done[awaited] += 1
            awaited.store(target)

        async def await_own():
            loop = asyncio.get_running_loop()
            n = 0
            while not stop.is_set():
                target = awaited.arm()
                loop.call_later(random.uniform(0, 1e-3), complete_awaited, target)
                await awaited.wait_async(target)
                n += 1
            return n

        async def main():
            counters = [asyncio.create_task(count()) for _ in range(ITERATORS)]
            waiter = asyncio.create_task(await_own())
            threads = [threading.Thread(target=arming, args=(k,))
                       for k in range(ARMING_THREADS)]
            for t in threads:
                t.start()
            try:
                epochs = await self.restarts(lambda: sum(counted.values()), RUN_S)
            finally:
                stop.set()
                await asyncio.to_thread(lambda: [t.join() for t in threads])
            async with within(SETTLE_S):
                awaited_n = await waiter
                while counted != done:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # nothing more comes
            self.assertEqual(counted, done)
            self.assertEqual(errors, [])
            self.assertGreater(awaited_n, 0)
            self.assertEqual(len(set(epochs)), 5)
            for task in counters:
                task.cancel()
            await asyncio.gather(*counters, return_exceptions=True)
            print(f"{sum(done.values())} completions of {SLOTS + 1} grouped slots counted "
                  f"exactly once across 4 restarts; {awaited_n} awaited")

        asyncio.run(main())

    def test_drain_across_kill(self):
        """A program that only polls the group's fd and drains: the drain
        that finds nothing resumes the client, and what landed while no
        daemon ran is drained once."""
        group = self.client.group()
        self.addCleanup(group.close)
        slots = group.acquire(300)
        targets = [s.arm() for s in slots]
        order = list(zip(slots, targets))
        random.Random(3).shuffle(order)
        for slot, target in order[:150]:
            slot.store(target)
        self.restart_with(lambda: [s.store(t) for s, t in order[150:]])
        counts = collections.Counter()
        deadline = time.monotonic() + SETTLE_S
        with selectors.DefaultSelector() as sel:
            sel.register(group, selectors.EVENT_READ)
            while sum(counts.values()) < 300 and time.monotonic() < deadline:
                sel.select(0.05)  # no signal comes while no daemon runs
                for slot, n in group.drain(max=100):
                    counts[slot] += n
        time.sleep(0.05)
        for slot, n in group.drain():
            counts[slot] += n
        self.assertEqual(counts, {s: 1 for s in slots})

    def restart_with(self, meanwhile):
        """A SIGKILL restart; meanwhile() runs while no daemon does."""
        self.daemon.kill(keep_dir=True)
        meanwhile()
        self.daemon = type(self.daemon)(directory=self.daemon.dir)


if __name__ == "__main__":
    unittest.main()
