# SPDX-License-Identifier: MIT
"""Many slots, one eventfd, one completion ring."""

import collections
import ctypes
import os
import threading
import weakref

from . import _lib
from . import aio
from .slot import Slot

# Records taken from the library per call: an event loop's reader takes at
# most this many per readiness (the group's fd stays readable while more
# wait), so that a burst does not hold up the loop.
_BATCH = 1024
_ONE = (1).to_bytes(8, "little")

Completion = collections.namedtuple("Completion", ["slot", "completions"])
Completion.__doc__ = """A slot of a group and how many times it completed
since its completions were last handed out (> 0)."""


class _Held:
    """What the library must free when the group goes (its handle and the
    slots still held), shared with the finalizers of the group and of its
    slots, so that they are safe in whatever order the collector runs them."""

    __slots__ = ("ptr", "slots")

    def __init__(self, ptr):
        self.ptr = ptr
        self.slots = set()  # slot handles, as ints


class Group:
    """Many slots of a Client with one eventfd (``fd``) and one completion
    ring, from Client.group(): the daemon holds one fd for the group, not
    one per slot, and a program reads one fd per pass of the daemon's
    scanner, however many of the slots completed.

    acquire() gives slots of the group; they arm, signal, wait, consume and
    await as any slot, but have no eventfd of their own (Slot.fd raises
    OSError(EOPNOTSUPP)). drain() hands out which of them completed and how
    many times, and ``async for slot, n in group`` does the same in an
    asyncio loop. Every completion is handed out exactly once, whichever
    way it is taken (drain(), the iteration, or a slot's consume() or
    completions()), also when the ring overflowed and across daemon
    restarts.

    The group holds its slots: one is released by Slot.release(), or when
    the group is closed (close(), the end of a ``with`` block, the client's
    close(), or the group's collection), not when the program drops it.
    """

    def __init__(self, client):
        lib = _lib.lib()
        ptr = _lib.group_p()
        _lib.check(lib.cuflag_group_create(client._handle(), ctypes.byref(ptr)))
        self._client = client
        self._held = _Held(ptr)
        self._finalizer = weakref.finalize(self, client._conn.destroy_group, self._held)
        self._fd = lib.cuflag_group_fd(ptr)
        self._lock = threading.Lock()  # drains, and slots joining or leaving
        self._slots = {}  # handle (int) -> Slot, to name what a drain returns
        self._pending = {}  # slots with a tally to hand out, in order
        self._records = (_lib.Completion * _BATCH)()
        self._watch = None  # the event loop's aio.Doorbell, while something awaits

    def _handle(self):
        if self._held.ptr is None:
            raise ValueError("cuflag group is closed")
        return self._held.ptr

    @property
    def closed(self):
        return self._held.ptr is None

    @property
    def fd(self):
        """The group's eventfd: readable while completions of its slots
        wait. Poll it (select, selectors, epoll), then drain(); never read
        it yourself, nor close it. In an asyncio loop, ``async for`` and the
        awaits of its slots watch it themselves (add_reader): do not add a
        reader of your own in that loop."""
        self._handle()
        return self._fd

    def fileno(self):
        """The eventfd, so that a Group can go straight into select/selectors."""
        return self.fd

    def acquire(self, n=None):
        """A slot of the group; with ``n``, a list of n slots, in as few
        round trips as possible, all or nothing. Errors as Client.acquire(),
        and ValueError when n < 1 or the group is closed."""
        if n is not None and n < 1:
            raise ValueError("acquire needs n >= 1")
        count = 1 if n is None else n
        ptrs = (_lib.slot_p * count)()
        # Not under the lock: the call may wait for the daemon to come back.
        _lib.check(_lib.lib().cuflag_group_slots_acquire(self._handle(), count, ptrs))
        slots = [Slot(self._client, _lib.slot_p(p), self) for p in ptrs]
        with self._lock:
            for slot in slots:
                self._slots[slot._ptr.value] = slot
                self._held.slots.add(slot._ptr.value)
        self._client._slots.update(slots)
        return slots[0] if n is None else slots

    def import_slot(self, fd):
        """Client.import_slot() into the group: its completions come
        through drain() and ``async for`` like those of the group's other
        slots; when the exporter's slot goes, drain() hands out one
        Completion of 0 for it and its consume() raises BrokenPipeError."""
        ptr = _lib.slot_p()
        fd = fd if isinstance(fd, int) else fd.fileno()
        _lib.check(_lib.lib().cuflag_group_slot_import(self._handle(), fd, ctypes.byref(ptr)))
        slot = Slot(self._client, ptr, self)
        with self._lock:
            self._slots[slot._ptr.value] = slot
            self._held.slots.add(slot._ptr.value)
        self._client._slots.add(slot)
        return slot

    def _drop(self, slot):
        """Slot.release(): no drain names the slot any more, and those
        awaiting it learn it is released."""
        with self._lock:
            self._slots.pop(slot._ptr.value, None)
            self._pending.pop(slot, None)
        if self._watch is not None:
            self._watch.wake(lambda s, _: s is slot, ValueError("cuflag slot is released"))

    def _take_from_library(self, room):
        """Up to room records from the library, added to the tallies of their
        slots (lock held); whether it filled them all (more may wait)."""
        n = _lib.check(_lib.lib().cuflag_group_drain(self._handle(), self._records,
                                                     min(room, _BATCH)))
        for rec in self._records[:n]:
            slot = self._slots.get(rec.slot)
            if slot is None:
                continue  # released meanwhile: its count went with it
            with slot._tally_lock:
                slot._tally += rec.completions
            self._pending[slot] = None
        return n == min(room, _BATCH)

    def _fill(self):
        """The event loop's reader: take what the library has into the
        tallies, one batch per readiness."""
        with self._lock:
            self._take_from_library(_BATCH)

    def _count_first(self, counts, slot=None):
        """Move the tally of the first pending slot (or of slot) into
        counts (lock held)."""
        if slot is None:
            slot = next(iter(self._pending))
        del self._pending[slot]
        n = slot._take()
        if n:
            counts[slot] = counts.get(slot, 0) + n

    def _ring_if_pending(self):
        """Keep the fd readable while tallies wait for a drain: those left
        by drain(max), or read by a loop's reader that stops watching."""
        if self._pending:
            try:
                os.write(self._fd, _ONE)
            except OSError:
                pass  # the counter is full: readable anyway

    def _pop(self):
        """One record from the tallies, or None."""
        counts = {}
        with self._lock:
            while self._pending and not counts:
                self._count_first(counts)
        return Completion(*counts.popitem()) if counts else None

    def drain(self, max=_BATCH):
        """A list of up to ``max`` Completion records (slot, completions):
        the slots of the group that completed since their completions were
        last handed out, each with how many times (> 0); [] when none. Does
        not block. When more wait than ``max`` allows, ``fd`` stays readable.
        Several threads may drain one group. Counts that an await of the
        group or of its slots read off the fd first come first. When it
        finds nothing while the daemon is away, it makes one attempt to
        resume the client (as Slot.consume() does), so that a program that
        polls ``fd`` and drains goes on after a restart.

        Raises ValueError (max < 1, the group is closed), OSError(ECHILD)
        (in a child of fork)."""
        if max < 1:
            raise ValueError("drain needs max >= 1")
        counts = {}
        with self._lock:
            self._handle()
            # What an await took off the fd first, then the library's.
            asked = False  # and it had no more
            while len(counts) < max:
                if not self._pending:
                    if asked:
                        break
                    # Asked again only while the library fills every batch.
                    asked = not self._take_from_library(max - len(counts))
                    continue
                self._count_first(counts)
            # A slot listed twice (taken by an await, and again since) comes once.
            for slot in [s for s in self._pending if s in counts]:
                self._count_first(counts, slot)
        self._ring_if_pending()
        if not counts:
            return self._resume_if_gone()
        return [Completion(slot, n) for slot, n in counts.items()]

    def _resume_if_gone(self):
        """A drain found nothing. While the daemon is gone nothing will
        ring the fd: have the library try to resume, as a consume() that
        finds nothing does (through a consume of one of the group's slots,
        which never waits behind another attempt); what that consume counts
        is this drain's record."""
        if not self._client.daemon_gone:
            return []
        with self._lock:
            slot = next(iter(self._slots.values()), None)
        if slot is None:
            return []
        n = slot.consume()
        return [Completion(slot, n)] if n else []

    def _doorbell_in(self, loop, sticky=False):
        """The reader of the group's eventfd in loop, made on first need."""
        self._handle()
        self._watch = aio.doorbell_for(self._watch, loop, "group", self._fd, self._fill,
                                       self._unwatched, ValueError("cuflag group is closed"),
                                       sticky)
        return self._watch

    def _unwatched(self):
        self._watch = None
        # Counts read and not handed out: a drain outside the loop sees them.
        if not self.closed:
            self._ring_if_pending()

    def __aiter__(self):
        """``async for slot, n in group``: completions() without a timeout."""
        return self.completions()

    def completions(self, timeout=None):
        """An async iterator of Completion records as drain() returns them,
        one at a time, waiting in the running loop (a reader on ``fd``)
        between them; ``timeout`` (seconds, None: none): TimeoutError once
        that long passes with no record. Several coroutines may iterate one
        group: each record goes to one of them. It carries on across daemon
        restarts as Slot.completions() does: ConnectionError (ENOTCONN) if
        no daemon came back within the client's ``resume_timeout``, OSError
        (ESTALE, EOPNOTSUPP) if the one that came back cannot take the
        client; nothing is lost then."""
        timeout = _lib.seconds("timeout", timeout)

        def first():
            self._fill()
            return self._pop()

        return aio.counts(first, self._pop, self._doorbell_in,
                          self._client._dispatcher_in, timeout)

    def _forget(self):
        """Make the group and its slots unusable; whoever calls this frees
        them."""
        with self._lock:
            slots, self._slots = list(self._slots.values()), {}
            self._pending.clear()
        for slot in slots:
            self._client._slots.discard(slot)
            slot._forget()
        if self._watch is not None:
            self._watch.close()
        self._client._groups.discard(self)

    def close(self):
        """Release every slot of the group and the group. Its Slots are
        unusable afterwards; closing twice is harmless."""
        if self.closed:
            return
        self._forget()
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return "<cuflag.Group closed>"
        return f"<cuflag.Group fd={self._fd} slots={len(self._slots)}>"


def forget_all(groups):
    """Client.close(): the library frees every group; make them unusable."""
    for group in list(groups):
        if not group.closed:
            group._forget()
            group._finalizer.detach()
            group._held.ptr = None
            group._held.slots.clear()
