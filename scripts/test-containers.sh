#!/bin/sh
# The DaemonSet's pod from images built out of the Debian packages, with no
# registry, as docs/kubernetes.md says to try it: the image by
# scripts/build-images.sh (a Debian 12 root made by debootstrap, the packages
# installed in it, committed as localhost/cuflagd:0.1.0 by buildah); then the
# pod template of deploy/cuflagd-daemonset.yaml as a Pod
# (scripts/daemonset-pod.py: the daemon and the exporter sidecar, the socket
# directory a hostPath) played by podman. Checked: the
# daemon answers cuflagctl in its container, a client in another container
# of the node is served through the shared socket, and the exporter's port
# answers GET /metrics with that client's completions.
#   scripts/test-containers.sh          build the packages, then the test
#   DEBS=dir scripts/test-containers.sh on packages built before
# Exit 77 (one line why) where this machine cannot: not root, no buildah,
# podman or debootstrap, or podman cannot run a container here.
set -eu
cd "$(dirname "$0")/.."
skip() { echo "containers: $*: skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root"
# (catatonit: podman's pause container of a pod is built from it.)
for t in buildah podman debootstrap python3 catatonit; do
	command -v $t >/dev/null 2>&1 || skip "$t not installed"
done
python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
podman info >/dev/null 2>&1 || skip "podman cannot run here ($(podman info 2>&1 | tail -n 1))"

work=$(mktemp -d /var/tmp/cuflag-containers.XXXXXX)
image=localhost/cuflagd:0.1.0
pod=cuflagd-test
cleanup() {
	podman pod rm -f "$pod" >/dev/null 2>&1 || true
	podman rmi -f "$image" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

debs=${DEBS:-}
if [ -z "$debs" ]; then
	debs=$work/debs
	mkdir -p "$debs"
	scripts/build-debs.sh "$debs"
fi

# 1. The image: scripts/build-images.sh, as the docs name it.
if ! DEBS=$debs scripts/build-images.sh "$image" >"$work/images.log" 2>&1; then
	cat "$work/images.log"
	grep -q "debootstrap failed" "$work/images.log" && skip "debootstrap failed (no mirror?)"
	echo "containers: scripts/build-images.sh failed"
	exit 1
fi
echo "containers: built $image from the packages"

# 2. The DaemonSet's pod template as a Pod: the socket directory in $work,
# the exporter's port published on a free one of the host's.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/run-cuflagd"
scripts/daemonset-pod.py --image "$image" --socket-dir "$work/run-cuflagd" --port "$port" \
	--name "$pod" >"$work/pod.yaml"
# podman asks for 1048576 open files and as many processes by default: no
# more than this machine's hard limits (a container or CI runner may have less).
lim() { # the hard limit named $1 in /proc/self/limits
	awk -v n="$1" 'index($0, n) == 1 { v = $(NF - 1); print v == "unlimited" ? 1048576 : v }' \
		/proc/self/limits
}
nofile=$(lim "Max open files")
nproc=$(lim "Max processes")
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
	"$nofile" "$nofile" "$nproc" "$nproc" >"$work/containers.conf"
export CONTAINERS_CONF="$work/containers.conf"
# A runtime this machine does not let set up a container (rlimits, namespaces
# refused: a sandbox, a nested container) is the machine's limit, not ours.
if ! podman run --rm --entrypoint /bin/true "$image" >"$work/run.log" 2>&1; then
	skip "podman cannot start a container here: $(grep -o 'crun: .*' "$work/run.log" | head -n 1)"
fi
if ! podman kube play "$work/pod.yaml" >"$work/play.log" 2>&1; then
	cat "$work/play.log"
	grep -q 'OCI permission denied' "$work/play.log" &&
		skip "podman cannot start the pod here: $(grep -o 'crun: [^"]*' "$work/play.log" | head -n 1)"
	echo "containers: podman kube play failed"
	exit 1
fi
daemon=$pod-cuflagd
ready() { podman exec "$daemon" cuflagctl --socket /run/cuflagd/cuflagd.sock status >/dev/null 2>&1; }
i=0
until ready; do
	i=$((i + 1))
	[ $i -lt 100 ] || { podman logs "$daemon" 2>&1 | tail; echo "containers: the daemon did not answer"; exit 1; }
	sleep 0.1
done
echo "containers: the pod runs; cuflagd answers cuflagctl in its container"

# 3. A client in a container of its own, as a GPU pod would be: the socket's
# group 9431, the socket directory mounted.
podman run --rm --user 1000:1000 --group-add 9431 -v "$work/run-cuflagd:/run/cuflagd" \
	-e CUFLAG_SOCKET=/run/cuflagd/cuflagd.sock --entrypoint python3 "$image" -c '
import cuflag
with cuflag.Client() as c:
    s = c.acquire()
    for _ in range(25):
        t = s.arm()
        s.store(t)
        s.wait(t, timeout=5)
print("served")' | grep -q served || { echo "containers: a client container was not served"; exit 1; }
echo "containers: a client in another container was served through the shared socket"

# 4. The exporter sidecar on its port.
python3 - "$port" <<'PY' || exit 1
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/metrics"
end = time.monotonic() + 10
while True:
    try:
        body = urllib.request.urlopen(url, timeout=2).read().decode()
        break
    except OSError:
        if time.monotonic() > end:
            sys.exit("containers: the exporter does not answer on its port")
        time.sleep(0.2)
lines = body.splitlines()
if "cuflag_up 1" not in lines:
    sys.exit("containers: the exporter says the daemon is down")
done = [l for l in lines if l.startswith("cuflag_daemon_completions_total ")]
if not done or float(done[0].split()[1]) < 25:
    sys.exit(f"containers: completions not counted: {done}")
print(f"containers: the exporter sidecar answers GET /metrics ({done[0]})")
PY
echo "containers: ok"
