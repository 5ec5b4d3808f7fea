# SPDX-License-Identifier: MIT
"""Waiting on slots in an asyncio event loop, through the loop's own
readiness watch on the eventfd (add_reader): no thread, no polling."""

import asyncio


class _Watch:
    """A slot's eventfd watched by one loop. add_reader allows one callback
    per fd, so every coroutine awaiting the slot shares this one.

    When the eventfd is readable the counter is read at once into the slot's
    tally: the loop's readiness is level-triggered, and an unread counter
    would wake it again and again.
    """

    def __init__(self, slot, loop):
        self.slot = slot
        self.loop = loop
        self.waiters = set()
        self.idle_check = None
        loop.add_reader(slot._fd, self._readable)

    def _readable(self):
        error = None
        try:
            self.slot._read_counter()
        except (OSError, ValueError) as e:
            error = e
        waiters, self.waiters = self.waiters, set()
        for fut in waiters:
            if fut.done():
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)
        if error is not None:
            # The fd is unusable: stop watching rather than fail for ever.
            self.close()

    def next_signal(self):
        """A future done at the next readiness of the eventfd."""
        fut = self.loop.create_future()
        self.waiters.add(fut)
        return fut

    def discard(self, fut):
        """The awaiter is done with fut. The reader goes once nobody needs
        it; checked a turn later, since a woken waiter usually waits again
        at once and removing and adding the fd would be wasted work."""
        self.waiters.discard(fut)
        if not self.waiters and self.idle_check is None:
            self.idle_check = self.loop.call_soon(self._stop_if_idle)

    def _stop_if_idle(self):
        self.idle_check = None
        if not self.waiters:
            self.close()

    def close(self):
        """Stop watching; whoever still awaits learns the slot is gone."""
        if self.slot._watch is not self:
            return
        self.slot._watch = None
        if self.idle_check is not None:
            self.idle_check.cancel()
            self.idle_check = None
        self.loop.remove_reader(self.slot._fd)
        waiters, self.waiters = self.waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_exception(ValueError("cuflag slot is released"))


def _watch(slot):
    """The slot's watch in the running loop, started on first need."""
    loop = asyncio.get_running_loop()
    watch = slot._watch
    if watch is None:
        slot._handle()
        watch = slot._watch = _Watch(slot, loop)
    elif watch.loop is not loop:
        raise RuntimeError("cuflag slot is awaited in another event loop")
    return watch


async def _next_signal(slot, done=None):
    """Return at the eventfd's next readiness, or at once when done()
    becomes true once the watch is in place."""
    watch = _watch(slot)
    signal = watch.next_signal()
    try:
        # What lands between the caller's check and the watch's start is
        # caught by the readiness (the counter stays readable) unless another
        # thread consumed it: look once more now that the watch is on.
        if done is not None and done():
            return
        await signal
    finally:
        watch.discard(signal)


async def wait(slot, target):
    """Slot.wait_async(): the flag first, the eventfd only when needed."""
    while not slot.reached(target):
        await _next_signal(slot, lambda: slot.reached(target))


async def completions(slot):
    """Slot.completions(): counts as consume() returns them."""
    while True:
        n = slot.consume()
        if n:
            yield n
            continue
        await _next_signal(slot)
