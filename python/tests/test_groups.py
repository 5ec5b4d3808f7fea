# SPDX-License-Identifier: MIT
"""Groups: 1000 slots completing in shuffled order, counted exactly through
drain() and through ``async for`` (several coroutines at once, with awaits
of single slots beside them), with a ring so small that it overflows, and
misuse."""

import asyncio
import collections
import errno
import gc
import random
import selectors
import threading
import unittest

from daemon import DaemonTestCase
from test_asyncio import complete_later
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too

SLOTS = 1000
ROUNDS = 3
TIMEOUT_S = 10


def complete_shuffled(slots, rounds, seed):
    """The simulated device: a thread that, each round, arms every slot and
    stores the values in a random order. Returns the thread, started."""
    def device():
        for r in range(rounds):
            complete_later([(s, s.arm()) for s in slots], seed + r).join()

    thread = threading.Thread(target=device)
    thread.start()
    return thread


def drain_until(group, total, max=64):
    """Counts per slot from drain(), waiting on the group's fd, until
    total; then a quiet fd and an empty drain."""
    counts = collections.Counter()
    with selectors.DefaultSelector() as sel:
        sel.register(group, selectors.EVENT_READ)
        while sum(counts.values()) < total:
            if not sel.select(TIMEOUT_S):
                raise AssertionError(f"nothing for {TIMEOUT_S} s: "
                                     f"{sum(counts.values())} of {total}")
            records = group.drain(max=max)
            assert len(records) <= max
            for slot, n in records:
                assert n > 0
                counts[slot] += n
        if sel.select(0.05):
            assert group.drain() == []
    assert group.drain() == []
    return counts


async def first(group):
    """The group's next record."""
    async for record in group:
        return record


class GroupTestBase(DaemonTestCase):
    def check_drain(self):
        with self.client.group() as group:
            slots = group.acquire(SLOTS)
            device = complete_shuffled(slots, ROUNDS, seed=1)
            counts = drain_until(group, SLOTS * ROUNDS)
            device.join()
            self.assertEqual(counts, {s: ROUNDS for s in slots})

    def check_async_for(self, iterators=4):
        """Several coroutines iterate one group while others await single
        slots of it; every completion is counted once, by one of them."""
        with self.client.group() as group:
            slots = group.acquire(SLOTS)
            awaited = group.acquire(4)
            counts = collections.Counter()
            per_iterator = [0] * iterators
            counted = 0  # of the completions of slots (not of awaited)

            async def count(k):
                nonlocal counted
                async for slot, n in group:
                    self.assertGreater(n, 0)
                    counts[slot] += n
                    per_iterator[k] += n
                    if slot not in awaited:
                        counted += n
                    await asyncio.sleep(0)  # work: the other iterators take some

            async def await_own(slot):
                loop = asyncio.get_running_loop()
                for _ in range(20):
                    target = slot.arm()
                    loop.call_later(random.uniform(0, 2e-3), slot.store, target)
                    await slot.wait_async(target)
                return slot.consume()

            async def main():
                counters = [asyncio.create_task(count(k)) for k in range(iterators)]
                device = complete_shuffled(slots, ROUNDS, seed=2)
                async with within(TIMEOUT_S):
                    own = await asyncio.gather(*(await_own(s) for s in awaited))
                    while counted < SLOTS * ROUNDS:
                        await asyncio.sleep(0.005)
                await asyncio.to_thread(device.join)
                await asyncio.sleep(0.05)  # nothing more comes
                for task in counters:
                    task.cancel()
                await asyncio.gather(*counters, return_exceptions=True)
                await asyncio.sleep(0)  # the reader's idle check
                # The awaited slots' counts went to their consume() or to an
                # iterator, once either way.
                return own

            own = asyncio.run(main())
            for slot, mine in zip(awaited, own):
                self.assertEqual(mine + counts.pop(slot, 0) + slot.consume(), 20)
            self.assertEqual(counts, {s: ROUNDS for s in slots})
            self.assertEqual(group.drain(), [])
            self.assertIsNone(group._watch)  # the reader went with the awaits
            return per_iterator


