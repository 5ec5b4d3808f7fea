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
import time

from . import _lib

# Without the daemon a wait looks at the flag after a sleep that starts
# here and doubles up to the cap, as cuflag_slot_wait() does.
_GONE_SLEEP_FIRST_S = 50e-6
_GONE_SLEEP_MAX_S = 2e-3
# The connection is readable without a hang-up only while a reply that came
# too late for its request sits in it (the next request drops it). The
# reader then pauses this long rather than wake the loop at every turn.
_HANGUP_RECHECK_S = 0.05
# While something awaits a slot, its last stream is checked this often for
# a device fault, which stops the flag for good (as cuflag_slot_wait does).
_FAULT_PROBE_S = 0.1

_U32 = 0xFFFFFFFF
_HALF = 0x80000000


def landed(slot, target):
    """Whether the slot's flag has reached target (wrap-around compare),
    read straight from the flag: no library call."""
    return ((slot._flag.value - target) & _U32) < _HALF


def _others_ready(loop):
    """Whether other callbacks wait for a turn of the loop: spinning would
    hold them up for the budget, and with them the work they would queue.
    Read from CPython's loop (its queue of ready callbacks); a loop without
    one (uvloop) is taken to have none."""
    return bool(getattr(loop, "_ready", None))


def spin(slot, target, spin_us):
    """Look at the flag for up to spin_us microseconds; True once it is
    there. It holds up the loop meanwhile, which is the point when nothing
    else would run: a completion that lands within the budget costs no
    wake-up. It does not spin while other callbacks are ready, nor while
    other awaits of the client are outstanding: their completions would
    wait for the spin, and the work they would queue next with them (on an
    H200, spinning under load cost up to a quarter of the requests/s)."""
    if slot._client._awaiting or _others_ready(asyncio.get_running_loop()):
        return False
    flag = slot._flag
    end = time.perf_counter() + spin_us * 1e-6
    while ((flag.value - target) & _U32) >= _HALF:
        if time.perf_counter() >= end:
            return False
    return True


