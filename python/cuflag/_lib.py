# SPDX-License-Identifier: MIT
"""Loading libcuflag-client and declaring its functions for ctypes."""

import ctypes
import errno
import functools
import operator
import os

# Opaque handles: only ever passed back to the library.
client_p = ctypes.c_void_p
slot_p = ctypes.c_void_p
group_p = ctypes.c_void_p


class Completion(ctypes.Structure):
    """struct cuflag_completion: a slot of a group and its new completions."""
    _fields_ = [("slot", slot_p), ("completions", ctypes.c_uint64)]


_PROTOTYPES = {
    "cuflag_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(client_p)]),
    "cuflag_connect_hint": (ctypes.c_char_p, [ctypes.c_int]),
    "cuflag_disconnect": (None, [client_p]),
    "cuflag_slot_acquire": (ctypes.c_int, [client_p, ctypes.POINTER(slot_p)]),
    "cuflag_slots_acquire": (ctypes.c_int, [client_p, ctypes.c_uint, ctypes.POINTER(slot_p)]),
    "cuflag_slot_release": (None, [slot_p]),
    "cuflag_slot_fd": (ctypes.c_int, [slot_p]),
    # The address is only read or written through c_uint32.from_address.
    "cuflag_slot_flag": (ctypes.c_void_p, [slot_p]),
    "cuflag_slot_id": (ctypes.c_int, [slot_p]),
    "cuflag_slot_arm": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_slot_complete": (ctypes.c_int, [slot_p, ctypes.c_uint32]),
    "cuflag_slot_wait": (ctypes.c_int, [slot_p, ctypes.c_uint32, ctypes.c_int]),
    "cuflag_slot_wait_spin": (ctypes.c_int, [slot_p, ctypes.c_uint32, ctypes.c_uint, ctypes.c_int]),
    "cuflag_slot_consume": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_uint64)]),
    # A CUstream is a pointer; stream.handle() gives it as an int.
    "cuflag_cuda_signal": (ctypes.c_int, [slot_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_cuda_launched": (ctypes.c_int, [slot_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_cuda_capturing": (ctypes.c_int, [ctypes.c_void_p]),
    "cuflag_cuda_check": (ctypes.c_int, [slot_p]),
    # Signals from inside a kernel: the flag's device address, many values armed.
    "cuflag_cuda_slot_devptr": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_uint64)]),
    "cuflag_slot_arm_many": (ctypes.c_int, [slot_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint32)]),
    # Completions across processes: a slot as an fd, imported by another.
    "cuflag_slot_export": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_int)]),
    "cuflag_slot_import": (ctypes.c_int, [client_p, ctypes.c_int, ctypes.POINTER(slot_p)]),
    "cuflag_group_slot_import": (ctypes.c_int, [group_p, ctypes.c_int, ctypes.POINTER(slot_p)]),
    "cuflag_cuda_wait": (ctypes.c_int, [slot_p, ctypes.c_void_p, ctypes.c_uint32]),
    "cuflag_group_create": (ctypes.c_int, [client_p, ctypes.POINTER(group_p)]),
    "cuflag_group_destroy": (ctypes.c_int, [group_p]),
    "cuflag_group_fd": (ctypes.c_int, [group_p]),
    "cuflag_group_slots_acquire": (ctypes.c_int, [group_p, ctypes.c_uint, ctypes.POINTER(slot_p)]),
    "cuflag_group_drain": (ctypes.c_int, [group_p, ctypes.POINTER(Completion), ctypes.c_uint]),
    "cuflag_client_fd": (ctypes.c_int, [client_p]),
    "cuflag_reconnect": (ctypes.c_int, [client_p]),
    "cuflag_client_set_resume_timeout": (ctypes.c_int, [client_p, ctypes.c_int]),
    "cuflag_client_epoch": (ctypes.c_uint64, [client_p]),
    "cuflag_client_dispatch_fd": (ctypes.c_int, [client_p]),
    "cuflag_client_dispatch": (ctypes.c_int, [client_p]),
    "cuflag_client_dispatch_timeout": (ctypes.c_int, [client_p, ctypes.POINTER(ctypes.c_int)]),
    "cuflag_version": (ctypes.c_char_p, []),
}


