#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Kubernetes manifests in deploy/, checked offline for what matters
(Debian 12 packages no validator of the Kubernetes schema): the DaemonSet
shares the node's socket directory by hostPath and the node's pid namespace
(hostPID: to name the pods' processes by their pid, comm and cgroup) and asks
for nothing else (no hostIPC or hostNetwork, no privilege, no capability but
CAP_CHOWN for the init container, read-only root file systems, non-root,
RuntimeDefault seccomp, no GPU, resource requests, the host's user
namespace so that it sees the pods' uids); the pod example mounts
that directory where its CUFLAG_SOCKET points, carries the socket's group,
and the daemon's ids agree with the image's (deploy/Dockerfile).

    check-manifests.py DEPLOY_DIR
"""
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("manifests: python3-yaml not installed: skipped")
    sys.exit(77)

problems = []


def need(cond, what):
    if not cond:
        problems.append(what)
    return cond


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def containers(spec):
    return [("init " + c["name"], c) for c in spec.get("initContainers", [])] + \
        [(c["name"], c) for c in spec.get("containers", [])]


def check_pod_spec(where, spec, host_ok=()):
    """What every pod of ours must hold (host namespaces: only those named)."""
    for key in ("hostIPC", "hostPID", "hostNetwork"):
        need(key in host_ok or not spec.get(key, False), f"{where}: {key} is set")
    need(spec.get("automountServiceAccountToken") is False,
         f"{where}: the service account token is mounted")
    psc = spec.get("securityContext", {})
    need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
         f"{where}: no RuntimeDefault seccomp profile")
    for name, c in containers(spec):
        w = f"{where}, container {name}"
        sc = c.get("securityContext", {})
        need(not sc.get("privileged", False), f"{w}: privileged")
        need(sc.get("allowPrivilegeEscalation") is False, f"{w}: privilege escalation allowed")
        need(sc.get("readOnlyRootFilesystem") is True, f"{w}: root file system writable")
        caps = sc.get("capabilities", {})
        need(caps.get("drop") == ["ALL"], f"{w}: capabilities not all dropped")
        need(set(caps.get("add", [])) <= {"CHOWN"}, f"{w}: adds capabilities {caps.get('add')}")
        need(bool(c.get("resources", {}).get("requests")), f"{w}: no resource requests")
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        nonroot = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if caps.get("add"):
            need(name.startswith("init "), f"{w}: a capability outside the init container")
        else:
            need(nonroot is True and uid not in (None, 0), f"{w}: may run as root")


def hostpath_mount(where, spec, container):
    """The mount path of the container's hostPath volume, and the volume."""
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    found = [(m, vols.get(m["name"], {})) for m in container.get("volumeMounts", [])
             if "hostPath" in vols.get(m["name"], {})]
    need(len(found) == 1, f"{where}: {len(found)} hostPath mounts, not 1")
    return found[0] if found else ({}, {})


def main():
    deploy = sys.argv[1]
    docs = load(os.path.join(deploy, "cuflagd-daemonset.yaml"))
    pods = load(os.path.join(deploy, "pytorch-example.yaml"))
    with open(os.path.join(deploy, "Dockerfile")) as f:
        image_id = re.search(r"^ARG CUFLAG_ID=(\d+)$", f.read(), re.M)
    need(image_id, "Dockerfile: no ARG CUFLAG_ID")

    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    if not need(len(ds) == 1, "cuflagd-daemonset.yaml: not one DaemonSet"):
        return
    ds = ds[0]
    need(ds.get("apiVersion") == "apps/v1", "DaemonSet: apiVersion is not apps/v1")
    tmpl = ds["spec"]["template"]
    need(ds["spec"]["selector"]["matchLabels"].items() <= tmpl["metadata"]["labels"].items(),
         "DaemonSet: the selector does not match the template's labels")
    spec = tmpl["spec"]
    check_pod_spec("DaemonSet", spec, host_ok=("hostPID",))
    need(spec.get("hostPID") is True,
         "DaemonSet: no hostPID (the daemon would see every other pod's clients as pid 0, "
         "with no process name, unit or pod)")
    need(spec.get("hostUsers", True) is not False,
         "DaemonSet: hostUsers: false (every other pod's uid would be nobody to cuflagd)")
    daemon = [c for c in spec["containers"] if c["name"] == "cuflagd"]
    if not need(len(daemon) == 1, "DaemonSet: no container cuflagd"):
        return
    daemon = daemon[0]
    need("nvidia.com/gpu" not in str(daemon.get("resources")), "DaemonSet: cuflagd asks for a GPU")
    need("limits" not in daemon["resources"] or "cpu" not in daemon["resources"]["limits"],
         "DaemonSet: a CPU limit throttles the scanner")
    args = daemon.get("args", [])
    sock = args[args.index("--socket") + 1] if "--socket" in args else None
    need(sock, "DaemonSet: cuflagd has no --socket")
    mount, vol = hostpath_mount("DaemonSet", spec, daemon)
    need(sock and os.path.dirname(sock) == mount.get("mountPath"),
         f"DaemonSet: --socket {sock} is not in the hostPath mount {mount.get('mountPath')}")
    host_dir = vol.get("hostPath", {}).get("path")
    need(vol.get("hostPath", {}).get("type") == "DirectoryOrCreate",
         "DaemonSet: the hostPath is not DirectoryOrCreate")
    gid = spec["securityContext"].get("runAsGroup")
    need(image_id and gid == int(image_id.group(1)) ==
         spec["securityContext"].get("runAsUser"),
         f"DaemonSet: runs as {spec['securityContext'].get('runAsUser')}:{gid}, the image's "
         f"cuflag is {image_id and image_id.group(1)}")
    # The exporter sidecar: cuflagctl metrics --listen on a port named metrics,
    # announced to Prometheus, in the daemon's admin group (which no client pod
    # lists) and with the socket mounted where --socket says.
    exp = [c for c in spec["containers"] if c["name"] == "exporter"]
    if need(len(exp) == 1, "DaemonSet: no exporter container"):
        exp = exp[0]
        cmd = exp.get("command", [])
        need(cmd[:1] == ["cuflagctl"] and "metrics" in cmd and "--listen" in cmd,
             "DaemonSet: the exporter does not run cuflagctl metrics --listen")
        listen = cmd[cmd.index("--listen") + 1] if "--listen" in cmd else ""
        port = [p for p in exp.get("ports", []) if p.get("name") == "metrics"]
        need(port and listen.rsplit(":", 1)[-1] == str(port[0].get("containerPort")),
             f"DaemonSet: the exporter listens on {listen}, its port metrics is {port}")
        ann = tmpl["metadata"].get("annotations", {})
        need(port and ann.get("prometheus.io/port") == str(port[0]["containerPort"]),
             "DaemonSet: prometheus.io/port does not name the exporter's port")
        need(ann.get("prometheus.io/scrape") == "true", "DaemonSet: not prometheus.io/scrape")
        need("--socket" in cmd and cmd[cmd.index("--socket") + 1] == sock,
             "DaemonSet: the exporter asks another socket than the daemon's")
        need(any(m.get("mountPath") == mount.get("mountPath")
                 for m in exp.get("volumeMounts", [])),
             "DaemonSet: the exporter does not mount the socket's directory")
        admin = args[args.index("--admin-group") + 1] if "--admin-group" in args else None
        egid = exp.get("securityContext", {}).get("runAsGroup", gid)
        need(admin == str(egid) and egid != gid,
             f"DaemonSet: the exporter's group {egid} is not the daemon's --admin-group "
             f"{admin}, or is the socket's")
    init = spec.get("initContainers", [])
    need(any(f"{gid}:{gid}" in " ".join(c.get("command", [])) for c in init),
         "DaemonSet: no init container hands the socket directory to the daemon's ids")

    pod = [d for d in pods if d.get("kind") == "Pod"]
    if not need(len(pod) == 1, "pytorch-example.yaml: not one Pod"):
        return
    pspec = pod[0]["spec"]
    check_pod_spec("Pod", pspec)
    need(gid in pspec["securityContext"].get("supplementalGroups", []),
         f"Pod: the socket's group {gid} is not among its supplementalGroups")
    need(9432 not in pspec["securityContext"].get("supplementalGroups", []),
         "Pod: in the daemon's admin group")
    c = pspec["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    mount, vol = hostpath_mount("Pod", pspec, c)
    need(vol.get("hostPath", {}).get("path") == host_dir,
         f"Pod: mounts {vol.get('hostPath', {}).get('path')}, not the daemon's {host_dir}")
    need(vol.get("hostPath", {}).get("type") == "Directory",
         "Pod: the hostPath is not of type Directory (a node without cuflagd would get an empty one)")
    need(env.get("CUFLAG_SOCKET") == os.path.join(mount.get("mountPath", ""),
                                                   os.path.basename(sock or "")),
         f"Pod: CUFLAG_SOCKET {env.get('CUFLAG_SOCKET')} is not the socket in its mount")
    need("nvidia.com/gpu" in c["resources"].get("limits", {}), "Pod: asks for no GPU")


main()
for p in problems:
    print("manifests:", p)
if problems:
    sys.exit(1)
print("manifests: ok (DaemonSet and pod example)")
