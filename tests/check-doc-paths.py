#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every file the documentation names exists: README.md, the pages under docs/
(of the dated log docs/bench-log/, its index only) and the man pages, checked
for repository paths (daemon/scanner/drain.c, docs/running.md, tests/perf/,
bench/gpu-*.c, daemon/policy/broken.[ch], a name:line, a program the build makes,
as tests/perf/perf-scale), for documents named alone (BENCHMARKS.md) and for
their Markdown links. A file moved or renamed without its mentions fails
here.
    check-doc-paths.py SOURCE_ROOT
"""
import glob
import os
import re
import sys

# The top-level directories of the tree: a path is one that starts with one.
TOP = ("bench", "client", "ctl", "daemon", "debian", "deploy", "docs", "examples", "gpu",
       "man", "python", "rust", "scripts", "shared", "systemd", "tests", "tools")
# Not preceded by what would make it part of a longer path, an option or a URL.
PATH = re.compile(r"(?<![\w./$~@:-])((?:%s)/[\w./*?\[\]{},+-]*)" % "|".join(TOP))
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A document named without its directory: beside the one naming it, at the
# top or in docs/.
BARE_DOC = re.compile(r"(?<![\w./$~@:-])([\w-]+\.md)\b")


def roff_text(text):
    """A man page's words as man(1) shows them: escapes and fonts gone."""
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",")
            for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def built(root, path):
    """path is a program the build makes where its meson.build says
    (build/tests/perf/perf-scale is named tests/perf/perf-scale)."""
    d, name = os.path.split(path)
    if "." in name:
        return False
    try:
        with open(os.path.join(root, d, "meson.build"), encoding="utf-8") as f:
            return "'%s'" % name in f.read()
    except OSError:
        return False


def exists(root, path):
    """path names something in the tree (a glob: one thing at least), or a
    program built there."""
    for p in expand_braces(path):
        full = os.path.join(root, p)
        if re.search(r"[*?\[]", p):
            if not glob.glob(full):
                return False
        elif not os.path.exists(full) and not built(root, p):
            return False
    return True


def clean(path):
    # Prose around it: a name:line, a trailing full stop or comma, a closing
    # bracket that is not a glob's.
    path = re.sub(r"(:\d+(-\d+)?)+$", "", path)
    while path and (path[-1] in ".,:" or (path[-1] in ")]}" and
                                         path.count(path[-1]) > path.count(
                                             {")": "(", "]": "[", "}": "{"}[path[-1]]))):
        path = path[:-1]
    return path


def names(root, rel):
    """(line, path relative to root) of each file rel names."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    if rel.startswith("man/"):
        text = roff_text(text)
    here = os.path.dirname(rel)
    for n, line in enumerate(text.splitlines(), 1):
        for m in PATH.finditer(line):
            path = clean(m.group(1))
            if path.rstrip("/") not in TOP:
                yield n, path
        for m in BARE_DOC.finditer(line):
            for d in (here, "", "docs"):
                if os.path.exists(os.path.join(root, d, m.group(1))):
                    break
            else:
                yield n, os.path.join(here, m.group(1))
        if rel.endswith(".md"):
            for m in LINK.finditer(line):
                target = m.group(1).split("#")[0]
                if target and not re.match(r"[a-z]+:", target):
                    yield n, os.path.normpath(os.path.join(here, target))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    # The dated log (docs/bench-log/) names what its day's tree held; only
    # its index is held to today's.
    pages = [p for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
             if os.path.relpath(p, root).split(os.sep)[:2] != ["docs", "bench-log"]]
    docs = ["README.md", os.path.join("docs", "bench-log", "README.md")] + sorted(
        os.path.relpath(p, root)
        for p in pages + glob.glob(os.path.join(root, "man", "*.[1-8]")))
    missing = [(rel, n, path) for rel in docs for n, path in names(root, rel)
               if not exists(root, path)]
    for rel, n, path in missing:
        print(f"{rel}:{n}: names {path}, which does not exist")
    if missing:
        return 1
    print(f"doc paths: every file named in {len(docs)} documents exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
