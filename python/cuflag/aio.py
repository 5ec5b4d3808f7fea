# SPDX-License-Identifier: MIT
"""Waiting on slots in an asyncio event loop, through the loop's own
readiness watch on the eventfd (add_reader): no thread, no polling while
the daemon is there.

The client's connection is watched the same way, for the daemon's
hang-up: once it is gone no eventfd is signalled any more, and a wait
goes on by looking at the flag itself, with a growing sleep, as the
library's blocking wait does.
"""

import asyncio
import errno

# Without the daemon a wait looks at the flag after a sleep that starts
# here and doubles up to the cap, as cuflag_slot_wait() does.
_GONE_SLEEP_FIRST_S = 50e-6
_GONE_SLEEP_MAX_S = 2e-3
# The connection is readable without a hang-up only while a reply that came
# too late for its request sits in it (the next request drops it). The
# reader then pauses this long rather than wake the loop at every turn.
_HANGUP_RECHECK_S = 0.05


class _Reader:
    """One fd watched by one loop. add_reader allows one callback per fd,
    so every coroutine awaiting it shares this one: each adds a future
    that the readiness completes (several readers may share a future: the
    first to fire completes it). The reader goes once nobody needs it;
    checked a turn later, since a woken waiter usually waits again at once
    and removing and adding the fd would be wasted work.
    """

    def __init__(self, loop, fd):
        self.loop = loop
        self.fd = fd
        self.waiters = set()
        self.idle_check = None
        self.closed = False
        loop.add_reader(fd, self._readable)

    def _readable(self):
        raise NotImplementedError

    def _detach(self):
        """Forget this reader where its owner keeps it."""
        raise NotImplementedError

    def _wake(self, error=None):
        """Complete every waiting future: with error when one is given."""
        waiters, self.waiters = self.waiters, set()
        for fut in waiters:
            if fut.done():
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

    def add(self, fut):
        """fut completes at the next readiness of the fd."""
        self.waiters.add(fut)

    def discard(self, fut):
        """The awaiter is done with fut."""
        self.waiters.discard(fut)
        if not self.waiters and self.idle_check is None and not self.closed:
            self.idle_check = self.loop.call_soon(self._stop_if_idle)

    def _stop_if_idle(self):
        self.idle_check = None
        if not self.waiters:
            self.close()

    def _unwatch(self):
        self.loop.remove_reader(self.fd)

    def close(self, error=None):
        """Stop watching; whoever still awaits gets error (or simply wakes)."""
        if self.closed:
            return
        self.closed = True
        self._detach()
        if self.idle_check is not None:
            self.idle_check.cancel()
            self.idle_check = None
        self._unwatch()
        self._wake(error)


class _Watch(_Reader):
    """A slot's eventfd. When it is readable the counter is read at once
    into the slot's tally: the loop's readiness is level-triggered, and an
    unread counter would wake it again and again.
    """

    def __init__(self, slot, loop):
        self.slot = slot
        super().__init__(loop, slot._fd)

    def _readable(self):
        try:
            self.slot._read_counter()
        except (OSError, ValueError) as e:
            # The fd is unusable: stop watching rather than fail for ever.
            self.close(e)
            return
        self._wake()

    def _detach(self):
        if self.slot._watch is self:
            self.slot._watch = None

    def close(self, error=None):
        """Stop watching; whoever still awaits learns the slot is gone."""
        super().close(error or ValueError("cuflag slot is released"))


