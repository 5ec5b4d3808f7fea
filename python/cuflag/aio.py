# SPDX-License-Identifier: MIT
"""Waiting on slots in an asyncio event loop, through the loop's own
readiness watch (add_reader): no thread, no polling.

An await watches the eventfd that signals its slot (its own, or its
group's), and, for the client, the fd of the library's dispatch call
(cuflag_client_dispatch()): the loop calls the library when that fd is
readable and when the timeout the library names runs out. The library keeps
the rest: it notices the daemon's hang-up, resumes with the next daemon
without ever blocking the loop, and while no daemon runs rings the eventfd
of every slot whose flag moved (or that a device fault stopped). So an
await only ever waits for an eventfd to ring, and then looks at its flag.
"""

import asyncio
import errno
import time

from . import _lib
from . import _timeout

_U32 = 0xFFFFFFFF
_HALF = 0x80000000
# What the dispatch answers while the daemon that listens cannot take the
# client: only another daemon can mend it.
_REFUSED = (-errno.ESTALE, -errno.EOPNOTSUPP, -errno.EPROTONOSUPPORT)


def landed(flag, target):
    """Whether a flag value has reached target (wrap-around compare)."""
    return ((flag - target) & _U32) < _HALF


class _Reader:
    """One fd watched by one loop, shared by every await of it (add_reader
    allows one callback per fd). Each await adds a future that a readiness
    completes; the reader goes once nobody needs it, a turn later (a woken
    await usually awaits again at once), unless it is sticky (the slots
    Client.synchronize_async() keeps). detach() tells its owner it went."""

    def __init__(self, loop, fd, detach):
        self.loop = loop
        self.detach = detach
        self.waiters = {}  # future -> (slot, target): what it waits for
        self.users = 0  # awaits in progress
        self.sticky = False
        self.closed = False
        self.idle = None
        self.fd = fd
        loop.add_reader(fd, self.ready)

    def ready(self):
        raise NotImplementedError

    def hold(self):
        self.users += 1
        return self

    def release(self):
        self.users -= 1
        if not self.users and not self.sticky and self.idle is None and not self.closed:
            self.idle = self.loop.call_soon(self._stop_if_idle)

    def _stop_if_idle(self):
        self.idle = None
        if not self.users:
            self.close()

    def add(self, fut, slot=None, target=None):
        self.waiters[fut] = (slot, target)

    def discard(self, fut):
        self.waiters.pop(fut, None)

    def wake(self, which=lambda slot, target: True, error=None):
        """Complete the futures of the waiters which() names (with error)."""
        for fut in [f for f, w in self.waiters.items() if which(*w)]:
            del self.waiters[fut]
            if fut.done():
                continue
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

    def close(self, error=None):
        """Stop watching; every await still waiting wakes (with error)."""
        if self.closed:
            return
        self.closed = True
        if self.idle is not None:
            self.idle.cancel()
        if not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        self.detach()
        self.wake(error=error)


class Doorbell(_Reader):
    """An eventfd that signals slots (a slot's own, or its group's). At each
    readiness read() takes it (into the slots' tallies: the loop's readiness
    is level-triggered, an unread fd would wake it at every turn); then a
    waiter for (slot, target) wakes once the flag reached target, or with
    the error a device fault stopped the slot with, and one for a count
    (target None) at every readiness."""

    def __init__(self, loop, fd, read, detach, error):
        self.read = read
        self.error = error  # what awaits learn when it closes
        super().__init__(loop, fd, detach)

    def ready(self):
        try:
            self.read()
        except (OSError, ValueError) as e:
            self.close(e)  # the fd is unusable: stop watching
            return
        self.wake(lambda slot, target: target is None or landed(slot.flag, target))
        for slot, target in {s: t for s, t in self.waiters.values() if t is not None}.items():
            try:
                slot.reached(target)  # raises the fault that stopped it
            except (OSError, ValueError) as e:
                self.wake(lambda s, _: s is slot, e)

    def close(self, error=None):
        super().close(error or self.error)


class Dispatcher(_Reader):
    """The client's dispatch fd in one loop: dispatch() when it is readable
    and when the library's timeout (timeout(), in ms) runs out; its owner
    calls ready() first. ``state`` is the last answer (0: a daemon serves);
    a waiter added here wakes when it changes."""

    def __init__(self, loop, fd, dispatch, timeout, detach):
        self.dispatch = dispatch
        self.timeout = timeout
        self.state = 0
        self.timer = None
        super().__init__(loop, fd, detach)

    def ready(self):
        self.timer = None
        try:
            state = self.dispatch()
            ms = self.timeout()
        except ValueError as e:  # the client closed
            self.close(e)
            return
        if state not in (0, -errno.EAGAIN, -errno.ENOTCONN) + _REFUSED:
            self.close(_lib.error(-state))
            return
        if state != self.state:
            self.state = state
            self.wake()
        self.schedule(ms)

    def schedule(self, ms=None):
        """Call the library again when it says (None: ask it)."""
        if self.closed:
            return
        if ms is None:
            ms = self.timeout()
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None if ms < 0 else self.loop.call_later(ms / 1000, self.ready)

    def refusal(self):
        """The error a call that needs the daemon raises now, or None."""
        if self.state == -errno.ENOTCONN:
            return _lib.error(errno.ENOTCONN, "cuflagd went away and did not come back "
                              "within the client's resume timeout")
        return _lib.error(-self.state) if self.state in _REFUSED else None

    def close(self, error=None):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        super().close(error)


