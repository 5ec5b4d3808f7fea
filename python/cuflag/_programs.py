# SPDX-License-Identifier: MIT
"""The programs the wheel brings (cuflag/_native/cuflagd, cuflagctl), run
in place of the Python process: `python -m cuflag.daemon`, the console
entry point `cuflagd`, and the same for cuflagctl."""

import os
import shutil
import sys

from . import _lib

# Where a package installed otherwise (Debian's python3-cuflag, meson
# install) finds the program. Not PATH: the console entry point of the
# same name may be the first there, and would run itself.
_INSTALLED = {"cuflagd": ("/usr/sbin", "/usr/local/sbin"),
              "cuflagctl": ("/usr/bin", "/usr/local/bin")}


def find(name):
    """The path of program name: the wheel's own, else the one at its
    install path; None when there is none."""
    bundled = os.path.join(_lib.NATIVE_DIR, name)
    if os.access(bundled, os.X_OK):
        return bundled
    return shutil.which(name, path=os.pathsep.join(_INSTALLED[name]))


def run(name):
    """exec program name with this process's arguments; exits 127 with a
    line saying what was looked for when it is missing."""
    path = find(name)
    if path is None:
        sys.stderr.write(f"{name}: not in {_lib.NATIVE_DIR} (this cuflag was not installed "
                         f"from the wheel), nor in {', '.join(_INSTALLED[name])}: build the wheel "
                         f"(scripts/build-wheel.sh) or install the cuflagd package\n")
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name, *sys.argv[1:]])