class _Hangup(_Reader):
    """A client's connection, watched for the daemon's hang-up and never
    read: at the peer's end the socket becomes readable (EOF), and a poll
    for POLLRDHUP tells that from a late reply waiting in it. Once the
    daemon is gone the client remembers it (Client.daemon_gone), the
    reader goes, and every waiter wakes to look at its flag itself.
    """

    def __init__(self, client, loop):
        self.client = client
        self.paused = None  # the timer that resumes a paused reader
        super().__init__(loop, client._fd)

    def _readable(self):
        if not self.client._check_hangup():
            # A late reply: readable until the next request drops it.
            self.loop.remove_reader(self.fd)
            self.paused = self.loop.call_later(_HANGUP_RECHECK_S, self._resume)
            return
        self.close()

    def _resume(self):
        self.paused = None
        self.loop.add_reader(self.fd, self._readable)

    def _detach(self):
        watches = self.client._hangup_watches
        if watches.get(self.loop) is self:
            del watches[self.loop]

    def _unwatch(self):
        if self.paused is None:
            self.loop.remove_reader(self.fd)
        else:
            self.paused.cancel()
            self.paused = None

    def suspend(self):
        """Stop watching for a while: the client is reconnecting, and its
        connection is to be closed (a loop must not watch a closed fd)."""
        if not self.closed:
            self._unwatch()

    def resume(self, fd):
        """Watch fd, the client's connection after the reconnect (the new
        one, or the old one when it failed). Waiters go on waiting."""
        if not self.closed:
            self.fd = fd
            self.loop.add_reader(fd, self._readable)


def _slot_watch(slot, loop):
    """The slot's watch in the loop, started on first need."""
    watch = slot._watch
    if watch is None:
        slot._handle()
        watch = slot._watch = _Watch(slot, loop)
    elif watch.loop is not loop:
        raise RuntimeError("cuflag slot is awaited in another event loop")
    return watch


def _hangup_watch(client, loop):
    """The client's hang-up watch in the loop, started on first need: one
    per loop, whichever slots of the client are awaited there."""
    watch = client._hangup_watches.get(loop)
    if watch is None:
        watch = client._hangup_watches[loop] = _Hangup(client, loop)
    return watch


async def _next_signal(slot, done=None):
    """Return at the eventfd's next readiness or at the daemon's hang-up,
    or at once when done() becomes true once the watches are in place."""
    loop = asyncio.get_running_loop()
    watches = [_slot_watch(slot, loop)]
    client = slot._client
    if not client._gone:
        watches.append(_hangup_watch(client, loop))
    signal = loop.create_future()
    for watch in watches:
        watch.add(signal)
    try:
        # What lands between the caller's check and the watch's start is
        # caught by the readiness (the counter stays readable) unless another
        # thread consumed it: look once more now that the watch is on.
        if done is not None and done():
            return
        await signal
    finally:
        for watch in watches:
            watch.discard(signal)


async def _watch_flag(slot, target):
    """Without the daemon: look at the flag after each of growing sleeps."""
    delay = _GONE_SLEEP_FIRST_S
    while not slot.reached(target):
        await asyncio.sleep(delay)
        delay = min(delay * 2, _GONE_SLEEP_MAX_S)


async def wait(slot, target):
    """Slot.wait_async(): the flag first, the eventfd only when needed,
    the flag itself once the daemon is gone."""
    while not slot.reached(target):
        if slot._client._gone:
            await _watch_flag(slot, target)
            return
        await _next_signal(slot, lambda: slot.reached(target))


async def completions(slot):
    """Slot.completions(): counts as consume() returns them, until the
    daemon is gone and what it signalled is handed out."""
    while True:
        n = slot.consume()
        if n:
            yield n
            continue
        if slot._client._gone:
            raise OSError(errno.ENOTCONN, "cuflagd hung up: no completion is signalled any more")
        await _next_signal(slot)



async def reconnect(client, retry_interval, timeout):
    """Client.reconnect_async(): reconnect(), again after each sleep while
    no daemon listens, up to timeout seconds (None: no limit)."""
    if retry_interval <= 0:
        raise ValueError("retry_interval must be > 0")
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be None or >= 0")
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        try:
            client.reconnect()
            return
        except (ConnectionRefusedError, FileNotFoundError) as e:
            delay = retry_interval
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(errno.ETIMEDOUT, "cuflagd is not back") from e
                delay = min(delay, left)
        await asyncio.sleep(delay)
