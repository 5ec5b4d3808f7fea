# SPDX-License-Identifier: MIT
"""A connection to cuflagd."""

import ctypes
import os
import weakref

from . import _lib
from .slot import Slot


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
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"epoch={self.epoch:#x}"
        return f"<cuflag.Client {state}>"
