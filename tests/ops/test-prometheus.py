#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The exporter (cuflagctl metrics --listen) against a real Prometheus
server: cuflagctl metrics is clean under promtool, the exporter answers GET
/metrics, a Prometheus server scrapes it, and PromQL over the HTTP API
(/api/v1/query) returns what the daemon counted: the completions of a
client that came and went, the slots in flight and stuck of one that holds
them. Exits 77 where Prometheus is not installed (Debian: prometheus)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opsutil import ctl, expect, free_port, running_daemon, wait_for  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def sample(text, name, *labels):
    """The value of the first sample of name whose labels hold every text."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(lb in line for lb in labels):
                return float(line.rsplit(" ", 1)[1])
    return None


def query(prom, q):
    """One PromQL instant query: the first result's value, or None."""
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        _, _, body = http_get(url)
    except OSError:
        return None
    r = json.loads(body)
    expect(r["status"] == "success", f"query {q}: {r}")
    res = r["data"]["result"]
    return float(res[0]["value"][1]) if res else None


def main():
    if not PROMETHEUS or not PROMTOOL:
        print("prometheus or promtool not installed (Debian: prometheus): skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="cuflag-prom-")
    os.chmod(tmp, 0o755)
    procs = []
    try:
        with running_daemon(tmp, "--stuck-ms", "200") as sock:
            # A client that came and went: its completions stay in the daemon's count.
            subprocess.run([os.environ["CUFLAG_DEMO"], "--socket", sock, "--device", "sim",
                            "--slots", "2", "--completions", "300"], check=True,
                           capture_output=True, timeout=60)
            # One that holds 3 slots, 2 of them armed and never completed.
            holder = subprocess.Popen([os.environ["SLOT_HOLDER"], sock, "3", "2"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(holder)
            expect(holder.stdout.readline().startswith("ready"), "slot-holder ready")
            time.sleep(0.5)  # past --stuck-ms

            text = ctl("--socket", sock, "metrics").stdout
            r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                               capture_output=True)
            expect(r.returncode == 0, f"promtool check metrics: {r.stdout}{r.stderr}")
            done = sample(text, "cuflag_daemon_completions_total")
            expect(done and done >= 600, f"completions counted: {done}")
            expect(sample(text, "cuflag_in_flight", 'comm="slot-holder"') == 2, "in flight")
            expect(sample(text, "cuflag_stuck_slots", 'comm="slot-holder"') == 2, "stuck")

            port = free_port()
            exporter = subprocess.Popen([os.environ["CUFLAGCTL"], "--socket", sock, "metrics",
                                         "--listen", f"127.0.0.1:{port}"])
            procs.append(exporter)

            def scraped():
                try:
                    return http_get(f"http://127.0.0.1:{port}/metrics")
                except OSError:
                    return None
            status, ctype, body = wait_for("the exporter", scraped)
            expect(status == 200 and ctype.startswith("text/plain; version=0.0.4"),
                   f"GET /metrics: {status} {ctype}")
            expect(sample(body, "cuflag_up") == 1, "cuflag_up 1")
            try:
                http_get(f"http://127.0.0.1:{port}/nothing")
                expect(False, "404 for another path")
            except urllib.error.HTTPError as e:
                expect(e.code == 404, f"another path: {e.code}")

            prom = free_port()
            with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                f.write("global:\n  scrape_interval: 1s\n"
                        "scrape_configs:\n  - job_name: cuflag\n"
                        f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
            server = subprocess.Popen([PROMETHEUS,
                                       f"--config.file={tmp}/prometheus.yml",
                                       f"--storage.tsdb.path={tmp}/data",
                                       f"--web.listen-address=127.0.0.1:{prom}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(server)
            # Each of the expected counts, as Prometheus has them.
            got = wait_for("Prometheus to scrape the daemon's completions", lambda: query(
                prom, 'cuflag_daemon_completions_total{job="cuflag"}') == done, timeout=60)
            expect(got, "completions")
            wait_for("the holder's slots in flight", lambda: query(
                prom, 'sum(cuflag_in_flight{comm="slot-holder"})') == 2, timeout=30)
            wait_for("the holder's stuck slots", lambda: query(
                prom, 'sum by (pid) (cuflag_stuck_slots{comm="slot-holder"})') == 2, timeout=30)
            wait_for("its arms", lambda: query(
                prom, 'sum(cuflag_arms_total{comm="slot-holder"})') == 2, timeout=30)
            # Its cgroup, from cuflag_client_info, joined as docs/operating.md does.
            wait_for("its cgroup by a join on cuflag_client_info", lambda: query(
                prom, 'count(cuflag_in_flight{comm="slot-holder"} * on (instance, client) '
                'group_left (cgroup) cuflag_client_info{cgroup=~"/.*"})') == 1, timeout=30)
            print(f"prometheus: scraped the exporter; PromQL sees {done:.0f} completions, "
                  "2 slots in flight and stuck")
            holder.stdin.close()
            holder.wait(timeout=10)
            exporter.terminate()
            exporter.wait(timeout=10)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