def doorbell_for(current, loop, what, fd, read, detach, error, sticky):
    """current (an owner's Doorbell, or None) if it is in loop; else a new
    one of fd (as Doorbell takes it); sticky if asked. One left by a loop
    that closed (a sticky one outlives asyncio.run()) is dropped; one in
    another running loop is an error."""
    if current is not None and current.loop is not loop and current.loop.is_closed():
        current.close()
        current = None
    if current is None:
        current = Doorbell(loop, fd, read, detach, error)
    elif current.loop is not loop:
        raise RuntimeError(f"cuflag {what} is awaited in another event loop")
    current.sticky |= sticky
    return current


def bound_elsewhere(reader, loop):
    """Whether an owner's reader belongs to another loop that still runs."""
    return reader is not None and reader.loop is not loop and not reader.loop.is_closed()


def spin(slot, target, spin_us):
    """Look at the flag for up to spin_us microseconds; True once it is
    there. It holds up the loop meanwhile: a completion that lands within
    the budget costs no wake-up. Timed by the system's monotonic clock, not
    the loop's: uvloop's loop.time() moves in whole milliseconds (libuv's),
    and a 50 us budget timed by it spun up to a millisecond."""
    now = time.monotonic
    end = now() + spin_us * 1e-6
    while not landed(slot.flag, target):
        if now() >= end:
            return False
    return True


async def wait(slot, target, spin_us, doorbell, dispatcher):
    """Slot.wait_async(): the flag first (spinning up to spin_us while no
    other await of the client is outstanding in the loop: their completions
    would wait for the spin), then the slot's doorbell until the flag is
    there. doorbell(loop) and dispatcher(loop) give the readers."""
    if landed(slot.flag, target):
        return
    loop = asyncio.get_running_loop()
    disp = dispatcher(loop).hold()
    try:
        if spin_us > 0 and disp.users == 1 and spin(slot, target, spin_us):
            return
        if disp.timer is None:
            disp.schedule()
        bell = doorbell(loop).hold()
        try:
            while not slot.reached(target):
                fut = loop.create_future()
                bell.add(fut, slot, target)
                try:
                    # What lands between the check and the watch is caught
                    # by the readiness unless another thread consumed it.
                    if landed(slot.flag, target):
                        return
                    await fut
                finally:
                    bell.discard(fut)
        finally:
            bell.release()
    finally:
        disp.release()


async def counts(first, take, doorbell, dispatcher, timeout=None):
    """Yield what first(), then take() hands out (when not empty), waiting
    between them for the doorbell or for the dispatcher's state to change.
    Raises what the dispatcher says a call that needs the daemon raises
    (ENOTCONN past the resume timeout, ESTALE ...), and TimeoutError when
    timeout seconds pass with nothing to yield."""
    loop = asyncio.get_running_loop()
    disp = dispatcher(loop).hold()  # first: a consume then never waits
    bell = doorbell(loop).hold()
    try:
        got = first()
        while True:
            if got:
                yield got
                got = take()
                continue
            error = disp.refusal()
            if error is not None:
                raise error
            fut = loop.create_future()
            bell.add(fut)
            disp.add(fut)
            try:
                async with _timeout.timeout(timeout):
                    await fut
            finally:
                bell.discard(fut)
                disp.discard(fut)
            got = take()
    finally:
        bell.release()
        disp.release()


async def reconnect(client, retry_interval, timeout):
    """Client.reconnect_async(): reconnect() in a worker thread, again
    after each sleep while no daemon listens, up to timeout seconds (None:
    no limit)."""
    if retry_interval <= 0:
        raise ValueError("retry_interval must be > 0")
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be None or >= 0")
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        try:
            await loop.run_in_executor(None, client.reconnect)
            return
        except (ConnectionRefusedError, FileNotFoundError) as e:
            delay = retry_interval
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError(errno.ETIMEDOUT, "cuflagd is not back") from e
                delay = min(delay, left)
        except OSError as e:
            # EBUSY: the daemon serves this client already (it resumed by
            # itself), unless it refused a connection for a while.
            if e.errno != errno.EBUSY:
                raise
            if not client.daemon_gone:
                return
            delay = retry_interval
        await asyncio.sleep(delay)
