# SPDX-License-Identifier: MIT
"""Waiting on slots in an asyncio event loop, through the loop's own
readiness watch on the eventfd (add_reader): no thread, no polling while
the daemon is there.

The client's connection is watched the same way, for the daemon's
hang-up: while it is gone no eventfd is signalled, so a wait goes on by
looking at the flag itself, with a growing sleep, as the library's blocking
wait does, and the watch has the library resume (in a worker thread, every
25 ms) until a daemon listens again; then the waits go back to the
eventfds, which the new daemon signals, and the watch to the new
connection.
"""

import asyncio
import errno
import math
import os
import select
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
# While the daemon is gone and something awaits, one resume attempt per
# this long (as the library spaces its own).
_RESUME_SPACING_S = 0.025
# What a resume answers when no attempt will mend it: the daemon that came
# back has another region layout, or another slab, or protocol.
_RESUME_FATAL = (-errno.ESTALE, -errno.EOPNOTSUPP, -errno.EPROTONOSUPPORT)
_RESUME_FATAL_SPACING_S = 1.0
_POLL_HANGUP = select.POLLRDHUP | select.POLLHUP | select.POLLERR
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


class _Landing(_Reader):
    """An eventfd that signals slots: a slot's own, or its group's. Each
    waiter waits for a slot's flag to reach a target, or (target None) for
    a count to hand out. When the fd is readable it is read at once into
    the slots' tallies: the loop's readiness is level-triggered, and an
    unread fd would wake it again and again. A waiter for a target wakes
    only once the flag has reached it: many awaits of one slot (one
    stream's requests) do not all wake at each completion.

    While anyone waits for a slot, the slot's last stream is checked for a
    device fault every _FAULT_PROBE_S; a fault wakes that slot's waiters
    with EIO.
    """

    def __init__(self, loop, fd):
        self.probe = None
        super().__init__(loop, fd)

    def _read(self):
        """Read the fd into the tallies; raise its read error."""
        raise NotImplementedError

    def _due(self, slot, target):
        """Whether a waiter for (slot, target None) wakes at this readiness."""
        raise NotImplementedError

    def _readable(self):
        try:
            self._read()
        except (OSError, ValueError) as e:
            # The fd is unusable: stop watching rather than fail for ever.
            self.close(e)
            return
        done = [fut for fut, (slot, target) in self.waiters.items()
                if (self._due(slot, target) if target is None else landed(slot, target))]
        for fut in done:
            del self.waiters[fut]
            if not fut.done():
                fut.set_result(None)

    def add(self, fut, target=None, slot=None):
        self.waiters[fut] = (slot, target)
        if self.probe is None and slot is not None:
            self.probe = self.loop.call_later(_FAULT_PROBE_S, self._probe)

    def _fail(self, slots, error):
        """Wake the waiters of these slots with error."""
        failed = [fut for fut, (slot, _) in self.waiters.items() if slot in slots]
        for fut in failed:
            del self.waiters[fut]
            if not fut.done():
                fut.set_exception(error)

    def _probe(self):
        self.probe = None
        if self.closed:
            return
        slots = {slot for slot, _ in self.waiters.values() if slot is not None}
        faulted = {slot for slot in slots if slot._ptr is not None
                   and _lib.lib().cuflag_cuda_check(slot._ptr) == -errno.EIO}
        if faulted:
            self._fail(faulted, OSError(errno.EIO, "a device fault stopped the work awaited"))
        if len(faulted) < len(slots):
            self.probe = self.loop.call_later(_FAULT_PROBE_S, self._probe)

    def drop(self, slot):
        """The slot is released: its waiters learn it."""
        self._fail({slot}, ValueError("cuflag slot is released"))

    def _unwatch(self):
        if self.probe is not None:
            self.probe.cancel()
            self.probe = None
        if not self.loop.is_closed():
            super()._unwatch()


