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
