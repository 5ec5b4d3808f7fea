# SPDX-License-Identifier: MIT
"""The blocking API through the real daemon on the simulated device:
arm, store, wait, consume; several slots; closing."""

import select
import threading
import unittest

import cuflag
from daemon import DaemonTestCase


def consume_blocking(slot, timeout=2.0):
    """Completions once the eventfd becomes readable."""
    readable, _, _ = select.select([slot], [], [], timeout)
    assert readable, "no completion signalled"
    return slot.consume()


def count_until(slot, expected):
    """Sum completions until expected. The daemon may signal one batch in
    several writes (a store can land before it has read every arm), so only
    the sum is exact."""
    got = 0
    while got < expected:
        got += consume_blocking(slot)
    return got


def assert_quiet(test, slot, timeout=0.02):
    readable, _, _ = select.select([slot], [], [], timeout)
    test.assertEqual(readable, [])
    test.assertEqual(slot.consume(), 0)


class BasicTest(DaemonTestCase):
    def test_connect(self):
        self.assertNotEqual(self.client.epoch, 0)
        self.assertRegex(cuflag.library_version(), r"^\d+\.\d+\.\d+$")

    def test_one_completion(self):
        with self.client.acquire() as slot:
            self.assertGreaterEqual(slot.fd, 0)
            self.assertGreaterEqual(slot.id, 0)
            target = slot.arm()
            self.assertFalse(slot.reached(target))
            with self.assertRaises(TimeoutError):
                slot.wait(target, timeout=0)
            slot.store(target)
            self.assertEqual(slot.flag, target)
            slot.wait(target, timeout=2)
            self.assertEqual(consume_blocking(slot), 1)
            assert_quiet(self, slot)

    def test_many_in_flight(self):
        with self.client.acquire() as slot:
            targets = [slot.arm() for _ in range(10)]
            self.assertEqual(targets, list(range(targets[0], targets[0] + 10)))
            # Three land, then the rest: the counter says how many.
            slot.store(targets[2])
            slot.wait(targets[2], timeout=2)
            self.assertEqual(count_until(slot, 3), 3)
            slot.store(targets[9])
            slot.wait(targets[9], timeout=2)
            self.assertEqual(count_until(slot, 7), 7)
            assert_quiet(self, slot)

    def test_wait_from_another_thread(self):
        """A blocking wait lets the thread that completes the work run."""
        with self.client.acquire() as slot:
            target = slot.arm()
            # The delay only makes the wait likely to sleep before the
            # store; the test is correct either way.
            thread = threading.Timer(0.05, slot.store, [target])
            thread.start()
            slot.wait(target, timeout=5)
            thread.join()
            self.assertEqual(consume_blocking(slot), 1)

    def test_independent_slots(self):
        slots = self.client.acquire_many(20)
        targets = [s.arm() for s in slots]
        for s, t in zip(slots[::2], targets[::2]):
            s.store(t)
        for s in slots[::2]:
            self.assertEqual(consume_blocking(s), 1)
        for s in slots[1::2]:
            self.assertEqual(s.consume(), 0)
        for s in slots:
            s.release()

    def test_close_releases_slots(self):
        client = cuflag.Client(self.daemon.socket)
        slots = client.acquire_many(3)
        client.close()
        client.close()
        self.assertTrue(client.closed)
        for s in slots:
            self.assertTrue(s.released)
            with self.assertRaises(ValueError):
                s.arm()
        with self.assertRaises(ValueError):
            client.acquire()

    def test_garbage_collected(self):
        """Slots and clients dropped without release free their fds."""
        client = cuflag.Client(self.daemon.socket)
        client.acquire_many(4)
        slot = client.acquire()
        del slot
        del client


if __name__ == "__main__":
    unittest.main()
