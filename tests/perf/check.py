#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# check.py PROGRAM ARGS...: run a measuring program with --json and check that
# its report holds every row, ratio and object that program promises (its
# figures are not judged: they depend on the machine).
import json
import os
import subprocess
import sys

out = subprocess.run(sys.argv[1:] + ["--json"], stdout=subprocess.PIPE, check=True).stdout
doc = json.loads(out)
prog = os.path.basename(sys.argv[1])
names = {r["name"]: r for r in doc["results"]}
tput = {t["name"]: t for t in doc["throughput"]}
iterations = doc["config"]["iterations"]


def measured(n):
    assert n in names, n
    assert names[n]["n"] == iterations and names[n]["p50_us"] > 0, names[n]


def ratio(k, at_least=0.0):
    v = doc["ratios"][k]
    assert v is not None and v >= at_least and (at_least or v > 0), (k, v)


def check_scale():
    # The fleet's row is named by the fleet actually used (it shrinks when
    # RLIMIT_NOFILE is low), e.g. scale-16x1024.
    scale = doc["scale"]
    fleet = scale["fleet"]
    assert fleet == "scale-%dx%d" % (scale["fleet_processes"],
                                     scale["fleet_slots_per_process"]), scale
    measured("scale-1x1")
    measured(fleet)
    ratio(fleet + "_p50/scale-1x1_p50")
    assert scale["exact"] is True and scale["complete_ms"] > 0, scale
    assert scale["armed"] == scale["armed_processes"] * scale["armed_slots_per_process"] > 0


def check_metrics_cost():
    for n in ("metrics-on", "metrics-off"):
        assert names[n]["n"] > 0 and tput[n]["per_s"] > 0, (names[n], tput[n])
    for k in ("metrics-on/metrics-off", "metrics-on_p50/metrics-off_p50",
              "metrics-on_p99/metrics-off_p99"):
        ratio(k)


def check_scale_pending():
    measured("scale-hot-alone")
    measured("scale-hot")
    cold = names["scale-cold"]
    assert cold["n"] > 0 and cold["p50_us"] > 0 and "error" not in cold, cold
    ratio("scale-hot_p50/scale-hot-alone_p50")
    ratio("scale-hot_p50/max(5xscale-hot-alone_p50,50us)")
    # CPU time comes in clock ticks: a short hold may read none.
    ratio("scale-pending_daemon_cpu/wall", at_least=0.0)
    # Every completion of the load counted exactly once.
    assert doc["ratios"]["scale-pending_counted/armed"] == 1, doc["ratios"]


if prog == "cuflag-bench" and doc["mode"] == "gpu":
    # The GPU mode (run by hand on a GPU machine: here it exits 77).
    for n in ("spin-floor", "hostfunc", "event-blocking", "event-spin", "inproc-scanner",
              "cuflagd", "cuflagd-spin", "cuflagd-group", "pingpong-rtt", "pingpong-1way",
              "devsig-spin", "devsig-spin-1way", "devsig-blocked", "launch+memop-spin",
              "xproc-cuflagd", "xproc-ipc-event", "xproc-poll-byte", "xproc-gpu-cuflag-wait",
              "xproc-gpu-ipc-event-wait"):
        assert n in names and names[n]["n"] > 0 and names[n]["p50_us"] > 0, names.get(n, n)
    for n in ("flag-ceiling", "hostfunc", "cuflagd", "flag-ceiling-bare", "hostfunc-bare",
              "cuflagd-bare", "cuflagd-10000", "cuflagd-group-10000", "devsig-1M"):
        assert tput[n]["per_s"] > 0 and tput[n]["completions"] > 0, tput[n]
    for k in ("cuflagd_p50/hostfunc_p50", "cuflagd_p99/hostfunc_p99",
              "cuflagd-spin_p50/spin-floor_p50", "cuflagd_p50/event-blocking_p50",
              "cuflagd_p50/inproc-scanner_p50", "throughput_cuflagd/hostfunc",
              "throughput_cuflagd/ceiling", "throughput_cuflagd-bare/hostfunc-bare",
              "throughput_cuflagd-bare/ceiling-bare", "cuflagd-group_p50/cuflagd_p50",
              "throughput_cuflagd-group-10000/cuflagd-10000",
              "devsig-spin-1way_p50/pingpong-1way_p50", "devsig-blocked_p50/cuflagd_p50",
              "launch+memop-spin_p50/pingpong-rtt_p50", "xproc-cuflagd_p50/cuflagd_p50",
              "xproc-cuflagd_p99/xproc-ipc-event_p99",
              "xproc-gpu-cuflag-wait_p50/xproc-gpu-ipc-event-wait_p50"):
        ratio(k)
    assert doc["cpu"]["idle_pct_core"] is not None, doc["cpu"]
    assert doc["cpu"]["us_per_completion"] is not None, doc["cpu"]
