# SPDX-License-Identifier: MIT
"""`python -m cuflag.daemon [OPTION...]` (and the console entry point
`cuflagd`): runs cuflagd, the one the wheel brought, with these options
(cuflagd --help, cuflagd(8))."""

from . import _programs


def main():
    _programs.run("cuflagd")


if __name__ == "__main__":
    main()