class GroupTest(GroupTestBase):
    def test_drain_shuffled(self):
        self.check_drain()

    def test_async_for_timeout(self):
        """completions(timeout) hands out what comes and raises TimeoutError
        once that long passes with nothing; the group works on."""
        with self.client.group() as group:
            slot = group.acquire()
            for bad in (-1, float("nan")):
                with self.assertRaises(ValueError):
                    group.completions(timeout=bad)

            async def main():
                loop = asyncio.get_running_loop()
                target = slot.arm()
                loop.call_later(0.01, slot.store, target)
                got = []
                started = None
                with self.assertRaises(TimeoutError):
                    async for record in group.completions(timeout=0.1):
                        got.append(record)
                        started = loop.time()
                self.assertEqual(got, [(slot, 1)])
                self.assertGreaterEqual(loop.time() - started, 0.09)
                target = slot.arm()
                loop.call_later(0.01, slot.store, target)
                async with within(TIMEOUT_S):
                    self.assertEqual(await first(group), (slot, 1))

            asyncio.run(main())

    def test_async_for_several_coroutines(self):
        per_iterator = self.check_async_for()
        print(f"records per iterator: {per_iterator}")

    def test_drain_max_and_merge(self):
        """drain(max) hands out at most max records, a slot at most once,
        and leaves the fd readable while more wait; slot.consume() and
        slot.wait() on a grouped slot count once with drain()."""
        with self.client.group() as group:
            slots = group.acquire(10)
            for s in slots:
                target = s.arm()
                s.store(target)
                s.wait(target, timeout=TIMEOUT_S)
            # Each wait on the fd must find it readable while records wait.
            self.assertEqual(drain_until(group, 10, max=3), {s: 1 for s in slots})
            # consume() takes a slot's count; drain() then has none of it.
            target = slots[4].arm()
            slots[4].store(target)
            slots[4].wait(target, timeout=TIMEOUT_S)
            with selectors.DefaultSelector() as sel:
                sel.register(group, selectors.EVENT_READ)
                self.assertTrue(sel.select(TIMEOUT_S))
            self.assertEqual(slots[4].consume(), 1)
            self.assertEqual(group.drain(), [])
            self.assertEqual(slots[4].consume(), 0)

            # Counts that an await read off the fd come out of drain() once,
            # with the fd readable for them once the loop stops watching.
            async def await_one():
                loop = asyncio.get_running_loop()
                target = slots[0].arm()
                for s in slots[1:]:
                    s.store(s.arm())
                loop.call_later(0.02, slots[0].store, target)
                async with within(TIMEOUT_S):
                    await slots[0].wait_async(target)

            asyncio.run(await_one())
            self.assertEqual(drain_until(group, 10), {s: 1 for s in slots})

    def test_slot_completions_of_grouped_slot(self):
        """Slot.completions() works on a slot of a group, beside the
        group's own iteration."""
        with self.client.group() as group:
            mine, other = group.acquire(2)

            async def main():
                loop = asyncio.get_running_loop()
                for _ in range(30):
                    loop.call_soon(mine.store, mine.arm())
                    loop.call_soon(other.store, other.arm())
                got = 0
                async with within(TIMEOUT_S):
                    async for n in mine.completions():
                        got += n
                        if got == 30:
                            break
                    rest = 0
                    async for slot, n in group:
                        self.assertIs(slot, other)
                        rest += n
                        if rest == 30:
                            break
                return got

            self.assertEqual(asyncio.run(main()), 30)
            self.assertEqual(group.drain(), [])

    def test_misuse(self):
        group = self.client.group()
        slot = group.acquire()
        self.assertIs(slot.group, group)
        self.assertIsNone(self.client.acquire().group)
        for get in (lambda: slot.fd, slot.fileno):
            with self.assertRaises(OSError) as e:
                get()
            self.assertEqual(e.exception.errno, errno.EOPNOTSUPP)
        with self.assertRaises(ValueError):
            group.drain(max=0)
        with self.assertRaises(ValueError):
            group.acquire(0)
        with self.assertRaises(OSError) as e:
            slot.wait(slot.arm() + 5, timeout=0)
        self.assertEqual(e.exception.errno, errno.EINVAL)

        # A released slot wakes its await with ValueError; the group goes on.
        async def released_while_waiting():
            task = asyncio.create_task(slot.wait_async(slot.arm()))
            await asyncio.sleep(0)
            slot.release()
            await task

        with self.assertRaises(ValueError):
            asyncio.run(released_while_waiting())
        with self.assertRaises(ValueError):
            slot.arm()

        # One loop at a time watches a group.
        other = group.acquire()

        async def in_two_loops():
            task = asyncio.create_task(other.wait_async(other.arm()))
            await asyncio.sleep(0)
            try:
                await asyncio.to_thread(asyncio.run, first(group))
            finally:
                task.cancel()

        with self.assertRaises(RuntimeError):
            asyncio.run(in_two_loops())

        # Closing the group: its slots and its iteration learn it.
        async def closed_while_iterating():
            task = asyncio.create_task(first(group))
            await asyncio.sleep(0)
            group.close()
            await task

        with self.assertRaises(ValueError):
            asyncio.run(closed_while_iterating())
        self.assertTrue(group.closed)
        for use in (lambda: group.fd, group.drain, group.acquire, other.arm):
            with self.assertRaises(ValueError):
                use()
        group.close()  # twice is harmless
        other.release()

        # As many groups as the daemon allows (--groups-per-client 8).
        groups = [self.client.group() for _ in range(8)]
        with self.assertRaises(OSError) as e:
            self.client.group()
        self.assertEqual(e.exception.errno, errno.ENOSPC)
        for g in groups:
            g.close()

        # Closing the client closes its groups and their slots.
        group = self.client.group()
        slot = group.acquire()
        self.client.close()
        self.assertTrue(group.closed)
        for use in (group.drain, slot.arm):
            with self.assertRaises(ValueError):
                use()

    def test_collected_group_releases_its_slots(self):
        """A group dropped unclosed is released with its slots: the client
        can take as many again (--slots-per-client 1024)."""
        group = self.client.group()
        slots = group.acquire(SLOTS)
        del group, slots
        gc.collect()
        with self.client.group() as group:
            self.assertEqual(len(group.acquire(SLOTS)), SLOTS)


class GroupOverflowTest(GroupTestBase):
    """A ring of 16 records for 1000 slots completing at once: it
    overflows, and nothing is lost or counted twice."""

    daemon_args = ("--group-ring", "16")

    def test_drain_overflow(self):
        self.check_drain()

    def test_async_for_overflow(self):
        self.check_async_for(iterators=2)

    def test_drain_past_the_ring(self):
        """All complete before the first drain: one drain hands out more
        records than the ring holds (the re-scan after its overflow)."""
        with self.client.group() as group:
            slots = group.acquire(SLOTS)
            for s in slots:
                s.store(s.arm())
            counts = collections.Counter()
            biggest = 0
            with selectors.DefaultSelector() as sel:
                sel.register(group, selectors.EVENT_READ)
                while sum(counts.values()) < SLOTS:
                    self.assertTrue(sel.select(TIMEOUT_S))
                    records = group.drain(max=SLOTS)
                    biggest = max(biggest, len(records))
                    counts.update({slot: n for slot, n in records})
            self.assertEqual(counts, {s: 1 for s in slots})
            self.assertGreater(biggest, 16)
            self.assertEqual(group.drain(), [])


if __name__ == "__main__":
    unittest.main()
