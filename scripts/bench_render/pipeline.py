# SPDX-License-Identifier: MIT
"""The table of a pipeline hand-off run (examples/python/pipeline.py --json),
for scripts/bench-tables.py: per mode, the hand-off's p50 and p99 and the CPU
per hand-off of each process and of cuflagd, each the median of the run's
rounds with their min-max. One view ("")."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve import spread  # noqa: E402  (median (min-max), as the serving tables)

KIND = "pipeline"

LABELS = {
    "asyncio": "**asyncio**: imported slot, `await wait_async`",
    "gpu-wait": "**gpu-wait**: decode's stream waits on the slot (`cuda_wait`)",
    "ipc-event": "IPC event, a thread synchronizing it",
    "ipc-poll": "IPC event, a loop querying it",
    "poll-byte": "a shared word the stream writes, a loop polling it",
}


def render(doc, view):
    data = doc["data"]
    out = ["| decode learns of the tensor | p50 µs | p99 µs | CPU µs a hand-off: prefill | "
           "decode | cuflagd |", "|---|---|---|---|---|---|"]
    for s in data["summary"]:
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            LABELS.get(s["mode"], s["mode"]), spread(s["p50_us"], "%.0f"),
            spread(s["p99_us"], "%.0f"), spread(s["prefill_cpu_us"], "%.0f"),
            spread(s["decode_cpu_us"], "%.0f"), spread(s["daemon_cpu_us"], "%.0f")))
        if s.get("gpu_side_p50_us"):
            out.append("| IPC event, decode's stream waits on it (`cuStreamWaitEvent`) | %s | %s "
                       "| (in the row above) | | |" % (spread(s["gpu_side_p50_us"], "%.0f"),
                                                     spread(s["gpu_side_p99_us"], "%.0f")))
    return "\n".join(out) + "\n"
