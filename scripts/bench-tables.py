#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The figures tables of the documentation, written from the recorded runs.

Each table sits between two markers in README.md or a page of docs/ (not the
dated log, docs/bench-log/):

    <!-- table:NAME -->            the default view of docs/bench-data/NAME.json
    <!-- table:NAME.VIEW -->       another view of it (README: gpu-h200.headline)
    <!-- end table:NAME -->        (or NAME.VIEW, as opened)

A data file is {"kind": K, "machine", "commit", "date", "command", "log",
"data": the program's own JSON (cuflag-bench --json, ...)}. What a kind's
tables look like is its renderer's: scripts/bench_render/K.py (a '-' in K is
a '_' there), which defines KIND = "K" and render(doc, view) -> Markdown
(view "" is the default). Every table is stamped below with the machine, the
commit, the date, the command and the log, so that no figure stands without
the run it came from.

    bench-tables.py [SOURCE_ROOT]           rewrite every table in place
    bench-tables.py --check [SOURCE_ROOT]   exit 1, naming each, where a table
                                            is not what its data renders
"""
import glob
import importlib.util
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OPEN = re.compile(r"<!-- table:([\w.-]+) -->\n")


def renderers():
    """KIND -> render function, from every plugin in scripts/bench_render/."""
    out = {}
    for path in sorted(glob.glob(os.path.join(HERE, "bench_render", "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location("bench_render_" + name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if getattr(mod, "KIND", None):
            out[mod.KIND] = mod.render
    return out


def documents(root):
    """README.md and the reference pages: every .md under docs/ but the log."""
    docs = ["README.md"]
    for path in sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)):
        rel = os.path.relpath(path, root)
        if not rel.startswith(os.path.join("docs", "bench-log") + os.sep):
            docs.append(rel)
    return docs


def rounds_said(doc):
    """How many runs a table's figures are of: a bench that takes rounds in
    turn records them in its config; a cuflag-bench run is one run."""
    config = doc["data"].get("config") if isinstance(doc["data"], dict) else None
    n = config.get("rounds") if isinstance(config, dict) else None
    if isinstance(n, int) and n > 1:
        return "medians of %d rounds taken in turn (min-max in brackets)" % n
    return "one run"


def stamp(doc, rel):
    """The line under each table: the run it came from, with a link to its
    log relative to the page that shows it."""
    s = "Measured on %s, commit `%s`, %s: `%s`" % (doc["machine"], doc["commit"], doc["date"],
                                                   doc["command"])
    s += "; %s" % rounds_said(doc)
    if doc.get("log"):
        link = os.path.relpath(doc["log"], os.path.dirname(rel) or ".")
        s += " ([log](%s))" % link
    return "*" + s + ".*"


def table(root, name, rel, kinds):
    base, _, view = name.partition(".")
    path = os.path.join(root, "docs", "bench-data", base + ".json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    render = kinds.get(doc["kind"])
    if render is None:
        raise SystemExit("%s: no renderer for kind %r (scripts/bench_render/)" % (path, doc["kind"]))
    body = render(doc, view).rstrip("\n")
    return body + "\n\n" + stamp(doc, rel) + "\n"


def rewrite(root, rel, kinds):
    """The text of rel with every table rendered again, and the names of
    the tables in it."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    out, names, pos = [], [], 0
    for m in OPEN.finditer(text):
        if m.start() < pos:
            continue
        name = m.group(1)
        end = "<!-- end table:%s -->" % name
        stop = text.find(end, m.end())
        if stop < 0:
            raise SystemExit("%s: <!-- table:%s --> is never closed (%s)" % (rel, name, end))
        out.append(text[pos:m.end()])
        out.append(table(root, name, rel, kinds))
        pos = stop
        names.append(name)
    out.append(text[pos:])
    return text, "".join(out), names


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    root = args[0] if args else os.path.dirname(HERE)
    kinds = renderers()
    stale, count = [], 0
    for rel in documents(root):
        old, new, names = rewrite(root, rel, kinds)
        count += len(names)
        if old == new:
            continue
        if check:
            stale.append("%s (tables: %s)" % (rel, ", ".join(names)))
        else:
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(new)
            print("rewrote %s: %s" % (rel, ", ".join(names)))
    for s in stale:
        print("not what docs/bench-data renders: %s; run scripts/bench-tables.py" % s)
    if check and not stale:
        print("bench tables: %d tables agree with docs/bench-data" % count)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
