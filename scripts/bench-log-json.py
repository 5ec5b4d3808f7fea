#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The JSON object `cuflag-bench --json` prints, read back from the text
report a run left in a log (cuflag-bench without --json, as
scripts/gpu-run.sh runs it), for runs recorded before their JSON was kept.
Figures have the text's precision (0.1 us for latencies); what the text does
not print (the config, the idle CPU's seconds) is left out or null. The
object is wrapped with where it came from, as docs/bench-data/ keeps it:

    bench-log-json.py LOG --machine M --commit C --date D --command CMD > NAME.json
"""
import argparse
import json
import re
import sys


def num(s):
    return None if s in ("-", "n/a") else float(s)


def parse(text):
    out = {"mode": None, "config": None, "results": [], "throughput": [],
           "cpu": {"daemon_pid": None, "us_per_completion": None, "idle_pct_core": None,
                   "idle_seconds": None, "idle_clients": None},
           "scale": None, "scanner_cost": [], "ratios": {}}
    section = None
    for line in text.splitlines():
        m = re.match(r"cuflag-bench --mode (\w+)$", line)
        if m:
            out["mode"] = m.group(1)
            continue
        if line and not line.startswith(" "):
            section = line.split(" (")[0]
            continue
        f = line.split()
        if not f or f[0] in ("mechanism", "run"):
            continue
        if section == "Wake latency":
            if "not measured:" in line:
                out["results"].append({"name": f[0], "p50_us": None, "p90_us": None,
                                       "p99_us": None, "max_us": None, "n": 0,
                                       "error": line.split("not measured: ", 1)[1]})
            else:
                out["results"].append({"name": f[0], "p50_us": num(f[1]), "p90_us": num(f[2]),
                                       "p99_us": num(f[3]), "max_us": num(f[4]),
                                       "n": int(f[5])})
        elif section == "Throughput" and "not measured:" not in line:
            unit = "streams" if out["mode"] == "gpu" else "slots"
            out["throughput"].append({"name": f[0], "processes": int(f[1]), unit: int(f[2]),
                                      "completions": int(f[3]), "seconds": num(f[4]),
                                      "per_s": num(f[5]), "daemon_cpu_ms": num(f[6]),
                                      "daemon_us_per_completion": num(f[7])})
        elif section == "Daemon CPU":
            m = re.match(r"\s+pid (\d+): ([\d.]+) us of CPU", line)
            if m:
                out["cpu"]["daemon_pid"] = int(m.group(1))
                out["cpu"]["us_per_completion"] = float(m.group(2))
            m = re.match(r"\s+idle, (\d+) clients.*: ([\d.]+)% of a core over ([\d.]+) s", line)
            if m:
                out["cpu"]["idle_clients"] = int(m.group(1))
                out["cpu"]["idle_pct_core"] = float(m.group(2))
                out["cpu"]["idle_seconds"] = float(m.group(3))
        elif section == "Scanner cost" and "not measured:" not in line:
            name = f[0]
            out["scanner_cost"].append({
                "name": name, "mode": name.split("-")[1], "rate": int(f[1]),
                "per_s": num(f[2]), "daemon_pct_core": num(f[3]),
                "daemon_us_per_completion": num(f[4]),
                "scanner_wakeups_per_completion": num(f[5]),
                "scanner_sleeps_per_completion": num(f[6]),
                "scanner_spin_us_per_completion": num(f[7]),
                "scanner_timer_late_us": num(f[8])})
        elif section == "Ratios":
            out["ratios"][" ".join(f[:-1])] = num(f[-1])
    if out["mode"] is None:
        raise SystemExit("no cuflag-bench report in the log")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--kind", default="cuflag-bench")
    a = ap.parse_args()
    with open(a.log, encoding="utf-8") as f:
        data = parse(f.read())
    json.dump({"kind": a.kind, "machine": a.machine, "commit": a.commit, "date": a.date,
               "command": a.command, "log": a.log, "data": data}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