class _Watch(_Landing):
    """A slot's own eventfd; its counter goes into the slot's tally, and a
    waiter for a count wakes at every readiness."""

    def __init__(self, slot, loop):
        self.slot = slot
        super().__init__(loop, slot._fd)

    def _read(self):
        self.slot._read_counter()

    def _due(self, slot, target):
        return True

    def _detach(self):
        if self.slot._watch is self:
            self.slot._watch = None

    def close(self, error=None):
        """Stop watching; whoever still awaits learns the slot is gone."""
        super().close(error or ValueError("cuflag slot is released"))


class _GroupWatch(_Landing):
    """A group's eventfd; the group is drained into its slots' tallies. A
    waiter for the group's next count (slot None) wakes at every
    readiness, one for a slot's count once that slot has one."""

    def __init__(self, group, loop):
        self.group = group
        super().__init__(loop, group._fd)

    def _read(self):
        self.group._fill()

    def _due(self, slot, target):
        return slot is None or slot._tally > 0

    def _detach(self):
        if self.group._watch is self:
            self.group._watch = None

    def _unwatch(self):
        super()._unwatch()
        # Counts read and not handed out: a drain outside the loop sees them.
        if not self.group.closed:
            self.group._ring_if_pending()

    def close(self, error=None):
        """Stop watching; whoever still awaits learns the group is gone."""
        super().close(error or ValueError("cuflag group is closed"))


class _Hangup(_Reader):
    """A client's connection, watched for the daemon's hang-up and never
    read: at the peer's end the socket becomes readable (EOF), and a poll
    for POLLRDHUP tells that from a late reply waiting in it.

    The reader watches its own duplicate of the connection, not the
    client's fd: a resume (by this loop, another thread, or a call of the
    library that found the daemon gone) puts a new connection behind the
    client's fd number, and the kernel would drop a registration of the old
    one without a word. The duplicate keeps the old one open, so its
    hang-up is seen whoever resumed, and the watch then follows the client
    to its new connection.

    Once the daemon is gone (``gone``) the watch wakes every waiter (a wait
    looks at its flag itself meanwhile) and, while anything awaits, has the
    library resume every _RESUME_SPACING_S, in a worker thread so that the
    loop never blocks on a daemon that accepts and has not answered yet.
    Once resumed it watches the new connection and wakes the waiters again.
    """

    def __init__(self, client, loop):
        self.client = client
        self.paused = None  # the timer that resumes a paused reader
        self.gone = False
        self.error = None  # why resuming cannot succeed (ESTALE), once known
        self.resumer = None  # the task resuming while the daemon is gone
        fd = client._conn.dup()
        self.ino = os.fstat(fd).st_ino
        super().__init__(loop, fd)

    def _readable(self):
        if self._moved():
            self._follow()
            return
        # Not a resume: the same connection is readable.
        self.loop.remove_reader(self.fd)
        if not _hung_up(self.fd):
            # A late reply: readable until the next request drops it.
            self.paused = self.loop.call_later(_HANGUP_RECHECK_S, self._rewatch)
            return
        # Gone: the dead connection would be readable at every turn.
        # Waiters that still need the daemon come back and start the resumer.
        self.paused = False
        self.gone = True
        self._wake()

    def _rewatch(self):
        self.paused = None
        self.loop.add_reader(self.fd, self._readable)

    def _moved(self):
        """Whether the client's fd holds another connection than the one
        watched: a resume has been made."""
        try:
            return os.fstat(self.client._fd).st_ino != self.ino
        except OSError:
            return False  # closed under us: close() follows

    def check(self):
        """Follow a resume made elsewhere (Client.reconnect())."""
        if not self.closed and self._moved():
            self._follow()

    def _follow(self):
        """Watch the client's new connection; the waiters go on with it."""
        self._unwatch()
        self.client._conn.close_dup(self.fd)
        self.fd = self.client._conn.dup()
        self.ino = os.fstat(self.fd).st_ino
        self.gone = False
        self.error = None
        self.loop.add_reader(self.fd, self._readable)
        self._wake()

    def add(self, fut, target=None):
        super().add(fut, target)
        if self.gone:
            self._start_resumer()

    def _start_resumer(self):
        if self.resumer is None and self.waiters:
            self.resumer = self.loop.create_task(self._resume())

    async def _resume(self):
        """While gone and awaited: a resume attempt every _RESUME_SPACING_S
        (every _RESUME_FATAL_SPACING_S once the daemon that came back
        refused the client: only another daemon will take it)."""
        try:
            while self.gone and not self.closed:
                if self._moved():
                    self._follow()
                    return
                if not self.waiters:
                    return  # started again by the next waiter
                rc = await self.loop.run_in_executor(None, self.client._try_resume)
                if rc == 0:
                    continue  # found moved at the top
                if rc in _RESUME_FATAL and self.error is None:
                    self.error = _lib.error(-rc)
                    self._wake()
                await asyncio.sleep(_RESUME_SPACING_S if self.error is None
                                    else _RESUME_FATAL_SPACING_S)
        finally:
            self.resumer = None

    def next_event(self, timeout=None):
        """A future that completes at the watch's next change (hang-up,
        resume, an error found) or after timeout seconds."""
        fut = self.loop.create_future()
        self.add(fut)
        if timeout is not None:
            timer = self.loop.call_later(timeout, _complete, fut)
            fut.add_done_callback(lambda _: timer.cancel())
        return fut

    def _detach(self):
        watches = self.client._hangup_watches
        if watches.get(self.loop) is self:
            del watches[self.loop]

    def _unwatch(self):
        if self.paused is None:
            if not self.loop.is_closed():
                self.loop.remove_reader(self.fd)
        elif self.paused is not False:
            self.paused.cancel()
        self.paused = None

    def close(self, error=None):
        if self.closed:
            return
        if self.resumer is not None and not self.loop.is_closed():
            self.resumer.cancel()
        super().close(error)
        self.client._conn.close_dup(self.fd)


