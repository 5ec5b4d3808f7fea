# SPDX-License-Identifier: MIT
"""Loading libcuflag-client and declaring its functions for ctypes."""

import ctypes
import ctypes.util
import errno
import functools
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
    "cuflag_disconnect": (None, [client_p]),
    "cuflag_slot_acquire": (ctypes.c_int, [client_p, ctypes.POINTER(slot_p)]),
    "cuflag_slots_acquire": (ctypes.c_int, [client_p, ctypes.c_uint, ctypes.POINTER(slot_p)]),
    "cuflag_slot_release": (None, [slot_p]),
    "cuflag_slot_fd": (ctypes.c_int, [slot_p]),
    # The address is only read or written through c_uint32.from_address.
    "cuflag_slot_flag": (ctypes.c_void_p, [slot_p]),
    "cuflag_slot_id": (ctypes.c_int, [slot_p]),
    "cuflag_slot_arm": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_slot_wait": (ctypes.c_int, [slot_p, ctypes.c_uint32, ctypes.c_int]),
    "cuflag_slot_wait_spin": (ctypes.c_int, [slot_p, ctypes.c_uint32, ctypes.c_uint, ctypes.c_int]),
    "cuflag_slot_consume": (ctypes.c_int, [slot_p, ctypes.POINTER(ctypes.c_uint64)]),
    # A CUstream is a pointer; stream.handle() gives it as an int.
    "cuflag_cuda_signal": (ctypes.c_int, [slot_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_cuda_launched": (ctypes.c_int, [slot_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]),
    "cuflag_cuda_capturing": (ctypes.c_int, [ctypes.c_void_p]),
    "cuflag_cuda_check": (ctypes.c_int, [slot_p]),
    "cuflag_group_create": (ctypes.c_int, [client_p, ctypes.POINTER(group_p)]),
    "cuflag_group_destroy": (ctypes.c_int, [group_p]),
    "cuflag_group_fd": (ctypes.c_int, [group_p]),
    "cuflag_group_slots_acquire": (ctypes.c_int, [group_p, ctypes.c_uint, ctypes.POINTER(slot_p)]),
    "cuflag_group_drain": (ctypes.c_int, [group_p, ctypes.POINTER(Completion), ctypes.c_uint]),
    "cuflag_client_fd": (ctypes.c_int, [client_p]),
    "cuflag_reconnect": (ctypes.c_int, [client_p]),
    "cuflag_client_set_resume_timeout": (ctypes.c_int, [client_p, ctypes.c_int]),
    "cuflag_client_epoch": (ctypes.c_uint64, [client_p]),
    "cuflag_version": (ctypes.c_char_p, []),
}


def library_path():
    """Where the library is looked for: $CUFLAG_LIBRARY, the linker's
    search path, then the soname (left to the dynamic loader)."""
    path = os.environ.get("CUFLAG_LIBRARY")
    if path:
        return path
    return ctypes.util.find_library("cuflag-client") or "libcuflag-client.so.0"


@functools.cache
def lib():
    """The loaded library, on first use: importing the package works
    without it (for documentation tools and `pip install`)."""
    # CDLL releases the GIL around every call, so a blocking wait does
    # not stall the other Python threads.
    handle = ctypes.CDLL(library_path(), use_errno=False)
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
