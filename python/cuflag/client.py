# SPDX-License-Identifier: MIT
"""A connection to cuflagd."""

import asyncio
import ctypes
import errno
import functools
import math
import os
import select
import threading
import weakref

from . import _lib
from . import _timeout
from . import aio
from . import group as _group
from . import stream as _stream
from .slot import Slot

# How long synchronize() and synchronize_async() look at the flag before
# they block, by default; an await spins only while no other await of the
# client is outstanding in its loop. Chosen on an
# H200 with examples/python/serve.py (docs/BENCHMARKS.md): work that
# completes within it costs neither a daemon wake-up nor a loop turn.
DEFAULT_SPIN_US = 50

# How long a call that finds the daemon gone waits for one to come back,
# by default (the library's CUFLAG_RESUME_TIMEOUT_MS).
DEFAULT_RESUME_TIMEOUT_S = 30.0
_INT_MAX_MS = 2**31 - 1


class _Connection:
    """The library's client handle, shared by the finalizers of a Client
    and of its slots, so that they are safe in whatever order the garbage
    collector runs them: a slot is released only while the client is
    still connected (disconnecting frees every slot). The lock keeps a
    resume made in a worker thread (reconnect_async()) and the disconnect
    apart."""

    __slots__ = ("ptr", "busy")

    def __init__(self, ptr):
        self.ptr = ptr
        self.busy = threading.Lock()

    def disconnect(self):
        with self.busy:
            ptr, self.ptr = self.ptr, None
        if ptr is not None:
            _lib.lib().cuflag_disconnect(ptr)

    def release(self, slot_ptr):
        if self.ptr is not None:
            _lib.lib().cuflag_slot_release(slot_ptr)

    def destroy_group(self, held):
        """Release the slots of a group still held (held.slots), then the
        group (held.ptr): the library wants its slots gone first."""
        slots, held.slots = held.slots, set()
        if self.ptr is not None:
            for ptr in slots:
                _lib.lib().cuflag_slot_release(ptr)
            _lib.check(_lib.lib().cuflag_group_destroy(held.ptr))  # its slots are gone
        held.ptr = None

    def release_grouped(self, held, slot_ptr):
        """Release a slot of a group unless the group released it already."""
        try:
            held.slots.remove(slot_ptr)
        except KeyError:
            return
        self.release(slot_ptr)

    def reconnect(self):
        """cuflag_reconnect(), unless the client was closed meanwhile:
        0 or a negative errno."""
        with self.busy:
            if self.ptr is None:
                return -errno.ENOTCONN
            return _lib.lib().cuflag_reconnect(self.ptr)