elif prog == "cuflag-bench":
    assert doc["mode"] == "cpu", doc["mode"]
    for n in ("eventfd-direct", "inproc-scanner", "cuflagd"):
        measured(n)
    assert tput["cuflagd"]["per_s"] > 0, tput
    for k in ("us_per_completion", "idle_pct_core"):
        assert k in doc["cpu"], k
    for k in ("cuflagd_p50/eventfd-direct_p50", "cuflagd_p50/inproc-scanner_p50",
              "cuflagd_p99/eventfd-direct_p99", "cuflagd_p99/inproc-scanner_p99"):
        ratio(k)
    # The scanner's cost: both modes at every load, every completion counted.
    cost = {c["name"]: c for c in doc["scanner_cost"]}
    for m in ("spin", "adaptive") if "--no-paced" not in sys.argv else ():
        for k in ("1k", "10k", "100k", "burst", "mixed", "queued-ms", "serial-ms"):
            n = "scan-%s-%s" % (m, k)
            assert names[n]["n"] > 0 and cost[n]["per_s"] > 0, (names[n], cost[n])
            assert cost[n]["daemon_pct_core"] is not None, cost[n]
            for p in ("p50", "p99"):
                ratio("scan-adaptive-%s_%s/scan-spin-%s_%s" % (k, p, k, p))
            assert "scan-adaptive-%s_cpu/scan-spin-%s_cpu" % (k, k) in doc["ratios"], k
    if "--no-paced" not in sys.argv:
        ratio("scan-adaptive-queued-ms_us/scan-adaptive-serial-ms_us")
    # The runs of tests/perf/ it can add (--scale, --metrics-cost), when asked.
    if doc["config"]["scale"]:
        check_scale()
    else:
        assert doc["scale"] is None, doc["scale"]
    if "metrics-on" in names:
        check_metrics_cost()
    # Others' pending work: on unless asked off, the run is tiny or the
    # daemon is one at --socket (the rows need their own).
    if doc["config"]["scale_pending"]:
        check_scale_pending()
    else:
        assert "scale-hot" not in names, names["scale-hot"]
    if not {"--no-scale-pending", "--socket"} & set(sys.argv) and \
            doc["config"]["iterations"] >= 100:
        assert doc["config"]["scale_pending"], doc["config"]
    # The first connect: warm, and one that starts the user's own daemon,
    # which then idles at next to no CPU (not judged: the machine's).
    if "--socket" not in sys.argv:
        for n, rounds in (("connect-warm", 100), ("connect-autospawn", 30)):
            assert names[n]["n"] == rounds and names[n]["p50_us"] > 0, names[n]
        ratio("connect-autospawn_p50/connect-warm_p50")
        ratio("connect-autospawn_p99/connect-warm_p99")
        assert doc["connect"]["started_daemon_idle_pct_core"] is not None, doc["connect"]
elif prog == "perf-handoff":
    measured("cuflagd")
    # The handoff rows pin to two CPUs; with one they are there, unmeasured.
    for n in ("handoff-thread", "handoff-process"):
        if len(os.sched_getaffinity(0)) >= 2:
            measured(n)
        else:
            assert names[n]["n"] == 0 and "error" in names[n], names[n]
    if len(os.sched_getaffinity(0)) >= 2:
        ratio("handoff-process_p50/handoff-thread_p50")
        ratio("cuflagd_p50/handoff-process_p50")
elif prog == "perf-groups":
    measured("cuflagd")
    measured("cuflagd-group")
    for n in ("cuflagd-10000", "cuflagd-group-10000"):
        assert tput[n]["per_s"] > 0 and tput[n]["completions"] > 0, tput[n]
        assert tput[n]["daemon_us_per_completion"] is not None, tput[n]
    ratio("cuflagd-group_p50/cuflagd_p50")
    ratio("throughput_cuflagd-group-10000/cuflagd-10000")
    # CPU time comes in clock ticks: a short group run may cost the daemon none.
    ratio("daemon_cpu_cuflagd-group-10000/cuflagd-10000", at_least=0.0)
elif prog == "perf-arm":
    assert doc["arm"]["per_s_1_thread"] > 0 and doc["arm"]["per_s_8_threads"] > 0, doc["arm"]
elif prog == "perf-scale":
    check_scale()
elif prog == "perf-metrics-cost":
    check_metrics_cost()
elif prog == "perf-scale-pending":
    check_scale_pending()
else:
    sys.exit("check.py: nothing known about " + prog)