SONAME = "libcuflag-client.so.0"
# Where the wheel puts its own library, cuflagd and cuflagctl (a package
# installed otherwise has no such folder).
NATIVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def _wanted():
    """What is loaded: $CUFLAG_LIBRARY, else the library the wheel brought
    (cuflag/_native/), else the soname, which the dynamic loader looks for
    in its search path (ld.so.cache, LD_LIBRARY_PATH)."""
    named = os.environ.get("CUFLAG_LIBRARY")
    if named:
        return named
    bundled = os.path.join(NATIVE_DIR, SONAME)
    return bundled if os.path.exists(bundled) else SONAME


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def library_path():
    """The path of the library this package uses, as the dynamic loader
    found it (loading it if need be): $CUFLAG_LIBRARY, else the wheel's own
    (cuflag/_native/libcuflag-client.so.0), else the soname
    libcuflag-client.so.0 in the loader's search path. Raises OSError
    (naming what was looked for) when it cannot be loaded."""
    handle = lib()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if libc.dladdr(ctypes.cast(handle.cuflag_version, ctypes.c_void_p),
                   ctypes.byref(info)) and info.dli_fname:
        return os.path.realpath(os.fsdecode(info.dli_fname))
    return _wanted()


@functools.cache
def lib():
    """The loaded library, on first use: importing the package works
    without it (for documentation tools and `pip install`)."""
    wanted = _wanted()
    # CDLL releases the GIL around every call, so a blocking wait does
    # not stall the other Python threads.
    try:
        handle = ctypes.CDLL(wanted, use_errno=False)
    except OSError as e:
        how = ("check $CUFLAG_LIBRARY" if "CUFLAG_LIBRARY" in os.environ else
               "install the cuflag wheel (scripts/build-wheel.sh), libcuflag-client0 "
               "or meson install, or set CUFLAG_LIBRARY to the library's path")
        raise FileNotFoundError(errno.ENOENT, f"cannot load libcuflag-client ({e}): {how}",
                                wanted) from None
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(handle, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return handle


def error(code, message=None):
    """The exception for a positive errno: an OSError whose subclass, such
    as FileNotFoundError or TimeoutError, Python picks from errno; ENOTCONN
    (the daemon went away and none came back within the resume timeout) is
    a ConnectionError, as Python's own EPIPE and ECONNRESET are."""
    message = message or os.strerror(code)
    if code == errno.ENOTCONN:
        return ConnectionError(code, message)
    return OSError(code, message)


def check(rc):
    """Raise error(-rc) for the library's negative errno; else return rc."""
    if rc < 0:
        raise error(-rc)
    return rc


def _driver_loaded():
    """Whether libcuda.so.1 is in the process (the library loads it at its
    first CUDA call; RTLD_NOLOAD loads nothing)."""
    try:
        ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


def cuda_check(rc):
    """check() for the CUDA binding's calls: ENODEV says which of its two
    causes it is, the driver missing or the stream without a context."""
    if rc != -errno.ENODEV:
        return check(rc)
    if not _driver_loaded():
        raise OSError(errno.ENODEV, "no NVIDIA driver: libcuda.so.1 was not found by the "
                      "dynamic loader (install the NVIDIA driver; the calls that need no "
                      "GPU, such as arm() and store(), work without it)")
    raise OSError(errno.ENODEV, "no CUDA context for the stream, or a driver older than "
                  "the CUDA binding needs (use the device first: any allocation on it)")


def connect_error(rc, path):
    """The exception for cuflag_connect()'s negative errno rc on the socket
    path (bytes, or None for the library's default): it names the socket
    (its filename; with none named, the library's words name each socket it
    tried: the node daemon's, then the user's) and says what to do (the
    library's cuflag_connect_hint())."""
    if path is None:
        path = os.environb.get(b"CUFLAG_SOCKET") or None
    hint = lib().cuflag_connect_hint(rc)
    message = os.strerror(-rc) + (": " + hint.decode() if hint else "")
    args = (-rc, message) if path is None else (-rc, message, os.fsdecode(path))
    if -rc == errno.ENOTCONN:
        return ConnectionError(*args)
    return OSError(*args)


def u32(what, value):
    """value as a timeline value or flag (an int 0..2^32-1): TypeError for
    anything that is not an int, ValueError outside the range."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if not 0 <= v <= 0xFFFFFFFF:
        raise ValueError(f"{what} must be in 0..2**32-1, not {v}")
    return v


def seconds(what, value):
    """A timeout in seconds: None (no limit) or a number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be None or a number of seconds, "
                        f"not {type(value).__name__}")
    if not value >= 0:  # NaN too
        raise ValueError(f"{what} must be None or >= 0")
    return value


def count(what, value):
    """A non-negative int, such as spin_us."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    if v < 0:
        raise ValueError(f"{what} must be >= 0")
    return v