class Client:
    """A connection to cuflagd and the region it shares with this process.

    ``socket_path`` (str, bytes or path-like) names the daemon's socket;
    None means ``$CUFLAG_SOCKET``, else the node daemon at
    ``/run/cuflagd/cuflagd.sock`` where it answers and lets this user in,
    else the user's own at ``$XDG_RUNTIME_DIR/cuflag/cuflagd.sock``, which
    the library starts when none runs (``CUFLAG_AUTOSPAWN=0``: it does not).
    Raises OSError on failure, naming the socket (``filename``, when one was
    named; else the message names each socket tried) and saying what to do: FileNotFoundError or ConnectionRefusedError when no daemon
    listens there, PermissionError when the socket is not open to this user
    (join the socket's group: ``cuflag`` as the packages set it up), OSError
    with errno ENOTSOCK when the path names a directory or a file, not the
    socket,
    TimeoutError when the daemon does not answer. FileNotFoundError naming
    the library when libcuflag-client cannot be loaded.

    When the daemon restarts (an upgrade, a crash, SIGKILL, the watchdog),
    the client resumes by itself with the daemon that listens next on the
    same socket: blocking calls through the library, awaits through their
    event loop. Slots keep their ids, flags, eventfds and counts; nothing
    is counted twice. ``resume_timeout`` (seconds, None: for ever; default
    DEFAULT_RESUME_TIMEOUT_S) bounds how long a call that needs the daemon
    waits for it to come back before it raises ConnectionError(ENOTCONN).

    Use it as a context manager, or call close(): closing releases every
    slot the client holds. A client that is garbage-collected unclosed is
    closed then.

    ``spin_us`` is the default spin budget of synchronize() and
    synchronize_async(): how many microseconds they look at the flag
    before they block (DEFAULT_SPIN_US when None).
    """

    def __init__(self, socket_path=None, spin_us=None, resume_timeout=DEFAULT_RESUME_TIMEOUT_S):
        if spin_us is not None and spin_us < 0:
            raise ValueError("spin_us must be None or >= 0")
        _resume_ms(resume_timeout)  # checked before connecting
        self.spin_us = DEFAULT_SPIN_US if spin_us is None else spin_us
        lib = _lib.lib()
        path = None if socket_path is None else os.fsencode(socket_path)
        ptr = _lib.client_p()
        rc = lib.cuflag_connect(path, ctypes.byref(ptr))
        if rc < 0:
            raise _lib.connect_error(rc, path)
        self._conn = _Connection(ptr)
        self._finalizer = weakref.finalize(self, self._conn.disconnect)
        self._fd = lib.cuflag_client_fd(ptr)  # the number stays across resumes
        self._resume_timeout = None
        self.resume_timeout = resume_timeout
        self._dispatchers = {}  # event loop -> its aio.Dispatcher of the client
        # Slots are freed by the library when the client goes: keep track
        # of them so that none is used after that.
        self._slots = weakref.WeakSet()
        self._groups = weakref.WeakSet()
        # synchronize(): one slot per stream (and per event loop running at
        # once), kept until the client closes.
        self._streams = {}
        self._streams_lock = threading.Lock()

    def _handle(self):
        if self._conn.ptr is None:
            raise ValueError("cuflag client is closed")
        return self._conn.ptr

    @property
    def closed(self):
        return self._conn.ptr is None

    @property
    def resume_timeout(self):
        """How long, in seconds, a call that finds the daemon gone waits for
        one to come back before it raises ConnectionError(ENOTCONN): an
        acquire, an arm that finds the arm queue full, an iteration of
        completions(). None (or inf) waits for ever. Waits (wait(),
        wait_async(), synchronize()) are not bounded by it: they look at
        the flag meanwhile. Settable at any time."""
        return self._resume_timeout

    @resume_timeout.setter
    def resume_timeout(self, seconds):
        ms = _resume_ms(seconds)
        _lib.check(_lib.lib().cuflag_client_set_resume_timeout(self._handle(), ms))
        self._resume_timeout = None if ms < 0 else float(seconds)

    @property
    def fd(self):
        """The connection to the daemon, for an event loop that wants to
        know when the daemon went away: poll it for POLLRDHUP (EPOLLRDHUP),
        or for readability, which the hang-up brings. Never read or write
        it, nor close it: it stays owned by the client. Nothing has to be
        done about a hang-up: the client resumes by itself.

        The number stays the same across resumes, but the connection behind
        it is new after one: an epoll (or selector) registration of the old
        connection is dropped by the kernel, so a loop that watches it must
        register it again once it saw the hang-up (and the resume:
        ``daemon_gone`` False again). The awaits of this package watch the
        library's dispatch fd instead (cuflag_client_dispatch()), which
        follows the client across resumes."""
        self._handle()
        return self._fd

    @property
    def daemon_gone(self):
        """Whether the daemon behind the client's connection has hung up
        and no resume has been made since (a poll that never reads it)."""
        self._handle()
        p = select.poll()
        p.register(self._fd, select.POLLRDHUP)
        return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR)
                   for _, ev in p.poll(0))

    def reconnect(self):
        """Resume with the daemon now, instead of at the next call that
        needs it: connect to the same socket and hand the daemon listening
        there this client's region and every slot's eventfd. Slots keep
        their ids, flags, eventfds and counts: what landed or was armed
        while no daemon ran is signalled now, each completion exactly once
        (whatever stopped the old daemon, SIGKILL included). ``fd`` keeps
        its number and is a new connection afterwards; the awaits in
        progress go on with it. The client does all this by itself when a
        call finds the daemon gone: call this only to resume sooner.

        Safe while other threads and event loops use the client; it is one
        round trip to the daemon, blocking, made once (no retry).

        Raises OSError: ConnectionRefusedError or FileNotFoundError while
        no daemon listens yet, EBUSY (the daemon still serves this client:
        it did not go away), ESTALE (the daemon listening now has another
        region layout: other --slots-per-client or --queue-size; connect
        anew), EOPNOTSUPP (the daemon runs --slab cuda-ipc, whose flags died
        with the old daemon), EUSERS, EPROTO, TimeoutError, ... On failure
        the client is as it was.
        """
        self._handle()
        _lib.check(self._conn.reconnect())

    def _dispatcher_in(self, loop, sticky=False):
        """The loop's driver of the library's dispatch call for this client
        (aio.Dispatcher), made on first need."""
        disp = self._dispatchers.get(loop)
        if disp is None:
            for old in [d for d in self._dispatchers.values() if d.loop.is_closed()]:
                old.close()
            lib = _lib.lib()
            fd = _lib.check(lib.cuflag_client_dispatch_fd(self._handle()))
            ms = ctypes.c_int()

            def timeout():
                _lib.check(lib.cuflag_client_dispatch_timeout(self._handle(), ctypes.byref(ms)))
                return ms.value

            disp = self._dispatchers[loop] = aio.Dispatcher(
                loop, fd, lambda: lib.cuflag_client_dispatch(self._handle()), timeout,
                lambda: self._dispatchers.pop(loop, None))
            disp.ready()
        disp.sticky |= sticky
        return disp

    async def reconnect_async(self, retry_interval=0.05, timeout=None):
        """reconnect() for the running loop (in a worker thread: the loop
        does not block), again every ``retry_interval`` seconds while no
        daemon listens (ConnectionRefusedError, FileNotFoundError). Returns
        once the client is served by a daemon again, whether this call or
        the client itself resumed it (EBUSY from the daemon means that).
        ``timeout`` in seconds, None for no limit: TimeoutError once it
        passes without a daemon. Other errors as reconnect(), at once. Like
        reconnect(), only to resume sooner than the client would."""
        await aio.reconnect(self, retry_interval, timeout)

    @property
    def epoch(self):
        """The daemon's epoch: it changes at every daemon start."""
        return _lib.lib().cuflag_client_epoch(self._handle())

    def acquire(self):
        """One slot. If the daemon went away, the call first resumes with
        the one that listens now, waiting up to ``resume_timeout``. Raises
        OSError: ENOSPC (the daemon's per-client limit), EDQUOT (this
        user's slot limit), EBUSY (its request-rate limit), EMFILE,
        ConnectionError (ENOTCONN: no daemon came back within
        ``resume_timeout``), ESTALE (the daemon that came back has another
        region layout), TimeoutError."""
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

    def import_slot(self, fd):
        """A Slot that watches the slot ``fd`` names: an int fd (or an
        object with fileno()) from Slot.export(), in this or another
        process; ``fd`` stays the caller's. Its eventfd rings and consume()
        counts with the exporter's completions, from now on, each exactly
        once (across daemon restarts too); wait() and wait_async() take the
        exporter's values. It cannot be armed, completed, signalled or
        exported (OSError EPERM); once the exporter's slot is released (or
        its process goes), wait and consume raise BrokenPipeError (EPIPE).
        It counts against this client's quotas. Raises OSError: EINVAL (not
        a live handle of this daemon's), EBADF (a closed fd), or an error
        of acquire()."""
        ptr = _lib.slot_p()
        fd = fd if isinstance(fd, int) else fd.fileno()
        _lib.check(_lib.lib().cuflag_slot_import(self._handle(), fd, ctypes.byref(ptr)))
        slot = Slot(self, ptr)
        self._slots.add(slot)
        return slot

    def group(self):
        """A new Group: slots that share one eventfd and one completion
        ring (see Group). Use it as a context manager, or close() it.
        Raises OSError: ENOSPC (the client has as many groups as the
        daemon's --groups-per-client allows), EMFILE, or an error of
        acquire()."""
        group = _group.Group(self)
        self._groups.add(group)
        return group

    def _stream_slot(self, handle, loop=None):
        """The slot that synchronizes the stream: one per stream, made on
        first need; an await from a second loop running at the same time
        gets its own (a slot's eventfd is watched by one loop)."""
        slot = self._streams.get(handle)
        if slot is None or (loop is not None and aio.bound_elsewhere(slot._watch, loop)):
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
        if _lib.cuda_check(_lib.lib().cuflag_cuda_capturing(handle)):
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
        holding up the loop that long at most, but only while no other
        await of the client is outstanding in the loop (then it would hold
        up their completions, and the work they would queue next). Errors
        as synchronize(): TimeoutError once ``timeout`` seconds pass,
        OSError(EIO) when a device fault stopped the work (the library
        probes the stream while work is outstanding, at the timeouts of its
        dispatch call). It carries on across daemon restarts, as
        Slot.wait_async() does; the signal is an arm(), which blocks while
        the daemon is away and the arm queue is full.
        """
        spin_us = self._spin(spin_us)
        slot, target = self._signal_stream(stream, asyncio.get_running_loop())
        # The readers stay while the loop runs: a stream is awaited again and again.
        doorbell = functools.partial(slot._doorbell_in, sticky=True)
        dispatcher = functools.partial(self._dispatcher_in, sticky=True)
        async with _timeout.timeout(timeout):
            await aio.wait(slot, target, spin_us, doorbell, dispatcher)

    def close(self):
        """Release every slot and group and hang up. Every Slot and Group
        of this client is unusable afterwards. Closing twice is harmless."""
        self._streams.clear()
        _group.forget_all(self._groups)
        for slot in list(self._slots):
            slot._forget()
        for disp in list(self._dispatchers.values()):
            disp.close(ValueError("cuflag client is closed"))
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"epoch={self.epoch:#x}"
        return f"<cuflag.Client {state}>"


def _resume_ms(seconds):
    """A resume timeout in seconds (None or inf: for ever) in the library's
    ms (-1: for ever)."""
    if seconds is None or seconds == math.inf:
        return -1
    if not seconds >= 0:  # NaN too
        raise ValueError("resume_timeout must be None or >= 0")
    return min(math.ceil(seconds * 1000), _INT_MAX_MS)
