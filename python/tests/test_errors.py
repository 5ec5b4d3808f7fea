# SPDX-License-Identifier: MIT
"""Errors: negative errno from the library as OSError, misuse as
ValueError, and the daemon's limits."""

import asyncio
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
        path = os.path.join(self.daemon.dir, "absent.sock")
        with self.assertRaises(OSError) as e:
            cuflag.Client(path)
        self.assertEqual(e.exception.errno, errno.ENOENT)
        self.assertIsInstance(e.exception, FileNotFoundError)
        # Which file, and what to do.
        self.assertEqual(e.exception.filename, path)
        self.assertIn("cuflagd running", str(e.exception))
        self.assertIn(path, str(e.exception))

    def test_socket_directory(self):
        """CUFLAG_SOCKET naming the socket's directory: ENOTSOCK, not
        "Connection refused" (no daemon there)."""
        with self.assertRaises(OSError) as e:
            cuflag.Client(self.daemon.dir)
        self.assertEqual(e.exception.errno, errno.ENOTSOCK)
        self.assertEqual(e.exception.filename, self.daemon.dir)
        self.assertIn("name the socket itself", str(e.exception))

    def test_typed_arguments(self):
        with self.client.acquire() as slot:
            target = slot.arm()
            for bad in (None, "1", 1.0):
                with self.assertRaises(TypeError) as e:
                    slot.wait(bad)
                self.assertIn("target must be an int", str(e.exception))
                with self.assertRaises(TypeError):
                    slot.reached(bad)
                for store in (slot.store, slot.complete):
                    with self.assertRaises(TypeError):
                        store(bad)
            for bad in (-1, 2**32):
                for store in (slot.store, slot.complete):
                    with self.assertRaises(ValueError):
                        store(bad)
                with self.assertRaises(ValueError):
                    slot.wait(bad)
            self.assertEqual(slot.flag, target - 1)  # nothing was stored
            with self.assertRaises(TypeError):
                slot.wait(target, timeout="1")
            with self.assertRaises(ValueError):
                slot.wait(target, timeout=float("nan"))
            with self.assertRaises(ValueError):
                slot.wait(target, timeout=0, spin_us=-1)
            slot.store(target)
            slot.wait(target, timeout=2)

    def test_library_path(self):
        path = cuflag.library_path()
        self.assertTrue(os.path.isabs(path) and os.path.isfile(path), path)
        self.assertEqual(os.path.realpath(os.environ["CUFLAG_LIBRARY"]), path)

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
            # Not a bare OSError(22): it names the slot and the value.
            self.assertIn(f"slot {slot.id}: wait for {target + 5}: ", str(e.exception))
            self.assertIn("not a value of this slot's timeline", str(e.exception))
            with self.assertRaises(TimeoutError) as e:
                slot.wait(target, timeout=0.01)
            self.assertIn(f"slot {slot.id}: wait for {target} timed out", str(e.exception))

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
            einval(asyncio.run, slots[0].wait_async(target))
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

    def test_complete(self):
        """complete() is C's cuflag_slot_complete(): an armed value lands
        and is waited for; one never reserved is EINVAL and the flag stays
        where it was, where store() would have written it."""
        with self.client.acquire() as slot:
            start = slot.flag
            for never in (start + 1, (start - 1) & 0xFFFFFFFF, start + 2**20):
                with self.assertRaises(OSError) as e:
                    slot.complete(never)
                self.assertEqual(e.exception.errno, errno.EINVAL)
                self.assertEqual(slot.flag, start, "the flag is left alone")
            first = slot.arm()
            second = slot.arm()
            with self.assertRaises(OSError) as e:
                slot.complete(second + 1)
            self.assertEqual(e.exception.errno, errno.EINVAL)
            slot.complete(second)
            self.assertEqual(slot.flag, second)
            slot.wait(second, timeout=2)
            self.assertTrue(slot.reached(first))
            deadline = time.monotonic() + 2
            counted = 0
            while counted < 2 and time.monotonic() < deadline:
                counted += slot.consume()
                time.sleep(0.01)
            self.assertEqual(counted, 2, "both armed values counted")
        with self.assertRaises(ValueError):
            slot.complete(second)  # released

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

    def test_no_daemon_anywhere(self):
        # No socket named, no node daemon, the user's own not to be started:
        # the error names both sockets and says what to do.
        runtime = os.path.join(self.daemon.dir, "run-user")
        os.mkdir(runtime, 0o700)
        node = os.path.join(self.daemon.dir, "no-node.sock")
        env = dict(os.environ, CUFLAG_NODE_SOCKET=node, XDG_RUNTIME_DIR=runtime,
                   CUFLAG_AUTOSPAWN="0")
        env.pop("CUFLAG_SOCKET", None)
        code = ("import cuflag\ntry:\n cuflag.Client()\nexcept OSError as e:\n"
                " print(type(e).__name__, e.filename)\n print(e)")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        first, message = out.stdout.splitlines()
        self.assertEqual(first, "FileNotFoundError None")
        self.assertIn(f"no node daemon at {node}", message)
        self.assertIn(os.path.join(runtime, "cuflag", "cuflagd.sock"), message)
        self.assertIn("CUFLAG_AUTOSPAWN=0", message)

    def test_library_not_found(self):
        absent = os.path.join(self.daemon.dir, "absent.so")
        env = dict(os.environ, CUFLAG_LIBRARY=absent)
        code = ("import cuflag\ntry:\n cuflag.Client()\nexcept OSError as e:\n"
                " print(type(e).__name__, e.filename)\n print(e)")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        first, message = out.stdout.splitlines()
        self.assertEqual(first, f"FileNotFoundError {absent}")
        self.assertIn("cannot load libcuflag-client", message)


if __name__ == "__main__":
    unittest.main()
