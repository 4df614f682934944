#!/usr/bin/env python3
"""Derive what `podman kube play` runs from deploy/kubernetes/ without rewriting it by hand.

Podman 4.3 plays Pods and ConfigMaps but not DaemonSets, has no GPU device plugin and no
registry to pull the manifests' placeholder workload images from. So this takes the manifests
as they are and changes only what a single machine cannot have:

- the DaemonSet becomes the Pod its template describes (name `xsched-daemon`); its readiness
  probe is dropped (podman turns probes into systemd timers, and there is no systemd here);
- every hostPath `/run/xsched` points at SOCKET_DIR, so a test never touches the host's own;
- in the example pods, the workload containers' image and command are replaced (the placeholders
  `example.com/...` cannot be pulled) and `nvidia.com/gpu` limits, the PriorityClass and the
  affinity are dropped (no device plugin, one node); everything else, init containers, the
  shim's LD_PRELOAD, the socket mount and every XSCHED_* variable with its Downward API
  source, is kept as written;
- every `image:` naming the xsched image becomes IMAGE;
- every emptyDir becomes a host folder of its own beside SOCKET_DIR, mode 0777 (what the kubelet
  gives an emptyDir; podman's is root's, mode 0755, so a non-root init container could not
  copy the shim into it).

Podman 4.3's `kube play` also ignores `hostPID` (the pod gets a PID namespace of its own), so
`daemon-run` gives the same template as a `podman run` command line, which honours it: same
image, command, arguments, environment, user, read-only root, dropped capabilities, memory
limit, mounts (the ConfigMap's files in CONFIG_DIR) and restart policy.

Usage: derive.py daemon|daemon-run|tenants --image IMAGE --socket-dir DIR [--command ROLE=CMD ...]
prints the YAML on standard output. ROLE is a container name (`inference`, `training`); CMD
is run with `sh -c`.
"""

import argparse
import copy
import shlex
import sys
from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parent.parent / "kubernetes"
XSCHED_IMAGE = "ghcr.io/xsched/xsched:latest"
HOST_SOCKET_DIR = "/run/xsched"


def load(name):
    with open(K8S / name, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def retarget(spec, image, socket_dir, pod_name=""):
    """Point the xsched image and the socket's hostPath at this machine's; emptyDirs become
    world-writable host folders beside the socket's."""
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        if c.get("image") == XSCHED_IMAGE:
            c["image"] = image
    for v in spec.get("volumes", []):
        hp = v.get("hostPath")
        if hp and hp.get("path") == HOST_SOCKET_DIR:
            hp["path"] = socket_dir
        if "emptyDir" in v:
            del v["emptyDir"]
            path = f"{socket_dir}.empty/{pod_name}-{v['name']}"
            v["hostPath"] = {"path": path, "type": "Directory"}


def empty_dirs(docs):
    """The host folders `retarget` put in place of emptyDirs (the caller makes them 0777)."""
    return [
        v["hostPath"]["path"]
        for d in docs
        for v in d.get("spec", {}).get("volumes", [])
        if ".empty/" in v.get("hostPath", {}).get("path", "")
    ]


def daemon_pod(image, socket_dir):
    """The DaemonSet's pod template as a Pod, and the ConfigMap it mounts."""
    (ds,) = [d for d in load("daemonset.yaml") if d["kind"] == "DaemonSet"]
    template = copy.deepcopy(ds["spec"]["template"])
    spec = template["spec"]
    spec.pop("tolerations", None)
    for c in spec["containers"]:
        c.pop("readinessProbe", None)
    retarget(spec, image, socket_dir)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{ds['metadata']['name']}-daemon",
            "labels": template["metadata"].get("labels", {}),
            "annotations": template["metadata"].get("annotations", {}),
        },
        "spec": spec,
    }
    return load("configmap.yaml") + [pod]


def daemon_run(image, socket_dir, config_dir, name="xsched-daemon"):
    """The DaemonSet's pod template as `podman run` arguments (after `podman`), with its
    ConfigMap's files to write into CONFIG_DIR first: (argv, {file: text})."""
    docs = daemon_pod(image, socket_dir)
    (pod,) = [d for d in docs if d["kind"] == "Pod"]
    maps = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    spec = pod["spec"]
    (c,) = spec["containers"]
    sc = c.get("securityContext", {})
    argv = ["run", "-d", "--name", name, "--restart", "always"]
    if spec.get("hostPID"):
        argv.append("--pid=host")
    if "runAsUser" in sc:
        argv += ["--user", str(sc["runAsUser"])]
    if sc.get("readOnlyRootFilesystem"):
        argv.append("--read-only")
    if sc.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    for cap in sc.get("capabilities", {}).get("drop", []):
        argv += ["--cap-drop", cap]
    mem = c.get("resources", {}).get("limits", {}).get("memory")
    if mem:
        argv += ["--memory", mem.replace("Mi", "m").replace("Gi", "g")]
    for e in c.get("env", []):
        argv += ["--env", f"{e['name']}={e['value']}"]
    files = {}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        if "hostPath" in v:
            src = v["hostPath"]["path"]
        else:
            src = config_dir
            files.update(maps[v["configMap"]["name"]])
        ro = ":ro" if m.get("readOnly") else ""
        argv += ["--volume", f"{src}:{m['mountPath']}{ro}"]
    argv += ["--entrypoint", c["command"][0], image] + c["command"][1:] + c.get("args", [])
    return argv, files


def tenant_pods(image, socket_dir, commands):
    """The example pods with runnable workloads in place of the placeholders."""
    pods = []
    for pod in load("example-pods.yaml"):
        pod = copy.deepcopy(pod)
        pod["metadata"].pop("namespace", None)
        spec = pod["spec"]
        spec.pop("priorityClassName", None)
        spec.pop("affinity", None)
        spec["restartPolicy"] = "Never"
        for c in spec["containers"]:
            if c["name"] not in commands:
                continue
            c["image"] = image
            c["command"] = ["sh", "-c", commands[c["name"]]]
            limits = c.get("resources", {}).get("limits", {})
            limits.pop("nvidia.com/gpu", None)
            if not limits:
                c.pop("resources", None)
        retarget(spec, image, socket_dir, pod["metadata"]["name"])
        pods.append(pod)
    return pods


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("what", choices=["daemon", "daemon-run", "tenants"])
    p.add_argument("--config-dir", default="/tmp/xsched-config")
    p.add_argument("--image", required=True)
    p.add_argument("--socket-dir", required=True)
    p.add_argument("--command", action="append", default=[], metavar="ROLE=CMD")
    a = p.parse_args()
    if a.what == "daemon-run":
        argv, files = daemon_run(a.image, a.socket_dir, a.config_dir)
        print("podman", shlex.join(argv), "#", "files for --config-dir:", sorted(files))
        return
    if a.what == "daemon":
        docs = daemon_pod(a.image, a.socket_dir)
    else:
        commands = dict(kv.split("=", 1) for kv in a.command)
        docs = tenant_pods(a.image, a.socket_dir, commands)
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
