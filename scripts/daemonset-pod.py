#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The DaemonSet's pod, for podman on one machine: podman kube play knows
Pods and Deployments, not DaemonSets (podman 4.3 says "does not contain any
supported kube kind"). This writes the pod template of
deploy/cuflagd-daemonset.yaml as a Pod: the daemon and the exporter sidecar,
with the image given, the socket directory a directory of this machine, the
exporter's port published on the host, and what only a cluster has (node
selector, tolerations, priority class) left out.

    scripts/daemonset-pod.py [--image IMAGE] [--socket-dir DIR] [--port PORT] > pod.yaml
    podman kube play pod.yaml

Needs python3-yaml."""
import argparse
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def pod(daemonset, image, socket_dir, port, name="cuflagd"):
    ds = [d for d in yaml.safe_load_all(open(daemonset)) if d and d.get("kind") == "DaemonSet"][0]
    tmpl = ds["spec"]["template"]
    spec = tmpl["spec"]
    for key in ("nodeSelector", "tolerations", "priorityClassName"):
        spec.pop(key, None)
    for c in spec.get("initContainers", []) + spec["containers"]:
        c["image"] = image
        for p in c.get("ports", []):
            if p.get("name") == "metrics":
                p["hostPort"] = port
    for v in spec["volumes"]:
        if "hostPath" in v:
            v["hostPath"] = {"path": socket_dir, "type": "Directory"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": tmpl["metadata"]["labels"],
                         "annotations": tmpl["metadata"].get("annotations", {})},
            "spec": spec}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--daemonset", default=os.path.join(HERE, "..", "deploy",
                                                        "cuflagd-daemonset.yaml"))
    ap.add_argument("--image", default="localhost/cuflagd:0.1.0",
                    help="the image of every container (scripts/build-images.sh builds it)")
    ap.add_argument("--socket-dir", default="/run/cuflagd",
                    help="the directory of this machine that holds the socket")
    ap.add_argument("--port", type=int, default=9446, help="the exporter's port on the host")
    ap.add_argument("--name", default="cuflagd", help="the pod's name")
    args = ap.parse_args()
    yaml.safe_dump(pod(args.daemonset, args.image, os.path.abspath(args.socket_dir), args.port,
                       args.name), sys.stdout)


if __name__ == "__main__":
    main()
