# SPDX-License-Identifier: MIT
"""cuflag's timeout() for Python 3.9 and 3.10 (the one asyncio.timeout()
stands in for from 3.11 on), tested on every version: past the limit the
builtin TimeoutError, the work cancelled; within it, nothing; a
cancellation from outside stays a cancellation. No daemon needed."""
import asyncio
import unittest

from cuflag import _timeout


class FallbackTimeoutTest(unittest.TestCase):

    def test_expires_as_builtin_timeout_error(self):
        cancelled = []

        async def work():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        async def main():
            async with _timeout._Timeout(0.02):
                await work()

        with self.assertRaises(TimeoutError) as cm:
            asyncio.run(main())
        self.assertIs(type(cm.exception), TimeoutError)
        self.assertEqual(cancelled, [True])

    def test_within_the_limit(self):
        async def main():
            async with _timeout._Timeout(5):
                await asyncio.sleep(0.01)
            async with _timeout._Timeout(None):
                await asyncio.sleep(0.01)
            # The timer went with the block: a later await is not cancelled.
            await asyncio.sleep(0.05)
            return "done"

        self.assertEqual(asyncio.run(main()), "done")

    def test_outside_cancel_stays_cancel(self):
        async def inner():
            async with _timeout._Timeout(5):
                await asyncio.sleep(10)

        async def main():
            task = asyncio.ensure_future(inner())
            await asyncio.sleep(0.01)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        asyncio.run(main())

    def test_timeout_is_the_native_one_where_python_has_it(self):
        async def main():
            return type(_timeout.timeout(1))

        kind = asyncio.run(main())
        if hasattr(asyncio, "timeout"):
            self.assertIsNot(kind, _timeout._Timeout)
        else:
            self.assertIs(kind, _timeout._Timeout)


if __name__ == "__main__":
    unittest.main()
