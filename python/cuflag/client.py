# SPDX-License-Identifier: MIT
"""A connection to cuflagd."""

import ctypes
import os
import select
import weakref

from . import _lib
from . import aio
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
        self._gone = False  # the daemon hung up (until reconnect())
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
        Slot.wait() and Slot.wait_async() then look at the flag itself.
        reconnect() replaces it: ask again afterwards."""
        self._handle()
        return self._fd

    @property
    def daemon_gone(self):
        """Whether the daemon has hung up this connection (found by a poll
        that never reads it). False again after reconnect()."""
        self._handle()
        return self._check_hangup()

    def _check_hangup(self):
        if not self._gone and self._conn.ptr is not None:
            p = select.poll()
            p.register(self._fd, select.POLLRDHUP)
            self._gone = any(ev & _POLL_HANGUP for _, ev in p.poll(0))
        return self._gone

    def reconnect(self):
        """After the daemon restarted on the same socket: hand the new
        daemon this client's region and every slot's eventfd, and go on
        with it. Slots keep their ids, flags, eventfds and counts: what
        landed or was armed while no daemon ran is signalled now, each
        completion once (after a clean stop; a daemon killed while it
        signalled a slot may count that signal again). ``fd`` is a new
        connection afterwards and ``daemon_gone`` is False; a wait_async()
        in progress goes on, watching the new connection.

        Raises OSError: ConnectionRefusedError or FileNotFoundError while
        no daemon listens yet (call again later, or reconnect_async()),
        EOPNOTSUPP (the daemon runs --slab cuda-ipc), EINVAL (the new
        daemon's settings give another region layout), EPROTO, EUSERS,
        EBUSY, TimeoutError, ... On failure the client is as it was.

        Nothing else may use the client or its slots meanwhile: call it
        from the thread that runs the event loop awaiting them, if any.
        It is one round trip to the daemon, blocking.
        """
        ptr = self._handle()
        lib = _lib.lib()
        # The library closes the old connection: no loop may watch it then.
        watches = list(self._hangup_watches.values())
        for watch in watches:
            watch.suspend()
        try:
            rc = lib.cuflag_reconnect(ptr)
        finally:
            fd = lib.cuflag_client_fd(ptr)
            for watch in watches:
                watch.resume(fd)
        _lib.check(rc)
        self._fd = fd
        self._gone = False

    async def reconnect_async(self, retry_interval=0.05, timeout=None):
        """reconnect() in the running loop, again every ``retry_interval``
        seconds while no daemon listens (ConnectionRefusedError,
        FileNotFoundError). ``timeout`` in seconds, None for no limit:
        TimeoutError once it passes without a daemon. Other errors as
        reconnect(), at once."""
        await aio.reconnect(self, retry_interval, timeout)

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
