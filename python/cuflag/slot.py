# SPDX-License-Identifier: MIT
"""One completion timeline: a flag and an eventfd (or its group's)."""

import ctypes
import errno
import math
import os
import threading
import time
import weakref

from . import _lib
from . import aio
from . import stream as _stream

# A blocking wait is cut into slices this long so that Python sees signals
# (KeyboardInterrupt) between them: the library retries its own sleep when
# interrupted.
_WAIT_SLICE_S = 1.0
_INT_MAX_MS = 2**31 - 1


class Slot:
    """A slot of a Client, from Client.acquire() or acquire_many().

    The slot's flag is a 32-bit timeline value that only moves forward.
    arm() reserves the next value; whoever completes the work (a GPU stream
    through the CUDA binding, or any writer) stores that value into the
    flag; cuflagd sees the flag advance and adds the number of completions
    to the slot's eventfd (``fd``).

    Counting: the eventfd counter says how many armed values landed since
    it was last read. wait_async() and completions() read it when it
    becomes readable and keep what they read in a tally that this object
    holds; consume() returns the tally plus whatever the counter holds, so
    a completion is counted once, whichever way it was seen. wait() never
    reads the counter.

    A slot of a Group (Group.acquire()) has no eventfd of its own: the
    daemon signals the group's, and ``fd`` raises OSError(EOPNOTSUPP).
    Everything else works as on any slot; its awaits watch the group's fd.

    Not safe to use after release() or after its client (or its group) is
    closed (ValueError).
    """

    def __init__(self, client, ptr, group=None):
        lib = _lib.lib()
        self._client = client  # the connection must outlive the slot
        self._ptr = ptr
        self._group = group
        self._fd = None if group is not None else lib.cuflag_slot_fd(ptr)
        self._id = lib.cuflag_slot_id(ptr)
        self._flag = ctypes.c_uint32.from_address(lib.cuflag_slot_flag(ptr))
        self._tally = 0
        self._tally_lock = threading.Lock()
        self._watch = None  # the event loop's aio.Doorbell, while something awaits
        if group is None:
            self._finalizer = weakref.finalize(self, client._conn.release, ptr)
        else:
            # The group releases whatever it still holds when it goes.
            self._finalizer = weakref.finalize(self, client._conn.release_grouped,
                                               group._held, ptr.value)

    def _handle(self):
        if self._ptr is None:
            raise ValueError("cuflag slot is released")
        return self._ptr

    def _forget(self):
        """Make the slot unusable; whoever calls this frees it."""
        if self._watch is not None:
            self._watch.close()
        self._finalizer.detach()
        self._ptr = None

    @property
    def released(self):
        return self._ptr is None

    @property
    def fd(self):
        """The slot's eventfd (non-blocking), to poll for readability. It
        stays owned by the slot: do not close it. A slot of a group has
        none: OSError(EOPNOTSUPP) (poll the group's fd)."""
        self._handle()
        if self._fd is None:
            raise OSError(errno.EOPNOTSUPP, "a slot of a group has no eventfd of its "
                          "own: poll the group's fd")
        return self._fd

    @property
    def group(self):
        """The Group the slot belongs to, or None."""
        return self._group

    def fileno(self):
        """The eventfd, so that a Slot can go straight into select/selectors."""
        return self.fd

    @property
    def id(self):
        """The slot's index in its client's region."""
        return self._id

    @property
    def flag(self):
        """The flag's current value: the last value stored into it."""
        self._handle()
        return self._flag.value

    def store(self, value):
        """Store ``value`` into the flag, as the device does when the work
        finishes: the simulated device, for tests and demonstrations. Real
        completions come from the GPU (see the C library's CUDA binding).

        It is one aligned 32-bit store, which the CPU makes visible in
        program order, as the device's posted write is. ``value`` is an int
        in 0..2**32-1 (TypeError, ValueError otherwise): a negative one is
        no timeline value. Any such value is stored, armed or not, as a
        device's write would be; complete() refuses the ones never armed.
        """
        value = _lib.u32("value", value)
        self._handle()
        self._flag.value = value

    def complete(self, value):
        """Complete the work armed as ``value`` from the CPU, as the C
        library's cuflag_slot_complete() does: store it into the flag with
        release order (what this thread wrote before is visible to whoever
        sees the flag move). For completers on the host: a thread pool,
        tests.

        ``value`` is an int in 0..2**32-1 (TypeError, ValueError
        otherwise). A value this slot never reserved (see wait() for which
        are) raises OSError with errno EINVAL and leaves the flag alone, as
        in C.
        """
        value = _lib.u32("value", value)
        _lib.check(_lib.lib().cuflag_slot_complete(self._handle(), value))

    def arm(self):
        """Reserve the slot's next timeline value, publish the arm to the
        daemon and return the value. No system call while the daemon's
        scanner is awake. While the daemon is away (a restart) the arm
        waits in the client's queue for the next one; an arm that finds
        the queue full waits for the daemon to come back and resumes with
        it, up to the client's ``resume_timeout``. Raises ConnectionError
        (ENOTCONN) when none came back by then, OSError(ESTALE) when the one
        that came back has another region layout."""
        target = ctypes.c_uint32()
        _lib.check(_lib.lib().cuflag_slot_arm(self._handle(), ctypes.byref(target)))
        return target.value

    def arm_many(self, n):
        """Reserve the slot's next ``n`` values (1 to 2**30) and arm them in
        one arm; return the first (the others follow it, wrapping at 2**32).
        For work that completes many values by itself, such as a kernel
        that signals from inside (``device_pointer()``): it may store them
        one by one, only the last, or add one per completion; a writer ahead
        of the arms is counted once they reach it, never past them. Raises
        ValueError for ``n`` out of range, OSError(EOVERFLOW) when 2**31 or
        more values would be armed and not yet signalled, or an error of
        arm()."""
        n = _lib.count("n", n)
        if not 1 <= n <= 1 << 30:
            raise ValueError(f"n must be in 1..2**30, not {n}")
        first = ctypes.c_uint32()
        _lib.check(_lib.lib().cuflag_slot_arm_many(self._handle(), n, ctypes.byref(first)))
        return first.value

    def device_pointer(self):
        """The slot's flag as a device address (an int) in the CUDA context
        current in this thread, for a kernel that completes the slot from
        inside: pass it as a pointer to a 32-bit unsigned int (a CuPy
        ``RawKernel`` argument as ``numpy.uint64(ptr)``, numba, Triton), arm
        the values the kernel writes with arm_many(), and store them with
        the release sequence of cuflag/cuflag_device.h (PTX
        ``st.release.sys.u32`` / ``red.release.sys.add.u32``). The first
        use in a context registers the client's flag pages there; the
        address stays valid until the client is closed, across daemon
        restarts. Raises OSError: EINVAL when no context is current (use
        the device from the framework first, e.g. ``cupy.cuda.Device(0).use()``
        or any allocation), ENODEV (no driver), ENOSYS (a library built
        without CUDA)."""
        ptr = ctypes.c_uint64()
        rc = _lib.lib().cuflag_cuda_slot_devptr(self._handle(), ctypes.byref(ptr))
        if rc == -errno.EINVAL:
            raise OSError(errno.EINVAL, "no CUDA context is current in this thread: use the "
                          "device first (cupy.cuda.Device(0).use(), torch.cuda.init(), "
                          "or any allocation on it)")
        _lib.cuda_check(rc)
        return ptr.value

    def signal(self, stream):
        """Complete the slot's next value after all the work queued so far
        on ``stream``: queue the flag's store on the stream, arm the slot,
        return the value (await it with wait_async(), or wait()).

        ``stream`` is an int ``CUstream`` handle (0: the legacy default
        stream), an object with ``__cuda_stream__()``, a
        ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, a numba stream or a
        cuda-python ``CUstream``. Anything else raises TypeError before any
        CUDA call.

        Under graph capture (``torch.cuda.graph``, ``cupy.cuda.Graph``,
        ``cuStreamBeginCapture``) the graph records a node that advances
        the flag by one at each launch; nothing is armed and it returns
        None: after each launch (``graph.replay()``), ``launched(stream)``
        arms and returns the value that launch completes.

        Raises OSError with the library's errno: ENODEV (no NVIDIA driver,
        or no CUDA context for the stream), ENOSYS (a library built without
        CUDA), EIO (the driver refused the store), or an error of arm().
        """
        return self._signal(_stream.handle(stream))

    def _signal(self, handle):
        """signal() for a handle already found."""
        lib = _lib.lib()
        target = ctypes.c_uint32()
        _lib.cuda_check(lib.cuflag_cuda_signal(self._handle(), handle, ctypes.byref(target)))
        # 0 is what a capture gives, or a timeline that wrapped around to it.
        if target.value == 0 and _lib.cuda_check(lib.cuflag_cuda_capturing(handle)) == 1:
            return None
        return target.value

    def launched(self, stream):
        """After a launch, on ``stream``, of a graph into which signal() was
        captured: arm the value that launch completes and return it. Call it
        once per launch, in launch order. Like arm(), and it lets a wait
        report a device fault of the launch (OSError EIO) instead of hanging.
        ``stream`` as signal(); errors as signal() and arm()."""
        handle = _stream.handle(stream)
        target = ctypes.c_uint32()
        _lib.cuda_check(_lib.lib().cuflag_cuda_launched(self._handle(), handle,
                                                        ctypes.byref(target)))
        return target.value

    def cuda_wait(self, stream, value):
        """Make ``stream`` wait, on the GPU, until the slot's timeline
        reaches ``value``: work queued on it afterwards runs only then, no
        host thread waiting. On an imported slot the timeline is the
        exporter's, so a consumer's stream waits for the producer's work in
        another process. ``stream`` as signal(); ``value`` an int less than
        2**31 ahead of the value reached (one reached already queues
        nothing). Raises OSError: ENODEV, ENOSYS, EIO (the driver refused
        the wait), BrokenPipeError (EPIPE: an import whose exporter's slot
        went before ``value``)."""
        value = _lib.u32("value", value)
        _lib.cuda_check(_lib.lib().cuflag_cuda_wait(self._handle(), _stream.handle(stream),
                                                     value))

    def export(self):
        """A new fd (an int, close-on-exec, the caller's to close) that
        names this slot, for another process to import with
        Client.import_slot(): pass it over a Unix socket
        (socket.send_fds) or by fork. Whoever holds it may watch the slot,
        whatever its uid; closing it changes nothing for the slot. Raises
        OSError: EPERM (an imported slot), EMFILE, ConnectionError."""
        fd = ctypes.c_int(-1)
        _lib.check(_lib.lib().cuflag_slot_export(self._handle(), ctypes.byref(fd)))
        return fd.value

    def _poll(self, target, timeout_ms, spin_us=0):
        """One library wait: True when reached, False on timeout."""
        target = _lib.u32("target", target)
        rc = _lib.lib().cuflag_slot_wait_spin(self._handle(), target, spin_us, timeout_ms)
        if rc == -errno.ETIMEDOUT:
            return False
        if rc < 0:
            raise self._wait_error(-rc, target)
        return True

    def _wait_error(self, code, target):
        """The error of a wait for ``target``, naming the slot and the value."""
        why = os.strerror(code)
        if code == errno.EINVAL:
            why += (f": {target} is not a value of this slot's timeline (a wait names one "
                    "from the slot's start to the last value arm() or signal() returned)")
        return _lib.error(code, f"slot {self.id}: wait for {target}: {why}")

    def reached(self, target):
        """Whether the flag has reached ``target``, without blocking.
        Raises OSError(EINVAL) when ``target`` was never armed here (see
        wait()), or the error that stopped the work (EIO: a device fault)."""
        return self._poll(target, 0)

    def wait(self, target, timeout=None, spin_us=0):
        """Block until the flag reaches ``target`` (from arm()).

        ``timeout`` is in seconds; None waits for ever. Returns at once,
        without a system call, when the flag is already there; else it
        first looks at the flag for ``spin_us`` microseconds, then sleeps
        until the daemon signals. Other threads run meanwhile. While the
        daemon is away (a restart) it looks at the flag itself and resumes
        the client once a daemon listens again; it is not bounded by the
        client's ``resume_timeout``. Raises TimeoutError, OSError(EINVAL)
        when ``target`` was never armed here, or OSError with the error
        that ended the wait (EIO: a device fault stopped the work). Leaves
        the eventfd counter alone.

        ``target`` is an int from arm() (TypeError otherwise, ValueError
        outside 0..2**32-1); ``timeout`` None or a number of seconds;
        ``spin_us`` an int >= 0. The values a wait may name are those of the
        slot's timeline: its starting value (0 on a fresh slot; 2**30 past
        the last value armed on it when the daemon hands a slot out again,
        so values such as 1073741830 are normal) up to the last value
        reserved by arm() or signal(). Any other value is OSError(EINVAL) at
        once, as from the C library's cuflag_slot_wait().
        """
        target = _lib.u32("target", target)
        timeout = _lib.seconds("timeout", timeout)
        spin_us = _lib.count("spin_us", spin_us)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            slice_s = _WAIT_SLICE_S
            if deadline is not None:
                slice_s = min(slice_s, max(0.0, deadline - time.monotonic()))
            if self._poll(target, min(math.ceil(slice_s * 1000), _INT_MAX_MS), spin_us):
                return
            spin_us = 0
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(errno.ETIMEDOUT,
                                   f"slot {self.id}: wait for {target} timed out after {timeout} s")

    def _read_counter(self):
        """Read the eventfd counter into the tally; raise its read error."""
        n = ctypes.c_uint64()
        rc = _lib.lib().cuflag_slot_consume(self._handle(), ctypes.byref(n))
        if rc == -errno.EAGAIN:
            return
        _lib.check(rc)
        with self._tally_lock:
            self._tally += n.value

    def consume(self):
        """Completions signalled since the last consume (0 when none),
        counting those that wait_async() and completions() have read off
        the eventfd and not yet handed out. Each completion is counted
        exactly once, across daemon restarts too (SIGKILL included): the
        count comes from the daemon's record in the client's region, the
        eventfd being only a doorbell. Does not wait for completions; but
        when it finds none while the daemon is away, the library makes one
        attempt to resume, which waits for an answer from a socket that
        accepts (a socket unit while the daemon restarts), up to 5 s. In a
        loop, completions() takes its counts without that."""
        self._read_counter()
        return self._take()

    def _take(self):
        """Hand out the tally."""
        with self._tally_lock:
            n, self._tally = self._tally, 0
        return n

    def _doorbell_in(self, loop, sticky=False):
        """The reader of the eventfd that signals the slot (its group's for
        a slot of a group) in loop, made on first need."""
        if self._group is not None:
            return self._group._doorbell_in(loop, sticky)
        self._handle()
        self._watch = aio.doorbell_for(self._watch, loop, "slot", self._fd, self._read_counter,
                                       self._unwatched, ValueError("cuflag slot is released"),
                                       sticky)
        return self._watch

    def _unwatched(self):
        self._watch = None

    async def wait_async(self, target, spin_us=0):
        """Wait in the running asyncio loop until the flag reaches
        ``target``; errors as wait(). Use asyncio.wait_for() (or, from
        Python 3.11 on, asyncio.timeout()) for a limit.

        It looks at the flag first (for ``spin_us`` microseconds, which
        holds up the loop that long at most, and only while no other await
        of the client is outstanding in the loop) and watches the eventfd
        only when the value has not landed yet, the client being driven by
        the library's dispatch call (cuflag_client_dispatch()) meanwhile.
        Should cuflagd go away, the library resumes the client without
        blocking the loop and, until a daemon is back, looks at the flags
        itself and rings the eventfd of a slot whose flag moved; a device
        fault of the slot's last stream rings it too (OSError EIO), as
        wait() sees it. It is not bounded by the client's
        ``resume_timeout``."""
        target = _lib.u32("target", target)
        spin_us = _lib.count("spin_us", spin_us)
        # The library's answer first, without a system call: EINVAL for a
        # value of no timeline of this slot (as wait()), or already there.
        if self._poll(target, 0):
            return
        await aio.wait(self, target, spin_us, self._doorbell_in, self._client._dispatcher_in)

    def completions(self, timeout=None):
        """An async iterator of completion counts, as consume() returns
        them, each > 0, every completion exactly once; it waits in the
        running loop between them. It carries on across daemon restarts:
        while cuflagd is away, the library resumes the client, and what
        landed meanwhile is counted once the next daemon signals it. If
        none came back within the client's ``resume_timeout`` it raises
        ConnectionError (ENOTCONN); if the one that came back cannot take
        the client (ESTALE, EOPNOTSUPP), OSError with that errno. Nothing
        is lost then: a later consume() counts what a daemon signals.
        ``timeout`` (seconds, None: none): TimeoutError once that long
        passes with no count."""
        return aio.counts(self.consume, self._take, self._doorbell_in,
                          self._client._dispatcher_in, _lib.seconds("timeout", timeout))

    def release(self):
        """Give the slot back to the daemon and close its eventfd (a slot
        of a group leaves the group; the group's fd stays). The
        daemon reuses it only once every armed value has landed, so a device
        write still in flight cannot reach another owner. Releasing twice is
        harmless."""
        ptr = self._ptr
        if ptr is None:
            return
        self._client._slots.discard(self)
        if self._group is not None:
            self._group._drop(self)
        self._forget()
        if self._group is not None:
            self._client._conn.release_grouped(self._group._held, ptr.value)
        else:
            self._client._conn.release(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        if self._ptr is None:
            return f"<cuflag.Slot id={self._id} released>"
        where = f"fd={self._fd}" if self._group is None else f"group={self._group._fd}"
        return f"<cuflag.Slot id={self._id} {where} flag={self._flag.value}>"