def _complete(fut):
    if not fut.done():
        fut.set_result(None)


def _hung_up(fd):
    """Whether the peer of the connection fd has hung up (never reads it)."""
    p = select.poll()
    p.register(fd, select.POLLRDHUP)
    return any(ev & _POLL_HANGUP for _, ev in p.poll(0))


def bound_elsewhere(slot, loop):
    """Whether the slot's watch belongs to another loop that still runs."""
    watch = slot._watch
    return watch is not None and watch.loop is not loop and not watch.loop.is_closed()


def _watch_of(owner, loop, sticky, make):
    """owner's watch (a slot's or a group's) in the loop, started on first
    need. A watch left by a loop that has closed (a sticky one outlives
    asyncio.run()) is dropped."""
    watch = owner._watch
    if watch is not None and watch.loop is not loop and watch.loop.is_closed():
        watch.close()
        watch = None
    if watch is None:
        owner._handle()
        watch = owner._watch = make(owner, loop)
    elif watch.loop is not loop:
        raise RuntimeError(f"cuflag {type(owner).__name__.lower()} is awaited in another "
                           "event loop")
    watch.sticky |= sticky
    return watch


def _slot_watch(slot, loop, sticky):
    """The watch of the slot's eventfd, or of its group's."""
    if slot._group is not None:
        slot._handle()
        return _watch_of(slot._group, loop, sticky, _GroupWatch)
    return _watch_of(slot, loop, sticky, _Watch)


def _hangup_watch(client, loop, sticky):
    """The client's hang-up watch in the loop, started on first need: one
    per loop, whichever slots of the client are awaited there."""
    watch = client._hangup_watches.get(loop)
    if watch is None:
        for old in [w for w in client._hangup_watches.values() if w.loop.is_closed()]:
            old.close()
        client._handle()
        watch = client._hangup_watches[loop] = _Hangup(client, loop)
    watch.sticky |= sticky
    return watch


