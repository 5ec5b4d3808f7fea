#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The figures the README and docs/BENCHMARKS.md show are what the recorded
runs say: every table between <!-- table:NAME --> markers is rendered again
from docs/bench-data/NAME.json (scripts/bench-tables.py) and must come out
the same, character for character; every data file is complete (machine,
commit, date, command: the stamp under its tables) and shown somewhere; and
the README's headline table is one of them, not a table kept by hand.
    check-bench-tables.py SOURCE_ROOT
"""
import glob
import json
import os
import re
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
script = os.path.join(root, "scripts", "bench-tables.py")
ok = subprocess.run([sys.executable, script, "--check", root]).returncode == 0

shown = set()
docs = [os.path.join(root, "README.md")] + [
    p for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
    if os.sep + "bench-log" + os.sep not in p]
for path in docs:
    with open(path, encoding="utf-8") as f:
        for name in re.findall(r"<!-- table:([\w.-]+) -->", f.read()):
            shown.add(name.split(".")[0])
            if path.endswith("README.md"):
                shown.add("README")

for path in sorted(glob.glob(os.path.join(root, "docs", "bench-data", "*.json"))):
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    missing = [k for k in ("kind", "machine", "commit", "date", "command", "data") if not doc.get(k)]
    if missing:
        print("%s: no %s" % (path, ", ".join(missing)))
        ok = False
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", str(doc.get("date", ""))):
        print("%s: date %r is not YYYY-MM-DD" % (path, doc.get("date")))
        ok = False
    if doc.get("log") and not os.path.exists(os.path.join(root, doc["log"])):
        print("%s: its log %s does not exist" % (path, doc["log"]))
        ok = False
    if name not in shown:
        print("%s: shown in no table (add <!-- table:%s --> to a page)" % (path, name))
        ok = False

if "README" not in shown:
    print("README.md: its figures are in no generated table (<!-- table:NAME.headline -->)")
    ok = False
sys.exit(0 if ok else 1)
