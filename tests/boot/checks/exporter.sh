# SPDX-License-Identifier: MIT
# The packaged exporter (cuflag-exporter.service) scraped by a real
# Prometheus server, on Debian 12 booted with systemd as PID 1: the unit
# starts as an unprivileged user in the daemon's admin group, sees another
# user's client, and PromQL over Prometheus' HTTP API returns the counts the
# daemon keeps. Host side: scripts/test-packages.sh passes the .debs and
# hold-stuck.py with --file, and boots a root with prometheus installed.
. /opt/cuflag-boot/lib.sh
cd "$BOOT_FILES"

expect "apt installs the packages" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y "$BOOT_FILES"/cuflagd_*.deb "$BOOT_FILES"/libcuflag-client0_*.deb \
	"$BOOT_FILES"/python3-cuflag_*.deb
expect "group cuflag-admin exists" getent group cuflag-admin
refuse "cuflag-exporter.service is not enabled by the installation" \
	systemctl is-enabled cuflag-exporter.service
expect "systemctl start cuflag-exporter" systemctl start cuflag-exporter.service

# A user's client: 50 completions, then one slot armed for good.
useradd --create-home carol
usermod -a -G cuflag carol
run=$(mktemp -d)
chmod 0777 "$run"
as_user carol python3 "$BOOT_FILES/hold-stuck.py" 50 "$run/stop" >"$run/out" 2>&1 &
holder=$!
wait_for 20 grep -q holding "$run/out" || { cat "$run/out"; fail "the client did not start"; }
pid=$(cut -d' ' -f2 "$run/out")
ok "carol's client (pid $pid) completed 50 and holds one slot armed"

get() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
wait_for 20 get http://127.0.0.1:9446/metrics || fail "the exporter does not answer on :9446"
m=$(get http://127.0.0.1:9446/metrics)
echo "$m" | grep -q "^cuflag_up 1" || { echo "$m" | head; fail "cuflag_up is not 1"; }
echo "$m" | grep -q "^cuflag_completions_total{client=\"[0-9]*\",pid=\"$pid\",uid=\"$(id -u carol)\",comm=\"python3\"" ||
	{ echo "$m" | grep cuflag_completions_total; fail "the exporter does not see carol's client"; }
uid=$(stat -c %u "/proc/$(systemctl show -P MainPID cuflag-exporter.service)")
[ "$uid" != 0 ] || fail "the exporter runs as root"
ok "the exporter (uid $uid, a dynamic user) sees another user's client"

# Prometheus, as the package runs it, scraping the exporter every second.
cat >/etc/prometheus/prometheus.yml <<'YML'
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: cuflag
    static_configs:
      - targets: ['127.0.0.1:9446']
YML
expect "systemctl restart prometheus" systemctl restart prometheus.service
q() { python3 - "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[1]})
r = json.load(urllib.request.urlopen(url, timeout=5))
res = r["data"]["result"]
print(res[0]["value"][1] if res else "none")
PY
}
is() { [ "$(q "$1" 2>/dev/null)" = "$2" ]; }
wait_for 60 is "sum(cuflag_completions_total{pid=\"$pid\"})" 50 ||
	fail "PromQL: completions of pid $pid: $(q "sum(cuflag_completions_total{pid=\"$pid\"})")"
ok "PromQL: sum(cuflag_completions_total{pid=\"$pid\"}) = 50"
wait_for 30 is "sum(cuflag_in_flight{pid=\"$pid\"})" 1 || fail "PromQL: in flight"
ok "PromQL: 1 slot in flight"
# --stuck-ms is 10 s by default.
wait_for 30 is "sum by (pid) (cuflag_stuck_slots{pid=\"$pid\"})" 1 ||
	fail "PromQL: stuck slots: $(q "sum(cuflag_stuck_slots{pid=\"$pid\"})")"
ok "PromQL: the armed slot is stuck after --stuck-ms"
expect "cuflagctl stuck names it" sh -c "cuflagctl stuck | grep -Eq '^ *$pid '"
# The exporter counts stuck slots when scraped; the daemon logs them on its
# 250 ms tick and journald takes the line a moment later: wait for it, then
# let several ticks pass to see it is not logged again.
stuck_lines() { journalctl -u cuflagd.service | grep -c "pid=$pid .*stuck: armed"; }
wait_for 10 sh -c "[ \$(journalctl -u cuflagd.service | grep -c 'pid=$pid .*stuck: armed') -ge 1 ]" ||
	fail "the journal names the stuck slot: no line"
sleep 2
[ "$(stuck_lines)" = 1 ] || fail "the journal names it once: $(stuck_lines) lines"
ok "the journal names it once"

touch "$run/stop"
wait $holder || { cat "$run/out"; fail "the client failed"; }
expect "systemctl stop cuflag-exporter" systemctl stop cuflag-exporter.service
