# SPDX-License-Identifier: MIT
"""`python -m cuflag.ctl COMMAND...` (and the console entry point
`cuflagctl`): runs cuflagctl, the one the wheel brought (cuflagctl --help,
cuflagctl(1))."""

from . import _programs


def main():
    _programs.run("cuflagctl")


if __name__ == "__main__":
    main()
