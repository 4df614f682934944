#!/usr/bin/env python3
"""What the pods change, one thing at a time, outside containers: the demo's foreground and
background workers (`xsched worker --role fg|bg --core 0`) under a daemon at the highest level,
each arm varying one thing the Kubernetes shape differs in (cpu cgroups, the mode variable, the
SLO variable, uids with the ConfigMap's daemon configuration, the training pod's way of keeping
its worker's input open). Arms interleaved, their order reversed every other round; prints the
foreground's P99 over standalone per round and the medians (docs/results/kubernetes-podman.md, "The
foreground's P99 over standalone, in containers and outside").

Needs root (cgroup v1's cpu controller at /sys/fs/cgroup/cpu, setpriv) and target/release/xsched.

Usage: outside.py [--rounds N] [--requests N]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
XSCHED = ROOT / "target" / "release" / "xsched"
CG = Path("/sys/fs/cgroup/cpu")
# name: (background and foreground cgroups, foreground cpu.shares, variables, uid, polling loop)
ARMS = {
    "L3, one cgroup": (("xs-both", "xs-both"), 1024, {"XSCHED_LEVEL": "3"}, None, False),
    "L3, a cgroup each": (("xs-bg", "xs-fg"), 1024, {"XSCHED_LEVEL": "3"}, None, False),
    "L3, a cgroup each, fg 10x shares": (("xs-bg", "xs-fg"), 10240, {"XSCHED_LEVEL": "3"}, None, False),
    "mode preemptive": (("xs-bg", "xs-fg"), 1024, {"XSCHED_MODE": "preemptive"}, None, False),
    "mode preemptive, SLO": (("xs-bg", "xs-fg"), 1024, {"XSCHED_MODE": "preemptive", "slo": "1"}, None, False),
    "mode preemptive, SLO, uids": (("xs-bg", "xs-fg"), 1024, {"XSCHED_MODE": "preemptive", "slo": "1"}, 1000, False),
    "mode preemptive, polling loop": (("xs-bg", "xs-fg"), 1024, {"XSCHED_MODE": "preemptive"}, None, True),
}


def sh(cgroup, command, uid=None, feed=""):
    """`command` run by sh, moved into `cgroup` first, as `uid` if given, its input from `feed`
    (a shell pipeline) if given."""
    user = f"setpriv --reuid {uid} --regid {uid} --clear-groups " if uid else ""
    run = f"{feed} | {user}{command}" if feed else f"exec {user}{command}"
    return ["sh", "-c", f"echo $$ > {CG / cgroup}/cgroup.procs; {run}"]


def foreground_p99(work, socket, requests, arm):
    """One arm (None: the foreground alone, natively): the foreground's P99 in µs."""
    fg_cmd = f"{XSCHED} worker --role fg --core 0 --requests {requests}"
    if arm is None:
        env = {**os.environ, "XSCHED_SCHEDULER": "app"}
        out = subprocess.run(sh("xs-fg", fg_cmd), env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.splitlines()[-1])["p99_us"]
    (bg_cg, fg_cg), shares, variables, uid, loop = arm
    (CG / "xs-fg" / "cpu.shares").write_text(str(shares))
    env = {**os.environ, "XSCHED_SCHEDULER": "global", "XSCHED_SOCKET": socket}
    env.update({k: v for k, v in variables.items() if k != "slo"})
    stop = work / "stop"
    stop.unlink(missing_ok=True)
    feed = f"(while [ ! -e {stop} ]; do sleep 0.05; done)" if loop else ""
    bg = subprocess.Popen(
        sh(bg_cg, f"{XSCHED} worker --role bg --core 0", uid and uid + 1, feed),
        env={**env, "XSCHED_PRIORITY": "0"}, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    fg_env = {**env, "XSCHED_PRIORITY": "10", **({"XSCHED_SLO_US": "20000"} if "slo" in variables else {})}
    out = subprocess.run(sh(fg_cg, fg_cmd, uid), env=fg_env, capture_output=True, text=True, check=True)
    stop.touch()
    bg.stdin.close()
    bg.wait(30)
    return json.loads(out.stdout.splitlines()[-1])["p99_us"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=400)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp())
    work.chmod(0o755)
    config = yaml.safe_load((ROOT / "deploy/kubernetes/configmap.yaml").read_text())
    (work / "xsched.toml").write_text(config["data"]["xsched.toml"])
    socket = str(work / "xsched.sock")
    for g in ("xs-fg", "xs-bg", "xs-both"):
        (CG / g).mkdir(exist_ok=True)
    daemon = subprocess.Popen([XSCHED, "serve", "--socket", socket, "--policy", "hpf", "--config",
                               str(work / "xsched.toml")], stderr=subprocess.DEVNULL)
    ratios = {}
    try:
        time.sleep(1)
        for rnd in range(a.rounds):
            names = list(ARMS) if rnd % 2 == 0 else list(ARMS)[::-1]
            alone = foreground_p99(work, socket, a.requests, None)
            row = {n: round(foreground_p99(work, socket, a.requests, ARMS[n]) / alone, 3) for n in names}
            for n, r in row.items():
                ratios.setdefault(n, []).append(r)
            print(json.dumps({"round": rnd, "standalone_p99_us": alone, **row}), flush=True)
    finally:
        daemon.terminate()
        daemon.wait(10)
    print("\nP99 over standalone, median of rounds:")
    for n in ARMS:
        print(f"  {n:34} {statistics.median(ratios[n]):.3f}  {ratios[n]}")


if __name__ == "__main__":
    main()
