# SPDX-License-Identifier: MIT
"""An asyncio program with no restart code in it: coroutines count every
slot's completions with completions(), one awaits its own arms with
wait_async(), threads arm and complete (the simulated device) every
200-600 us; the daemon is restarted under it with SIGTERM and SIGKILL,
twice each. Every completion must be counted exactly once, and the loop
must see each restart (it resumes, then watches the new connection)."""

import asyncio
import random
import threading
import time
import unittest

from daemon import RestartTestCase
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too

SLOTS = 8
ARMING_THREADS = 2
RUN_S = 0.3  # between restarts
SETTLE_S = RestartTestCase.SETTLE_S


class ResumeSoakTest(RestartTestCase):

    def test_restarts(self):
        slots = self.client.acquire_many(SLOTS + 1)
        counted_slots, awaited = slots[:SLOTS], slots[SLOTS]
        done = [0] * SLOTS  # completed (counted before the store)
        counted = [0] * SLOTS
        awaited_done = 0
        errors = []
        stop = threading.Event()

        def arming(mine, seed):
            rng = random.Random(seed)
            try:
                while not stop.is_set():
                    for i in mine:
                        target = counted_slots[i].arm()
                        time.sleep(rng.uniform(200e-6, 600e-6))
                        done[i] += 1
                        counted_slots[i].store(target)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
                stop.set()

        async def count(i):
            async for n in counted_slots[i].completions():
                counted[i] += n
                if counted[i] > done[i]:
                    errors.append(AssertionError(f"slot {i}: {counted[i]} counted, "
                                                 f"{done[i]} completed"))

        async def await_own():
            nonlocal awaited_done
            loop = asyncio.get_running_loop()
            while not stop.is_set():
                target = awaited.arm()
                loop.call_later(random.uniform(0, 1e-3), awaited.store, target)
                await awaited.wait_async(target)
                awaited_done += 1

        async def main():
            loop = asyncio.get_running_loop()
            counters = [asyncio.create_task(count(i)) for i in range(SLOTS)]
            waiter = asyncio.create_task(await_own())
            threads = [threading.Thread(target=arming, args=(range(k, SLOTS, ARMING_THREADS), k))
                       for k in range(ARMING_THREADS)]
            for t in threads:
                t.start()
            try:
                epochs = await self.restarts(lambda: sum(counted), RUN_S)
            finally:
                stop.set()
                await asyncio.to_thread(lambda: [t.join() for t in threads])
            self.assertEqual(errors, [])
            # Every completion, exactly once.
            async with within(SETTLE_S):
                while counted != done:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # nothing more comes
            self.assertEqual(counted, done)
            self.assertEqual(errors, [])
            async with within(SETTLE_S):
                await waiter
            self.assertGreater(awaited_done, 0)
            self.assertEqual(len(set(epochs)), 5)
            watch = self.client._dispatchers[loop]
            self.assertEqual(watch.state, 0)
            for task in counters:
                task.cancel()
            print(f"{sum(done)} completions counted exactly once across 4 restarts; "
                  f"{awaited_done} awaited")

        asyncio.run(main())
        for slot in slots:
            slot.release()


if __name__ == "__main__":
    unittest.main()
