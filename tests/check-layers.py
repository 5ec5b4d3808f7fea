#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every include of cuflagd's code keeps to its layers: a folder of daemon/
includes its own headers and those of the layers below it that the table
allows, each by its folder ("scanner/scanner.h"), and shared/ (or the public
API, or gpu/) by a bare name; shared/ and the client library include nothing
of daemon/. The policies, pure, include no clock and no header of I/O.
Anything else fails, with the file and line.
    check-layers.py SOURCE_ROOT
    check-layers.py --prove SOURCE_ROOT   (a copy with an include too high,
                                           one sideways, a clock and I/O in a
                                           policy must fail, naming each)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The layers, lowest first, and what each may include besides itself. A
# layer that names another's face may include only those of its headers.
LAYERS = {
    "policy": [],
    "base": ["policy"],
    "scanner": ["policy", "base"],
    "serve": ["policy", "base", "scanner:face"],
    "loop": ["policy", "base", "scanner", "serve"],
}
# The headers of a layer that the layers above it may name.
FACE = {"scanner": {"scanner.h", "user.h"}}
# What outside daemon/ a layer includes by a bare name: shared/ always; the
# public API (client/include) and the GPU helpers (gpu/) but in policy/.
FOREIGN = {"policy": ["shared"]}
FOREIGN_DEFAULT = ["shared", "client/include", "gpu"]
# A unit test beside its source also takes the tests' main() (tests/).
TEST_FOREIGN = ["tests"]
# Pure policies: no clock read (shared/clock.h), no I/O; the C library's
# headers of arithmetic and types only.
PURE = {"policy"}
PURE_REFUSED = {"clock.h"}
PURE_SYSTEM = {"assert.h", "errno.h", "limits.h", "math.h", "stdatomic.h", "stdbool.h",
               "stddef.h", "stdint.h", "string.h", "sys/types.h"}
SYSTEM = re.compile(r'^\s*#\s*include\s+<([^>]+)>', re.M)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path, rx=INCLUDE):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for m in rx.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def sources(top):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def check_daemon(root):
    daemon = os.path.join(root, "daemon")
    for path in sources(daemon):
        rel = os.path.relpath(path, daemon)
        parts = rel.split(os.sep)
        if len(parts) != 2 or parts[0] not in LAYERS:
            yield rel, 0, "a source outside the layer folders (%s)" % ", ".join(LAYERS)
            continue
        layer, name = parts
        allowed = {layer: None}
        for a in LAYERS[layer]:
            lower, _, face = a.partition(":")
            allowed[lower] = FACE[lower] if face else None
        foreign = FOREIGN.get(layer, FOREIGN_DEFAULT)
        if name.startswith("test-"):
            foreign = foreign + TEST_FOREIGN
        elif layer in PURE:
            for line, inc in includes(path, SYSTEM):
                if inc not in PURE_SYSTEM:
                    yield "daemon/" + rel, line, "<%s>: %s/ is pure (no I/O)" % (inc, layer)
        for line, inc in includes(path):
            head, _, tail = inc.partition("/")
            if tail and head in LAYERS:
                if not os.path.isfile(os.path.join(daemon, inc)):
                    yield "daemon/" + rel, line, '"%s": no such file' % inc
                elif head not in allowed:
                    how = "a higher layer" if list(LAYERS).index(head) > list(LAYERS).index(
                        layer) else "a layer beside it"
                    yield "daemon/" + rel, line, '"%s": %s/ may not include %s/ (%s)' % (
                        inc, layer, head, how)
                elif allowed[head] is not None and tail not in allowed[head]:
                    yield "daemon/" + rel, line, '"%s": %s/ may include only the face of %s/ ' \
                        "(%s)" % (inc, layer, head, ", ".join(sorted(allowed[head])))
            elif os.path.isfile(os.path.join(daemon, layer, inc)):
                yield "daemon/" + rel, line, '"%s": name its folder ("%s/%s")' % (
                    inc, layer, inc)
            elif layer in PURE and not name.startswith("test-") and inc in PURE_REFUSED:
                yield "daemon/" + rel, line, '"%s": %s/ reads no clock' % (inc, layer)
            elif not any(os.path.isfile(os.path.join(root, f, inc)) for f in foreign):
                yield "daemon/" + rel, line, '"%s": not in %s' % (
                    inc, ", ".join(f + "/" for f in foreign))


def check_below(root):
    """shared/ and the client library know nothing of the daemon."""
    daemon = os.path.join(root, "daemon")
    for top in ("shared", "client"):
        for path in sources(os.path.join(root, top)):
            for line, inc in includes(path):
                head = inc.partition("/")[0]
                if head in LAYERS and os.path.exists(os.path.join(daemon, inc)):
                    yield os.path.relpath(path, root), line, '"%s": %s/ may not include ' \
                        "daemon/" % (inc, top)


def check(root):
    bad = list(check_daemon(root)) + list(check_below(root))
    for rel, line, why in bad:
        print("%s:%d: %s" % (rel, line, why))
    if bad:
        return 1
    n = sum(1 for _ in sources(os.path.join(root, "daemon")))
    print("layers: the includes of %d files of daemon/ keep to the table" % n)
    return 0


def prove(root):
    """A copy of the tree with two bad includes must fail, naming both."""
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("daemon", "shared", "client", "gpu", "tests"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns("*.py", "*.sh"))
        bad = {"policy/budget.c": '#include "serve/session.h"\n',
               "serve/slots.c": '#include "scanner/private.h"\n',
               "policy/penalty.c": '#include "clock.h"\n',
               "policy/predictor.c": '#include <stdio.h>\n'}
        for f, line in bad.items():
            with open(os.path.join(tmp, "daemon", f), "a", encoding="utf-8") as out:
                out.write(line)
        r = subprocess.run([sys.executable, __file__, tmp], text=True, stdout=subprocess.PIPE)
        print(r.stdout, end="")
        found = [f for f in bad if "daemon/" + f + ":" in r.stdout]
        if r.returncode == 0 or len(found) != len(bad):
            print("layers: the copy with bad includes was not refused for each")
            return 1
        print("layers: a copy with an include too high, one sideways, a clock and I/O in a "
              "policy is refused for each")
        return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--prove":
        sys.exit(prove(sys.argv[2]))
    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else "."))
