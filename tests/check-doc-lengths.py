#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documentation stays reference a reader can take in: every page under
docs/ that is not the dated log (docs/bench-log/) is at most 300 lines, and
each page of docs/design/ at most 200. A page that grows past its limit is
split by topic, or its history moved to the log.
    check-doc-lengths.py SOURCE_ROOT
"""
import glob
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
LIMITS = [("docs/design/", 200), ("docs/", 300)]
bad = 0
pages = [p for p in sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
         if not os.path.relpath(p, root).replace(os.sep, "/").startswith("docs/bench-log/")]
for path in pages:
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    limit = next(n for prefix, n in LIMITS if rel.startswith(prefix))
    with open(path, encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    if lines > limit:
        print("%s: %d lines, over its limit of %d" % (rel, lines, limit))
        bad += 1
if not bad:
    print("doc lengths: %d pages within their limits" % len(pages))
sys.exit(1 if bad else 0)
