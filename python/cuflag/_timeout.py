# SPDX-License-Identifier: MIT
"""timeout(seconds): asyncio.timeout() where Python has it (3.11 on), and
the same for Python 3.9 and 3.10, so that the package runs on each.

    async with timeout(2.0):     # None: no limit
        await something()

Past the limit the awaited work is cancelled and the block raises the
builtin TimeoutError (on 3.9 and 3.10 asyncio's own TimeoutError is another
class: a caller's `except TimeoutError` would miss it).
"""

import asyncio


class _Timeout:
    """asyncio.timeout() for Python before 3.11: a timer that cancels the
    task, and at the block's end a CancelledError that the timer caused
    turned into TimeoutError. A cancellation from outside that lands in the
    same turn as the timer reads as the timeout (3.9 has no
    Task.uncancel() to tell them apart)."""

    def __init__(self, delay):
        self._delay = delay
        self._timer = None
        self._expired = False
        self._task = None

    async def __aenter__(self):
        self._task = asyncio.current_task()
        if self._task is None:
            raise RuntimeError("timeout() should be used inside a task")
        if self._delay is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(loop.time() + self._delay, self._expire)
        return self

    def _expire(self):
        self._expired = True
        self._task.cancel()

    async def __aexit__(self, exc_type, exc, tb):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._expired and exc_type is asyncio.CancelledError:
            raise TimeoutError() from exc
        return False


def timeout(delay):
    """An async context manager that raises TimeoutError once delay seconds
    (None: never) pass inside it, cancelling what it awaits."""
    native = getattr(asyncio, "timeout", None)
    if native is not None:
        return native(delay)
    return _Timeout(delay)
