# SPDX-License-Identifier: MIT
"""A connection to cuflagd."""

import ctypes
import os
import select
import weakref

from . import _lib
from .slot import Slot

_POLL_HANGUP = select.POLLRDHUP | select.POLLHUP | select.POLLERR


class _Connection:
    """The library's client handle, shared by the finalizers of a Client
    and of its slots, so that they are safe in whatever order the garbage
    collector runs them: a slot is released only while the client is
    still connected (disconnecting frees every slot)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr

    def disconnect(self):
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            _lib.lib().cuflag_disconnect(ptr)

    def release(self, slot_ptr):
        if self.ptr is not None:
            _lib.lib().cuflag_slot_release(slot_ptr)


class Client:
    """A connection to cuflagd and the region it shares with this process.

    ``socket_path`` (str, bytes or path-like) names the daemon's socket;
    None means ``$CUFLAG_SOCKET``, else ``/run/cuflagd/cuflagd.sock``.
    Raises OSError on failure: FileNotFoundError or ConnectionRefusedError
    when no daemon listens there, PermissionError when the socket is not
    open to this user (join group ``cuflag``), TimeoutError when the daemon
    does not answer.

    Use it as a context manager, or call close(): closing releases every
    slot the client holds. A client that is garbage-collected unclosed is
    closed then.
    """

    def __init__(self, socket_path=None):
        lib = _lib.lib()
        path = None if socket_path is None else os.fsencode(socket_path)
        ptr = _lib.client_p()
        _lib.check(lib.cuflag_connect(path, ctypes.byref(ptr)))
        self._conn = _Connection(ptr)
        self._fd = lib.cuflag_client_fd(ptr)
        self._gone = False  # the daemon hung up: it never comes back
        self._hangup_watches = {}  # event loop -> its reader of the fd
        # Slots are freed by the library when the client goes: keep track
        # of them so that none is used after that.
        self._slots = weakref.WeakSet()
        self._finalizer = weakref.finalize(self, self._conn.disconnect)

    def _handle(self):
        if self._conn.ptr is None:
            raise ValueError("cuflag client is closed")
        return self._conn.ptr

    @property
    def closed(self):
        return self._conn.ptr is None

    @property
    def fd(self):
        """The connection to the daemon, for an event loop to learn that
        the daemon went away: poll it for POLLRDHUP (EPOLLRDHUP), or for
        readability, which the hang-up brings. Never read or write it, nor
        close it: it stays owned by the client. Slot flags keep working
        without the daemon, but no eventfd is signalled any more;
        Slot.wait() and Slot.wait_async() then look at the flag itself."""
        self._handle()
        return self._fd

    @property
    def daemon_gone(self):
        """Whether the daemon has hung up this connection (found by a poll
        that never reads it). A daemon started again needs a new Client."""
        self._handle()
        return self._check_hangup()

    def _check_hangup(self):
        if not self._gone and self._conn.ptr is not None:
            p = select.poll()
            p.register(self._fd, select.POLLRDHUP)
            self._gone = any(ev & _POLL_HANGUP for _, ev in p.poll(0))
        return self._gone

    @property
    def epoch(self):
        """The daemon's epoch: it changes at every daemon start."""
        return _lib.lib().cuflag_client_epoch(self._handle())

    def acquire(self):
        """One slot. Raises OSError: ENOSPC (the daemon's per-client
        limit), EBUSY (its request-rate limit), EMFILE, ENOTCONN/EPIPE
        (the daemon hung up), TimeoutError."""
        return self.acquire_many(1)[0]

    def acquire_many(self, n):
        """A list of n slots, in as few round trips as possible; all or
        nothing. Errors as acquire(), and ValueError when n < 1."""
        if n < 1:
            raise ValueError("acquire_many needs n >= 1")
        ptrs = (_lib.slot_p * n)()
        _lib.check(_lib.lib().cuflag_slots_acquire(self._handle(), n, ptrs))
        slots = [Slot(self, _lib.slot_p(p)) for p in ptrs]
        self._slots.update(slots)
        return slots

    def close(self):
        """Release every slot and hang up. Every Slot of this client is
        unusable afterwards. Closing twice is harmless."""
        for slot in list(self._slots):
            slot._forget()
        for watch in list(self._hangup_watches.values()):
            watch.close(ValueError("cuflag client is closed"))
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"epoch={self.epoch:#x}"
        return f"<cuflag.Client {state}>"
