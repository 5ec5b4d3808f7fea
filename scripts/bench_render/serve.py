# SPDX-License-Identifier: MIT
"""Tables of a serving bench run (bench/serve/serve_bench.py --json), for
scripts/bench-tables.py. Every figure is the median of the run's rounds,
with their min-max. Views: "" (every mode and load point, per loop, and the
idle CPU), "targets" (cuflag's ratios against its peers at each point),
"headline" (the README's: the asyncio loop at concurrency 1 and 64, and idle)."""
KIND = "serve"

MODES = {
    "cuflag": "**cuflag** (`await client.synchronize_async`)",
    "to_thread": "`asyncio.to_thread(stream.synchronize)`",
    "poll": "`event.query()` loop, `asyncio.sleep(0)`",
    "block": "`stream.synchronize()` in the handler",
    "hostfunc": "`cuLaunchHostFunc` to the loop",
}


def spread(s, fmt):
    if not s:
        return "n/a"
    if s["min"] == s["max"]:
        return fmt % s["median"]
    return (fmt + " (" + fmt + "–" + fmt + ")") % (s["median"], s["min"], s["max"])


def at(row):
    return "%d in flight" % row["at"] if row["kind"] == "closed" else "%d %% of peak" % round(row["at"] * 100)


def order(data):
    """Rows as the bench ran them: loop, mode, closed loops, open loops."""
    modes = list(MODES)
    key = {("closed", c): i for i, c in enumerate(data["config"]["concurrency"])}
    key.update({("open", f): 100 + i for i, f in enumerate(data["config"]["fractions"])})
    return sorted(data["summary"], key=lambda r: (r["loop"], modes.index(r["mode"]),
                                                   key[(r["kind"], r["at"])]))


def idle_of(data, loop, mode):
    for i in data["idle"]:
        if i["loop"] == loop and i["mode"] == mode:
            return i
    return None


def full(data):
    out = []
    for loop in sorted({r["loop"] for r in data["summary"]}):
        out += ["", "%s loop:" % loop, "",
                "| mode | load | req/s | p50 ms | p99 ms | CPU µs a request | of it cuflagd's |",
                "|---|---|---|---|---|---|---|"]
        for r in order(data):
            if r["loop"] != loop:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["mode"], at(r), spread(r["req_per_s"], "%.0f"), spread(r["p50_ms"], "%.2f"),
                spread(r["p99_ms"], "%.1f"), spread(r["cpu_us_per_req"], "%.0f"),
                spread(r["daemon_cpu_us"], "%.0f")))
    out += ["", "Idle, no request in flight (% of a core):", "",
            "| loop | mode | server | cuflagd |", "|---|---|---|---|"]
    for i in data["idle"]:
        out.append("| %s | %s | %s | %s |" % (i["loop"], i["mode"], spread(i["server_pct"], "%.1f"),
                                              spread(i["daemon_pct"], "%.1f")))
    return out[1:]


def verdict(value, good):
    if value != value:
        return "n/a"
    return "%.2f %s" % (value, "✓" if good(value) else "✗")


def targets(data):
    """At each load point, in the order of the full table."""
    key = {("closed", c): i for i, c in enumerate(data["config"]["concurrency"])}
    key.update({("open", f): 100 + i for i, f in enumerate(data["config"]["fractions"])})
    rows = {(r["loop"], r["mode"], r["kind"], r["at"]): r for r in data["summary"]}
    out = ["| loop | load | req/s ÷ to_thread's (≥ 1.0) | p99 ÷ to_thread's (≤ 0.6) | "
           "req/s ÷ poll's (≥ 0.9) | CPU ÷ poll's (≤ 0.3) | of it the server's | "
           "uvloop req/s ÷ asyncio's (≥ 1.0) |", "|---|---|---|---|---|---|---|---|"]
    for t in sorted(data["targets"], key=lambda t: (t["loop"], key[(t["kind"], t["at"])])):
        cf = rows[(t["loop"], "cuflag", t["kind"], t["at"])]
        poll = rows.get((t["loop"], "poll", t["kind"], t["at"]))
        server = (cf["server_cpu_us"]["median"] / poll["cpu_us_per_req"]["median"]
                  if poll else float("nan"))
        out.append("| %s | %s | %s | %s | %s | %s | %.2f | %s |" % (
            t["loop"], at(t), verdict(t["req_vs_to_thread"], lambda v: v >= 0.995),
            verdict(t["p99_vs_to_thread"], lambda v: v <= 0.6),
            verdict(t["req_vs_poll"], lambda v: v >= 0.9),
            verdict(t["cpu_vs_poll"], lambda v: v <= 0.3), server,
            verdict(t.get("uvloop_req_vs_asyncio", float("nan")), lambda v: v >= 0.995)))
    return out


def headline(data):
    rows = {(r["loop"], r["mode"], r["kind"], r["at"]): r for r in data["summary"]}
    out = ["| waiting for the GPU | req/s, 1 in flight | p99 ms, 64 in flight | "
           "CPU µs a request, 64 in flight | of it cuflagd's | idle CPU |",
           "|---|---|---|---|---|---|"]
    for mode, label in MODES.items():
        one, many = rows.get(("asyncio", mode, "closed", 1)), rows.get(("asyncio", mode, "closed", 64))
        idle = idle_of(data, "asyncio", mode)
        if not one or not many:
            continue
        out.append("| %s | %s | %s | %s | %s | %s %% |" % (
            label, spread(one["req_per_s"], "%.0f"), spread(many["p99_ms"], "%.0f"),
            spread(many["cpu_us_per_req"], "%.0f"), "%.0f" % many["daemon_cpu_us"]["median"],
            "%.1f" % idle["server_pct"]["median"] if idle else "n/a"))
    return out


def render(doc, view):
    data = doc["data"]
    if view == "targets":
        out = targets(data)
    elif view == "headline":
        out = headline(data)
    else:
        out = full(data)
    return "\n".join(out) + "\n"
