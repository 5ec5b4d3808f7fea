#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Record a scripts/serve-bench.sh run for the documentation's tables: its
serve.json and pipeline.json become docs/bench-data/serve-TAG.json and
pipeline-TAG.json (the run's JSON as "data", stamped with the machine, the
commit and the date the run wrote, and the command), its serve.txt and
pipeline.txt go to docs/bench-log/gpu-run/, and scripts/bench-tables.py
writes every table again. A page shows a new TAG with the markers
<!-- table:serve-TAG --> and <!-- table:pipeline-TAG --> (docs/serving.md).

    bench/serve/record.py OUT TAG "an NVIDIA H200 host (16 cores, driver ...)"
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def rounded(x):
    """Four significant digits: the rounds' spread is wider than that."""
    if isinstance(x, float):
        return float("%.4g" % x)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    out, tag, machine = sys.argv[1:]
    for name in ("serve", "pipeline"):
        with open(os.path.join(out, name + ".json")) as f:
            data = json.load(f)
        commit = data.get("commit") or "unknown"
        log = "docs/bench-log/gpu-run/%s-%s.txt" % (name, commit)
        shutil.copyfile(os.path.join(out, name + ".txt"), os.path.join(ROOT, log))
        doc = {"kind": name, "machine": machine, "commit": commit,
               "date": data["date"].split()[0],
               "command": "COMMIT=%s ROUNDS=%d scripts/serve-bench.sh" % (
                   commit, data["config"]["rounds"]),
               "log": log, "data": rounded(data)}
        path = os.path.join(ROOT, "docs", "bench-data", "%s-%s.json" % (name, tag))
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print("wrote", os.path.relpath(path, ROOT))
    return subprocess.call([sys.executable, os.path.join(ROOT, "scripts", "bench-tables.py"), ROOT])


if __name__ == "__main__":
    sys.exit(main())
