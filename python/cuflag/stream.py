# SPDX-License-Identifier: MIT
"""Turning the stream objects of the CUDA libraries into a CUstream handle.

Duck-typed: none of those libraries is imported. What is accepted, in the
order it is looked for:

- an int (a ``CUstream`` handle; 0 is the legacy default stream), or what
  stands for one: an integer type with ``__index__`` (numpy), a
  ``ctypes.c_void_p``, an object whose ``__int__`` gives the handle
  (cuda-python's ``CUstream``; numbers such as floats are refused);
- an object with ``__cuda_stream__()``, cuda.core's protocol, which returns
  ``(version, handle)``;
- a ``torch.cuda.Stream`` (``.cuda_stream``), a ``cupy.cuda.Stream``
  (``.ptr``), a numba stream (``.handle``: a ``c_void_p`` or a cuda-python
  ``CUstream``).
"""

import ctypes
import numbers

ACCEPTED = ("an int CUstream handle, an object with __cuda_stream__(), a torch.cuda.Stream "
            "(.cuda_stream), a cupy.cuda.Stream (.ptr), a numba stream (.handle) or a "
            "cuda-python CUstream (int())")

_HANDLE_LIMIT = 1 << 64
# The attributes of the libraries' stream classes, in the order looked at.
_ATTRIBUTES = ("cuda_stream", "ptr", "handle")


def _integer(value):
    """The handle value stands for, or None when it is no handle-like integer."""
    if isinstance(value, bool):
        return None  # an int to Python, but never meant as a stream
    if isinstance(value, int):
        return value
    if isinstance(value, ctypes.c_void_p):
        return value.value or 0
    kind = type(value)
    if hasattr(kind, "__index__"):
        return value.__index__()
    # cuda-python's CUstream converts with int(); numbers such as 1.5 do too,
    # and would silently become a handle.
    if hasattr(kind, "__int__") and not isinstance(value, numbers.Number):
        return int(value)
    return None


def _protocol(stream):
    """The handle from __cuda_stream__(), or None when there is none."""
    method = getattr(stream, "__cuda_stream__", None)
    if method is None:
        return None
    answer = method() if callable(method) else method
    if not isinstance(answer, tuple) or len(answer) != 2:
        raise TypeError(f"{type(stream).__name__}.__cuda_stream__() returned {answer!r}, "
                        f"not (version, handle)")
    return _integer(answer[1])


def _attribute(name):
    def route(stream):
        found = getattr(stream, name, None)
        return None if found is None else _integer(found)
    return route


# Each way of finding the handle, in the order they are tried.
_ROUTES = (_integer, _protocol) + tuple(_attribute(a) for a in _ATTRIBUTES)
# The way that worked for each type of stream object seen: a server hands
# over the same few types again and again, so only the first costs a search.
_ROUTE_OF = {}
_ROUTE_OF_MAX = 64


def handle(stream):
    """The CUstream handle of ``stream`` (see the module's documentation).

    Raises TypeError naming what is accepted for anything else, and
    ValueError for an integer that no handle can be (negative, or 64 bits
    or more). Makes no CUDA call.
    """
    kind = type(stream)
    route = _ROUTE_OF.get(kind)
    value = None if route is None else route(stream)
    if value is None:
        for route in _ROUTES:
            value = route(stream)
            if value is not None:
                if len(_ROUTE_OF) < _ROUTE_OF_MAX:
                    _ROUTE_OF[kind] = route
                break
        else:
            raise TypeError(f"not a CUDA stream: {kind.__name__} (expected {ACCEPTED})")
    if not 0 <= value < _HANDLE_LIMIT:
        raise ValueError(f"not a CUstream handle: {value}")
    return value
