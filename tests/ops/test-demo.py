#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's demo prints what the README shows: scripts/demo.sh (on the
tree meson test built: DEMO_BUILT=1, so no build line) prints the three
lines of one of the README's examples (the simulated device here, the GPU
where there is one), digits standing for any number, and nothing else: no
daemon log, no stats, no alarm about a missing driver."""
import os
import re
import subprocess
import sys

SOURCE_ROOT = os.environ["SOURCE_ROOT"]
BUILD_ROOT = os.environ["BUILD_ROOT"]
BEGIN = "<!-- the demo: tests/ops/test-demo.py runs it -->"
END = "<!-- end of the demo -->"


def shown():
    """The README's example outputs: runs of device:, completions:, wake: lines."""
    text = open(os.path.join(SOURCE_ROOT, "README.md")).read()
    if BEGIN not in text or END not in text:
        sys.exit("demo: the README's demo markers are missing")
    lines = [ln.strip() for ln in text[text.index(BEGIN):text.index(END)].splitlines()]
    if "# scripts/demo.sh" not in lines:
        sys.exit("demo: the README's demo block does not run scripts/demo.sh")
    starts = [i for i, ln in enumerate(lines) if ln.startswith("device:")]
    return [lines[i:i + 3] for i in starts]


def pattern(line):
    return re.compile("^" + "".join(r"\d+" if p.isdigit() else re.escape(p)
                                    for p in re.split(r"(\d+)", line)) + "$")


def main():
    env = {k: v for k, v in os.environ.items() if k not in ("CUFLAG_SOCKET", "NOTIFY_SOCKET")}
    r = subprocess.run([os.path.join(SOURCE_ROOT, "scripts", "demo.sh")], text=True,
                       env=dict(env, DEMO_BUILT="1", BUILD=BUILD_ROOT),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    out = (r.stdout + r.stderr).strip().splitlines()
    if r.returncode != 0:
        sys.exit(f"demo: scripts/demo.sh exited {r.returncode}:\n" + "\n".join(out))
    for example in shown():
        if len(out) == len(example) and all(pattern(e).match(o) for e, o in zip(example, out)):
            print("demo: prints what the README shows:\n" + "\n".join(out))
            return 0
    sys.exit("demo: scripts/demo.sh printed what the README does not show:\n" + "\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
