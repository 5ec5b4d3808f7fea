# SPDX-License-Identifier: MIT
"""cuflag: learn that GPU work has finished, from any event loop.

A thin binding of libcuflag-client ($CUFLAG_LIBRARY, else its soname
libcuflag-client.so.0 in the dynamic loader's search path;
library_path() says which file was loaded)::

    with cuflag.Client() as client:
        slot = client.acquire()
        target = slot.arm()
        ...                      # the GPU stores target into the flag
        slot.wait(target)        # or: await slot.wait_async(target)

Many slots can share one eventfd: ``group = client.group()``,
``group.acquire(n)``, then ``group.drain()`` or ``async for slot, n in
group``; see Group.

When cuflagd restarts, the client resumes by itself (blocking calls and
awaits alike) and counts every completion exactly once; see Client.

Errors from the library are OSError with its errno (FileNotFoundError,
TimeoutError, ... where Python has a subclass for it; ENOTCONN, the daemon
gone past the client's resume timeout, is a ConnectionError).
"""

from . import _lib
from ._lib import library_path
from .client import DEFAULT_RESUME_TIMEOUT_S, DEFAULT_SPIN_US, Client
from .group import Completion, Group
from .slot import Slot

__all__ = ["Client", "Completion", "Group", "Slot", "DEFAULT_RESUME_TIMEOUT_S", "DEFAULT_SPIN_US", "library_path",
           "library_version"]


def library_version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.lib().cuflag_version().decode()
