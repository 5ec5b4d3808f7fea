# SPDX-License-Identifier: MIT
"""Tables of a cuflag-bench run (its --json object), for scripts/bench-tables.py.
Views: "" (every row: wake latency, the paced or scanner-cost rows, the
throughput and the daemon's CPU), "headline" (the README's five mechanisms
and a sentence of the run's other figures), "summary" (that sentence
alone)."""
KIND = "cuflag-bench"

# The README's headline: the GPU rows a reader compares first.
HEADLINE = [
    ("spin-floor", "a thread spinning on the flag (the physical floor)", False),
    ("hostfunc", "`cuLaunchHostFunc` + eventfd", False),
    ("event-blocking", "event with blocking sync", False),
    ("cuflagd", "cuflagd, waiter blocked on the eventfd", True),
    ("cuflagd-spin", "cuflagd, waiter spins 20 µs on its flag first", True),
]


def f1(v):
    return "n/a" if v is None else "%.1f" % v


def f2(v):
    return "n/a" if v is None else "%.2f" % v


def count(v):
    return "n/a" if v is None else "{:,}".format(int(round(v))).replace(",", " ")


def rows(data):
    return {r["name"]: r for r in data["results"]}


def paced_names(data):
    return [r["name"] for r in data["results"] if r["name"].startswith("paced-")]


def scan_names(data):
    return [s["name"] for s in data.get("scanner_cost") or []]


def latency(data, skip):
    out = ["| row | p50 µs | p90 µs | p99 µs | max µs | samples |", "|---|---|---|---|---|---|"]
    for r in data["results"]:
        if r["name"] in skip:
            continue
        if r.get("error"):
            out.append("| `%s` | not measured: %s | | | | |" % (r["name"], r["error"]))
            continue
        out.append("| `%s` | %s | %s | %s | %s | %d |" % (r["name"], f1(r["p50_us"]), f1(r["p90_us"]),
                                                       f1(r["p99_us"]), f1(r["max_us"]), r["n"]))
    return out


def paced(data):
    """GPU mode: the paced rows, their wake and every party's CPU a completion."""
    lat, ratio = rows(data), data["ratios"]
    out = ["| paced row | p50 µs | p99 µs | CPU µs a completion | of it the daemon's | "
           "scanner wake-ups a completion |", "|---|---|---|---|---|---|"]
    for name in paced_names(data):
        r = lat[name]
        wake = ratio.get(name + " wakeups/completion")
        out.append("| `%s` | %s | %s | %s | %s | %s |" % (
            name, f1(r["p50_us"]), f1(r["p99_us"]), f1(ratio.get(name + " cpu_us/completion")),
            f1(ratio.get(name + " daemon_us/completion")), "-" if wake is None else f2(wake)))
    return out


def scanner_cost(data):
    """CPU mode: the scanner-cost rows, their wake and the daemon's CPU."""
    lat = rows(data)
    out = ["| scanner-cost row | done/s | p50 µs | p99 µs | daemon % of a core | "
           "daemon µs a completion | wake-ups a completion |", "|---|---|---|---|---|---|---|"]
    for s in data["scanner_cost"]:
        r = lat.get(s["name"], {})
        out.append("| `%s` | %s | %s | %s | %s | %s | %s |" % (
            s["name"], count(s["per_s"]), f1(r.get("p50_us")), f1(r.get("p99_us")),
            f1(s["daemon_pct_core"]), f1(s["daemon_us_per_completion"]),
            f2(s["scanner_wakeups_per_completion"])))
    return out


def throughput(data):
    unit = "streams" if data["mode"] == "gpu" else "slots"
    out = ["| throughput row | processes x %s | completions/s | daemon µs a completion |" % unit,
           "|---|---|---|---|"]
    for t in data["throughput"]:
        out.append("| `%s` | %d x %d | %s | %s |" % (t["name"], t["processes"], t[unit],
                                                   count(t["per_s"]),
                                                   f2(t.get("daemon_us_per_completion"))))
    cpu = data["cpu"]
    if cpu.get("idle_pct_core") is not None:
        out += ["", "Idle, %d clients connected and nothing armed, the daemon took %.2f %% of a "
                "core over %.1f s." % (cpu["idle_clients"], cpu["idle_pct_core"],
                                       cpu["idle_seconds"])]
    return out


def full(data):
    extra = paced_names(data) + scan_names(data)
    out = latency(data, set(extra))
    if paced_names(data):
        out += [""] + paced(data)
    if scan_names(data):
        out += [""] + scanner_cost(data)
    return out + [""] + throughput(data)


def headline(data):
    """The five mechanisms, and the sentence of the run's other figures."""
    lat = rows(data)
    out = ["| mechanism | p50 µs | p99 µs |", "|---|---|---|"]
    for name, label, bold in HEADLINE:
        r = lat[name]
        cells = [label, f1(r["p50_us"]), f1(r["p99_us"])]
        if bold:
            cells = ["**%s**" % c for c in cells]
        out.append("| " + " | ".join(cells) + " |")
    return out + ["", summary(data)]


def summary(data):
    """One sentence of the run's other figures, for the README."""
    ratio, cpu = data["ratios"], data["cpu"]
    parts = []
    if cpu.get("idle_pct_core") is not None:
        parts.append("idle, the daemon takes %.2f %% of a core" % cpu["idle_pct_core"])
    c, h, e = (ratio.get("paced-1k-%s cpu_us/completion" % n)
               for n in ("cuflagd", "hostfunc", "event-blocking"))
    if c and h and e:
        parts.append("at 1 000 completions a second the CPU a completion (waiter's and daemon's) "
                     "is %.2f x a host function's and %.2f x a blocking event's" % (c / h, c / e))
    tput = {t["name"]: t for t in data["throughput"]}
    if "cuflagd-group-10000" in tput:
        parts.append("10 000 slots through groups make %s completions a second"
                     % count(tput["cuflagd-group-10000"]["per_s"]))
    lat = rows(data)
    if "scale-hot" in lat and "scale-hot-alone" in lat:
        parts.append("with 16 x 12 x 1024 grouped slots pending, a wake reads p50 %s µs "
                     "against %s alone" % (f1(lat["scale-hot"]["p50_us"]),
                                           f1(lat["scale-hot-alone"]["p50_us"])))
    s = "; ".join(parts)
    return s[:1].upper() + s[1:] + "."


def render(doc, view):
    data = doc["data"]
    views = {"": full, "headline": headline, "summary": summary}
    if view not in views:
        raise SystemExit("cuflag-bench: no view %r (%s)" % (view, ", ".join(v or '""' for v in views)))
    out = views[view](data)
    return out if isinstance(out, str) else "\n".join(out)
