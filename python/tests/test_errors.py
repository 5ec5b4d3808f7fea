# SPDX-License-Identifier: MIT
"""Errors: negative errno from the library as OSError, misuse as
ValueError, and the daemon's limits."""

import errno
import os
import subprocess
import sys
import time
import unittest

import cuflag
from daemon import DaemonTestCase


class ErrorTest(DaemonTestCase):
    daemon_args = ("--slots-per-client", "4")

    def test_no_daemon(self):
        with self.assertRaises(OSError) as e:
            cuflag.Client(os.path.join(self.daemon.dir, "absent.sock"))
        self.assertEqual(e.exception.errno, errno.ENOENT)
        self.assertIsInstance(e.exception, FileNotFoundError)

    def test_wait_timeout(self):
        with self.client.acquire() as slot:
            target = slot.arm()
            start = time.monotonic()
            with self.assertRaises(TimeoutError) as e:
                slot.wait(target, timeout=0.05)
            self.assertGreaterEqual(time.monotonic() - start, 0.05)
            self.assertEqual(e.exception.errno, errno.ETIMEDOUT)
            with self.assertRaises(TimeoutError):
                slot.wait(target, timeout=0)
            with self.assertRaises(ValueError):
                slot.wait(target, timeout=-1)

    def test_never_armed(self):
        with self.client.acquire() as slot:
            target = slot.arm()
            with self.assertRaises(OSError) as e:
                slot.wait(target + 5, timeout=1)
            self.assertEqual(e.exception.errno, errno.EINVAL)

    def test_never_armed_as_in_c(self):
        """The values a wait may name, as tests/test-basic.c's never_armed
        asks the C library: the start (0 on a fresh slot, 2^30 past the
        last armed value on a slot handed out again) up to the last armed;
        anything else is EINVAL at once, in wait() and reached() alike."""
        def einval(call, *args):
            with self.assertRaises(OSError) as e:
                call(*args)
            self.assertEqual(e.exception.errno, errno.EINVAL)

        slots = self.client.acquire_many(4)
        start = slots[0].flag
        self.assertEqual(start, 0)
        slots[0].wait(start, timeout=0)
        for target in (start + 1, (start - 1) & 0xFFFFFFFF, 5):
            einval(slots[0].wait, target, 0)
            einval(slots[0].reached, target)
        last = {}
        for i, slot in enumerate(slots):
            for _ in range(i + 1):
                last[slot.id] = slot.arm()
            slot.store(last[slot.id])
            slot.wait(last[slot.id], timeout=2)
        self.assertTrue(slots[0].reached(last[slots[0].id] - 1))
        for slot in slots:
            slot.release()
        with self.client.acquire() as again:
            start = again.flag
            self.assertEqual(start, last[again.id] + 2**30)
            again.wait(start, timeout=0)
            einval(again.wait, 7, 0)
            einval(again.wait, start - 1, 0)
            target = again.arm()
            self.assertEqual(target, start + 1)
            self.assertFalse(again.reached(target))

    def test_slot_limit(self):
        with self.assertRaises(OSError) as e:
            self.client.acquire_many(5)
        self.assertEqual(e.exception.errno, errno.ENOSPC)
        slots = self.client.acquire_many(4)
        with self.assertRaises(OSError) as e:
            self.client.acquire()
        self.assertEqual(e.exception.errno, errno.ENOSPC)
        for s in slots:
            s.release()

    def test_misuse(self):
        with self.assertRaises(ValueError):
            self.client.acquire_many(0)
        slot = self.client.acquire()
        slot.release()
        slot.release()
        for use in (slot.arm, slot.consume, lambda: slot.flag, lambda: slot.store(1)):
            with self.assertRaises(ValueError):
                use()

    def test_library_not_found(self):
        env = dict(os.environ, CUFLAG_LIBRARY=os.path.join(self.daemon.dir, "absent.so"))
        code = "import cuflag\ntry:\n cuflag.Client()\nexcept OSError:\n print('OSError')"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        self.assertEqual(out.stdout.strip(), "OSError")


if __name__ == "__main__":
    unittest.main()