class _Reader:
    """One fd watched by one loop. add_reader allows one callback per fd,
    so every coroutine awaiting it shares this one: each adds a future
    that the readiness completes (several readers may share a future: the
    first to fire completes it). The reader goes once nobody needs it;
    checked a turn later, since a woken waiter usually waits again at once
    and removing and adding the fd would be wasted work. A sticky reader
    stays while its loop runs (the slots Client.synchronize_async keeps).
    """

    def __init__(self, loop, fd):
        self.loop = loop
        self.fd = fd
        self.waiters = {}  # future -> what it waits for (None: any readiness)
        self.idle_check = None
        self.closed = False
        self.sticky = False
        loop.add_reader(fd, self._readable)

    def _readable(self):
        raise NotImplementedError

    def _detach(self):
        """Forget this reader where its owner keeps it."""
        raise NotImplementedError

    def _wake(self, error=None):
        """Complete every waiting future: with error when one is given."""
        waiters, self.waiters = self.waiters, {}
        for fut in waiters:
            if fut.done():
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

    def add(self, fut, target=None):
        """fut completes at the next readiness of the fd (for a slot's
        eventfd, with a target: at the first one that finds it landed)."""
        self.waiters[fut] = target

    def discard(self, fut):
        """The awaiter is done with fut."""
        self.waiters.pop(fut, None)
        if (not self.waiters and not self.sticky and self.idle_check is None
                and not self.closed):
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
    unread counter would wake it again and again. A waiter for a target
    wakes only once the flag has reached it: many awaits of one slot (one
    stream's requests) do not all wake at each completion.

    While anyone waits, the slot's last stream is checked for a device
    fault every _FAULT_PROBE_S; a fault wakes every waiter with EIO.
    """

    def __init__(self, slot, loop):
        self.slot = slot
        self.probe = None
        super().__init__(loop, slot._fd)

    def _readable(self):
        try:
            self.slot._read_counter()
        except (OSError, ValueError) as e:
            # The fd is unusable: stop watching rather than fail for ever.
            self.close(e)
            return
        self._wake_landed()

    def _wake_landed(self):
        flag = self.slot._flag.value
        done = [fut for fut, target in self.waiters.items()
                if target is None or ((flag - target) & _U32) < _HALF]
        for fut in done:
            del self.waiters[fut]
            if not fut.done():
                fut.set_result(None)

    def add(self, fut, target=None):
        super().add(fut, target)
        if self.probe is None:
            self.probe = self.loop.call_later(_FAULT_PROBE_S, self._probe)

    def _probe(self):
        self.probe = None
        if not self.waiters or self.closed:
            return
        rc = _lib.lib().cuflag_cuda_check(self.slot._ptr)
        if rc == -errno.EIO:
            self._wake(OSError(errno.EIO, "a device fault stopped the work awaited"))
            return
        self.probe = self.loop.call_later(_FAULT_PROBE_S, self._probe)

    def _detach(self):
        if self.slot._watch is self:
            self.slot._watch = None

    def _unwatch(self):
        if self.probe is not None:
            self.probe.cancel()
            self.probe = None
        if not self.loop.is_closed():
            super()._unwatch()

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
        connection is to be closed (a loop must not watch a closed fd). A
        sticky watch whose loop has closed goes instead."""
        if self.loop.is_closed():
            self.close()
        elif not self.closed:
            self._unwatch()

    def resume(self, fd):
        """Watch fd, the client's connection after the reconnect (the new
        one, or the old one when it failed). Waiters go on waiting."""
        if not self.closed:
            self.fd = fd
            self.loop.add_reader(fd, self._readable)


def bound_elsewhere(slot, loop):
    """Whether the slot's watch belongs to another loop that still runs."""
    watch = slot._watch
    return watch is not None and watch.loop is not loop and not watch.loop.is_closed()


def _slot_watch(slot, loop, sticky):
    """The slot's watch in the loop, started on first need. A watch left by
    a loop that has closed (a sticky one outlives asyncio.run()) is dropped."""
    watch = slot._watch
    if watch is not None and watch.loop is not loop and watch.loop.is_closed():
        watch.close()
        watch = None
    if watch is None:
        slot._handle()
        watch = slot._watch = _Watch(slot, loop)
    elif watch.loop is not loop:
        raise RuntimeError("cuflag slot is awaited in another event loop")
    watch.sticky |= sticky
    return watch


def _hangup_watch(client, loop, sticky):
    """The client's hang-up watch in the loop, started on first need: one
    per loop, whichever slots of the client are awaited there."""
    watch = client._hangup_watches.get(loop)
    if watch is None:
        for old in [w for w in client._hangup_watches.values() if w.loop.is_closed()]:
            old.close()
        watch = client._hangup_watches[loop] = _Hangup(client, loop)
    watch.sticky |= sticky
    return watch


async def _next_signal(slot, target=None, sticky=False):
    """Return once the flag reached target (None: at the eventfd's next
    readiness), or at the daemon's hang-up."""
    loop = asyncio.get_running_loop()
    watches = [_slot_watch(slot, loop, sticky)]
    client = slot._client
    if not client._gone:
        watches.append(_hangup_watch(client, loop, sticky))
    signal = loop.create_future()
    watches[0].add(signal, target)
    for watch in watches[1:]:
        watch.add(signal)
    try:
        # What lands between the caller's check and the watch's start is
        # caught by the readiness (the counter stays readable) unless another
        # thread consumed it: look once more now that the watch is on.
        if target is not None and landed(slot, target):
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


async def wait(slot, target, spin_us=0, sticky=False):
    """Slot.wait_async(): the flag first (spinning up to spin_us), the
    eventfd only when needed, the flag itself once the daemon is gone.
    sticky keeps the slot's watch in the loop once nobody awaits."""
    # The flag first, straight from memory: no library call when it is there.
    if landed(slot, target) or (spin_us > 0 and spin(slot, target, spin_us)):
        return
    client = slot._client
    while not slot.reached(target):
        if client._gone:
            await _watch_flag(slot, target)
            return
        client._awaiting += 1
        try:
            await _next_signal(slot, target, sticky)
        finally:
            client._awaiting -= 1


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
