# SPDX-License-Identifier: MIT
"""Streams, without a GPU: every accepted kind of stream object gives its
handle (stand-ins shaped like the libraries' classes), anything else is a
TypeError before any library call, and without a driver signal() and
synchronize() raise the library's errno."""

import asyncio
import ctypes
import errno
import threading
import unittest
from unittest import mock

import cuflag
from cuflag._timeout import timeout as within  # asyncio.timeout() before 3.11 too
from cuflag import stream as cfstream
from daemon import DaemonTestCase

HANDLE = 0x7F00DEADBEEF


class TorchLike:
    """torch.cuda.Stream: the handle is .cuda_stream."""

    def __init__(self, h):
        self.cuda_stream = h


class CupyLike:
    """cupy.cuda.Stream: the handle is .ptr."""

    def __init__(self, h):
        self.ptr = h


class NumbaLike:
    """numba's Stream: .handle is a ctypes c_void_p (or a cuda-python CUstream)."""

    def __init__(self, h):
        self.handle = h


class CUstreamLike:
    """cuda-python's driver.CUstream: int() gives the handle."""

    def __init__(self, h):
        self._h = h

    def __int__(self):
        return self._h


class IndexLike:
    """An integer type of another library (numpy.uint64)."""

    def __init__(self, h):
        self._h = h

    def __index__(self):
        return self._h


class Protocol:
    """cuda.core's __cuda_stream__() -> (version, handle); other attributes
    that would give another answer come second."""

    ptr = 1234

    def __init__(self, h):
        self._h = h

    def __cuda_stream__(self):
        return (0, self._h)


class BadProtocol:
    def __cuda_stream__(self):
        return HANDLE


class HandleTest(unittest.TestCase):
    def test_accepted(self):
        cases = {
            "int": HANDLE,
            "zero (legacy default stream)": 0,
            "per-thread default stream": 2,
            "torch": TorchLike(HANDLE),
            "cupy": CupyLike(HANDLE),
            "numba, ctypes binding": NumbaLike(ctypes.c_void_p(HANDLE)),
            "numba, cuda-python binding": NumbaLike(CUstreamLike(HANDLE)),
            "cuda-python CUstream": CUstreamLike(HANDLE),
            "__index__": IndexLike(HANDLE),
            "c_void_p": ctypes.c_void_p(HANDLE),
            "__cuda_stream__": Protocol(HANDLE),
            "largest handle": 2**64 - 1,
        }
        for what, obj in cases.items():
            with self.subTest(what):
                want = obj if isinstance(obj, int) else HANDLE
                self.assertEqual(cfstream.handle(obj), want)
        self.assertEqual(cfstream.handle(ctypes.c_void_p(None)), 0)
        self.assertEqual(cfstream.handle(TorchLike(0)), 0)

    def test_junk(self):
        for junk in (None, "stream", b"\x01", 1.0, 2.5, True, False, object(), [HANDLE],
                     {"ptr": HANDLE}, TorchLike("x"), CupyLike(None), BadProtocol(),
                     complex(1, 0)):
            with self.subTest(junk=repr(junk)):
                with self.assertRaises(TypeError) as cm:
                    cfstream.handle(junk)
                if not isinstance(junk, BadProtocol):
                    self.assertIn("torch.cuda.Stream", str(cm.exception))

    def test_out_of_range(self):
        for bad in (-1, 2**64, IndexLike(-5)):
            with self.subTest(bad=repr(bad)):
                with self.assertRaises(ValueError):
                    cfstream.handle(bad)


def _driver_present():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