async def _next_signal(watch, hangup, slot=None, target=None):
    """Return once the slot's flag reached target (None: once the watch has
    a count for the slot, or for any slot of a group when slot is None), or
    at the daemon's hang-up."""
    signal = hangup.loop.create_future()
    watch.add(signal, target, slot)
    hangup.add(signal)
    try:
        # What lands between the caller's check and the watch's start is
        # caught by the readiness (the counter stays readable) unless another
        # thread consumed it: look once more now that the watch is on.
        if target is not None and landed(slot, target):
            return
        await signal
    finally:
        watch.discard(signal)
        hangup.discard(signal)


async def _until_event(hangup, timeout):
    """Sleep until the hang-up watch changes (a resume), at most timeout."""
    fut = hangup.next_event(timeout)
    try:
        await fut
    finally:
        hangup.discard(fut)


async def wait(slot, target, spin_us=0, sticky=False):
    """Slot.wait_async(): the flag first (spinning up to spin_us), the
    eventfd only when needed, the flag itself while the daemon is gone (it
    is resumed meanwhile). sticky keeps the slot's watch in the loop once
    nobody awaits."""
    # The flag first, straight from memory: no library call when it is there.
    if landed(slot, target) or (spin_us > 0 and spin(slot, target, spin_us)):
        return
    client = slot._client
    loop = asyncio.get_running_loop()
    delay = _GONE_SLEEP_FIRST_S
    while not slot.reached(target):
        hangup = _hangup_watch(client, loop, sticky)
        client._awaiting += 1
        try:
            if hangup.gone:
                # No signal comes: look at the flag after each of growing
                # sleeps, and go back to the eventfd once resumed.
                await _until_event(hangup, delay)
                delay = min(delay * 2, _GONE_SLEEP_MAX_S)
            else:
                delay = _GONE_SLEEP_FIRST_S
                await _next_signal(_slot_watch(slot, loop, sticky), hangup, slot, target)
        finally:
            client._awaiting -= 1


def completions(slot):
    """Slot.completions(): counts as consume() returns them. While the
    daemon is gone it waits for the resume, up to the client's resume
    timeout, then raises ConnectionError(ENOTCONN).

    After the first consume() the library is not asked again from the loop:
    the slot's watch reads the counter into the tally at each doorbell, and
    a count is taken from there. A consume() that finds nothing while the
    daemon is away tries to resume, and that attempt would block the loop
    on a listener that has not answered yet (a socket unit while the daemon
    restarts); the loop's own attempts run in a worker thread."""
    return _counts(slot._client, slot.consume, slot._take,
                   lambda loop: _slot_watch(slot, loop, False), slot)


def group_completions(group):
    """Group.__aiter__(): Completion records, one at a time, from what the
    group's watch drains at each doorbell (and, first, what waits now)."""
    def first():
        group._fill()
        return group._pop()

    return _counts(group._client, first, group._pop,
                   lambda loop: _watch_of(group, loop, False, _GroupWatch))


async def _counts(client, first, take, watch, slot=None):
    """Yield what first(), then take() hands out (when not empty), waiting
    on watch(loop) between them, across restarts as completions() says."""
    loop = asyncio.get_running_loop()
    deadline = None  # while the daemon is gone: when to give up
    got = first()
    while True:
        if got:
            yield got
            got = take()
            continue
        hangup = _hangup_watch(client, loop, False)
        if not hangup.gone:
            deadline = None
            await _next_signal(watch(loop), hangup, slot)
            got = take()
            continue
        if hangup.error is not None:
            raise hangup.error
        if deadline is None:
            timeout = client.resume_timeout
            deadline = math.inf if timeout is None else loop.time() + timeout
        left = deadline - loop.time()
        if left <= 0:
            raise _lib.error(errno.ENOTCONN, "cuflagd went away and did not come back "
                             "within the client's resume timeout")
        try:
            # What the old daemon rang before it went still comes through.
            async with asyncio.timeout(None if deadline == math.inf else left):
                await _next_signal(watch(loop), hangup, slot)
        except TimeoutError:
            pass
        got = take()


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
                client._resumed()
                return
            delay = retry_interval
        await asyncio.sleep(delay)
