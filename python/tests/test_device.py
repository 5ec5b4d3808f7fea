# SPDX-License-Identifier: MIT
"""Slot.arm_many() through the real daemon on the simulated device (a writer
thread playing a kernel that signals from inside: values one by one, only
the last, ahead of the arms), its argument checks, and device_pointer()'s
error where no CUDA context is current."""

import errno
import threading
import unittest

from daemon import DaemonTestCase
from test_basic import assert_quiet, count_until


class ArmManyTest(DaemonTestCase):
    def test_one_by_one(self):
        with self.client.acquire() as slot:
            before = slot.arm()
            first = slot.arm_many(5000)
            self.assertEqual(first, (before + 1) & 0xFFFFFFFF)
            slot.store(before)

            def writer():
                for k in range(5000):
                    slot.store((first + k) & 0xFFFFFFFF)
            t = threading.Thread(target=writer)
            t.start()
            self.assertEqual(count_until(slot, 5001), 5001)
            t.join()
            assert_quiet(self, slot)
            slot.wait((first + 4999) & 0xFFFFFFFF, timeout=0)

    def test_only_last_and_ahead(self):
        with self.client.acquire() as slot:
            first = slot.arm_many(10)
            slot.store((first + 99) & 0xFFFFFFFF)  # 100 done, 10 armed
            self.assertEqual(count_until(slot, 10), 10)
            assert_quiet(self, slot)
            self.assertEqual(slot.arm_many(90), (first + 10) & 0xFFFFFFFF)
            self.assertEqual(count_until(slot, 90), 90)
            assert_quiet(self, slot)

    def test_arguments(self):
        with self.client.acquire() as slot:
            for bad in (0, (1 << 30) + 1, -1):
                with self.assertRaises(ValueError):
                    slot.arm_many(bad)
            with self.assertRaises(TypeError):
                slot.arm_many(2.0)
            slot.arm_many(1 << 30)
            slot.arm_many((1 << 30) - 1)
            with self.assertRaises(OSError) as e:
                slot.arm_many(1)
            self.assertEqual(e.exception.errno, errno.EOVERFLOW)

    def test_device_pointer_without_context(self):
        # No driver here (ENODEV), a library without CUDA (ENOSYS), or a
        # driver with no context current in this thread (EINVAL).
        with self.client.acquire() as slot:
            with self.assertRaises(OSError) as e:
                slot.device_pointer()
            self.assertIn(e.exception.errno, (errno.ENODEV, errno.ENOSYS, errno.EINVAL))


if __name__ == "__main__":
    unittest.main()