class _NoLibrary:
    """Stands in for the library: any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the library was called ({name}) before the type check")


class SignalTest(DaemonTestCase):
    def test_type_error_before_any_call(self):
        slot = self.client.acquire()
        try:
            with mock.patch("cuflag._lib.lib", return_value=_NoLibrary()):
                for junk in (None, "0", 1.5, object()):
                    with self.assertRaises(TypeError):
                        slot.signal(junk)
                    with self.assertRaises(TypeError):
                        slot.launched(junk)
                    with self.assertRaises(TypeError):
                        self.client.synchronize(junk)
                    with self.assertRaises(TypeError):
                        asyncio.run(self.client.synchronize_async(junk))
        finally:
            slot.release()

    @unittest.skipIf(_driver_present(), "an NVIDIA driver is here")
    def test_no_driver(self):
        # ENODEV from a library with the CUDA binding, ENOSYS without it.
        want = (errno.ENODEV, errno.ENOSYS)
        with self.client.acquire() as slot:
            for stream in (0, TorchLike(HANDLE)):
                with self.assertRaises(OSError) as cm:
                    slot.signal(stream)
                self.assertIn(cm.exception.errno, want)
                if cm.exception.errno == errno.ENODEV:
                    # Not a bare "No such device": what is missing, by name.
                    self.assertIn("no NVIDIA driver: libcuda.so.1 was not found",
                                  str(cm.exception))
                with self.assertRaises(OSError) as cm:
                    slot.launched(stream)
                self.assertIn(cm.exception.errno, want)
            slot.store(slot.arm())  # the slot is unharmed
        with self.assertRaises(OSError) as cm:
            self.client.synchronize(CupyLike(HANDLE))
        self.assertIn(cm.exception.errno, want)
        with self.assertRaises(OSError) as cm:
            asyncio.run(self.client.synchronize_async(0))
        self.assertIn(cm.exception.errno, want)
        # No slot was taken for a stream that could not be signalled.
        self.assertEqual(self.client._streams, {})

    def test_spin_budget(self):
        self.assertEqual(self.client.spin_us, cuflag.DEFAULT_SPIN_US)
        with self.assertRaises(ValueError):
            cuflag.Client(self.daemon.socket, spin_us=-1)
        with self.assertRaises(ValueError):
            self.client.synchronize(0, spin_us=-1)
        with cuflag.Client(self.daemon.socket, spin_us=0) as other:
            self.assertEqual(other.spin_us, 0)


class SpinWaitTest(DaemonTestCase):
    """A spin budget returns without a wake when the value lands within it,
    and waits on as before when it does not."""

    def test_wait_spin(self):
        with self.client.acquire() as slot:
            t = slot.arm()
            slot.store(t)
            slot.wait(t, timeout=1, spin_us=100)
            t = slot.arm()
            with self.assertRaises(TimeoutError):
                slot.wait(t, timeout=0.05, spin_us=1000)
            slot.store(t)

    def test_wait_async_spin(self):
        with self.client.acquire() as slot:
            async def main():
                t = slot.arm()
                loop = asyncio.get_running_loop()
                # Lands while the await spins: it returns without a watch.
                device = threading.Timer(0.002, slot.store, (t,))
                device.start()
                await slot.wait_async(t, spin_us=2_000_000)
                self.assertIsNone(slot._watch)
                device.join()
                t = slot.arm()
                loop.call_later(0.01, slot.store, t)
                async with within(5):
                    await slot.wait_async(t, spin_us=10)

            asyncio.run(main())

    def test_targets_wake_only_their_own(self):
        """Waiters for later values stay asleep when an earlier one lands."""
        with self.client.acquire() as slot:
            async def main():
                targets = [slot.arm() for _ in range(3)]
                woken = []

                async def waiter(t):
                    await slot.wait_async(t)
                    woken.append(t)

                tasks = [asyncio.create_task(waiter(t)) for t in targets]
                await asyncio.sleep(0.01)
                for i, t in enumerate(targets):
                    slot.store(t)
                    async with within(5):
                        while len(woken) < i + 1:
                            await asyncio.sleep(0.001)
                    await asyncio.sleep(0.01)
                    self.assertEqual(woken, targets[:i + 1])
                await asyncio.gather(*tasks)

            asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
