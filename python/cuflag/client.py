# SPDX-License-Identifier: MIT
"""A connection to cuflagd."""

import asyncio
import ctypes
import os
import select
import threading
import weakref

from . import _lib
from . import aio
from . import stream as _stream
from .slot import Slot

# How long synchronize() and synchronize_async() look at the flag before
# they block, by default; an await spins only while nothing else in its loop
# is ready and no other await of the client is outstanding. Chosen on an
# H200 with examples/python/serve.py (docs/BENCHMARKS.md): work that
# completes within it costs neither a daemon wake-up nor a loop turn.
DEFAULT_SPIN_US = 50

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

    ``spin_us`` is the default spin budget of synchronize() and
    synchronize_async(): how many microseconds they look at the flag
    before they block (DEFAULT_SPIN_US when None).
    """

    def __init__(self, socket_path=None, spin_us=None):
        if spin_us is not None and spin_us < 0:
            raise ValueError("spin_us must be None or >= 0")
        self.spin_us = DEFAULT_SPIN_US if spin_us is None else spin_us
        lib = _lib.lib()
        path = None if socket_path is None else os.fsencode(socket_path)
        ptr = _lib.client_p()
        _lib.check(lib.cuflag_connect(path, ctypes.byref(ptr)))
        self._conn = _Connection(ptr)
        self._fd = lib.cuflag_client_fd(ptr)
        self._gone = False  # the daemon hung up (until reconnect())
        self._hangup_watches = {}  # event loop -> its reader of the fd
        self._awaiting = 0  # awaits of its slots outstanding (they stop spins)
        # Slots are freed by the library when the client goes: keep track
        # of them so that none is used after that.
        self._slots = weakref.WeakSet()
        # synchronize(): one slot per stream (and per event loop running at
        # once), kept until the client closes.
        self._streams = {}
        self._streams_lock = threading.Lock()
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

    def _stream_slot(self, handle, loop=None):
        """The slot that synchronizes the stream: one per stream, made on
        first need; an await from a second loop running at the same time
        gets its own (a slot's eventfd is watched by one loop)."""
        slot = self._streams.get(handle)
        if slot is None or (loop is not None and aio.bound_elsewhere(slot, loop)):
            key = handle if slot is None else (handle, loop)
            with self._streams_lock:
                slot = self._streams.get(key)
                if slot is None:
                    slot = self._streams[key] = self.acquire()
        return slot

    def _signal_stream(self, stream, loop=None):
        """Signal the stream's slot after its queued work: (slot, target)."""
        handle = _stream.handle(stream)
        # A capture would record the signal into the graph, to run at its
        # launches: not the work queued now.
        if _lib.check(_lib.lib().cuflag_cuda_capturing(handle)):
            raise RuntimeError("cannot synchronize a stream under graph capture")
        slot = self._stream_slot(handle, loop)
        return slot, slot._signal(handle)

    def _spin(self, spin_us):
        if spin_us is None:
            return self.spin_us
        if spin_us < 0:
            raise ValueError("spin_us must be None or >= 0")
        return spin_us

    def synchronize(self, stream, timeout=None, spin_us=None):
        """Block until everything queued on ``stream`` before the call has
        finished (what the stream's own synchronize does, without a thread
        spinning or blocking in the driver).

        ``stream``: as Slot.signal() takes it (an int CUstream handle, an
        object with ``__cuda_stream__()``, a torch, cupy or numba stream, a
        cuda-python CUstream). ``timeout`` in seconds, None for no limit.
        ``spin_us``: how long to look at the flag before blocking (None:
        the client's ``spin_us``).

        The client keeps one slot per stream it has seen, until it closes;
        any number of threads may synchronize the same stream at once.
        Raises TypeError (not a stream), RuntimeError (the stream is being
        captured into a graph), TimeoutError, OSError(EIO) (a device fault
        stopped the stream's work), OSError(ENODEV) (no driver, or no
        context for the stream), or the errors of acquire().
        """
        spin_us = self._spin(spin_us)
        slot, target = self._signal_stream(stream)
        slot.wait(target, timeout, spin_us)

    async def synchronize_async(self, stream, timeout=None, spin_us=None):
        """synchronize() for the running asyncio loop: returns once
        everything queued on ``stream`` before the call has finished.

        The loop watches one eventfd per stream (one reader, kept while the
        loop runs), whatever the number of coroutines awaiting the stream,
        and each wakes only once its own work is done. Before it yields it
        looks at the flag for ``spin_us`` (None: the client's ``spin_us``),
        holding up the loop that long at most, but only while nothing else
        in the loop is ready to run and no other await of the client is
        outstanding (then it would hold up their completions, and the work
        they would queue next). Errors as synchronize():
        TimeoutError once ``timeout`` seconds pass, OSError(EIO) when a
        device fault stopped the work (the stream is checked every 100 ms
        while awaited).
        """
        spin_us = self._spin(spin_us)
        slot, target = self._signal_stream(stream, asyncio.get_running_loop())
        if timeout is None:
            await aio.wait(slot, target, spin_us, sticky=True)
            return
        async with asyncio.timeout(timeout):
            await aio.wait(slot, target, spin_us, sticky=True)

    def close(self):
        """Release every slot and hang up. Every Slot of this client is
        unusable afterwards. Closing twice is harmless."""
        self._streams.clear()
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
