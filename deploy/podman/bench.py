#!/usr/bin/env python3
"""The demo's conflict as the Kubernetes shape: the inference pod's foreground P99 over
standalone beside the training pod, natively (no daemon: XSCHED_SCHEDULER=app) and through
the daemon's container (the pods' own XSCHED_MODE=cooperative, Level 1, and preemptive, the
highest), each round interleaved with `xsched demo --processes` outside containers on the same
machine, so both see the same noise. Prints every run and the medians, one JSON line per
round for the record.

Needs the image (build-image.sh), root, podman, runc and target/release/xsched.

Usage: bench.py [--rounds N] [--requests N]
"""

import argparse
import json
import statistics
import subprocess
import time

import podman_env
from podman_env import Node, podman

FG = "xsched worker --role fg --core 0 --requests {n}"
# The background loop runs until its standard input closes: here, until a line is written to the
# FIFO /tmp/stop. Not a polling shell loop: one that forked `sleep` 20 times a second raised the
# foreground's P99 at Level 3 by 18 %, in containers and outside alike (docs/results/kubernetes-podman.md).
BG = "mkfifo /tmp/stop && cat /tmp/stop | xsched worker --role bg --core 0"
BG_KERNEL_S = 0.001
ARMS = {
    "standalone": None,
    "native": {"XSCHED_SCHEDULER": "app"},
    "cooperative": {"XSCHED_MODE": "cooperative"},
    "preemptive": {"XSCHED_MODE": "preemptive"},
}


def in_containers(node, arm, requests):
    """One arm with the pods: the inference pod's P50/P99 and the training pod's share."""
    env = ARMS[arm] or {"XSCHED_SCHEDULER": "app"}
    only = ["xsched-inference"] if ARMS[arm] is None else None
    pods = node.tenants(
        {"inference": FG.format(n=requests), "training": BG},
        env={"inference": env, "training": env},
        only=only,
    )
    # The training pod first, and its worker running before the inference pod starts: podman
    # starting a pod (runc, conmon, the init container) costs CPU, which must not land on the
    # foreground's measured requests.
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"] != "xsched-training"):
        node.play([pod], f"bench-{arm}-{pod['metadata']['name']}")
        if pod["metadata"]["name"] == "xsched-training":
            deadline = time.monotonic() + 30
            while not node.worker_pids("xsched-training-training"):
                if time.monotonic() > deadline:
                    raise TimeoutError("the training pod's worker did not start")
                time.sleep(0.05)
            time.sleep(0.5)
    node.wait_exit("xsched-inference-inference", timeout=300)
    fg = node.report("xsched-inference-inference")
    share = 0.0
    if only is None:
        podman("exec", "xsched-training-training", "sh", "-c", "echo > /tmp/stop")
        node.wait_exit("xsched-training-training", timeout=60)
        bg = node.report("xsched-training-training")
        share = bg["completed"] * BG_KERNEL_S / max(bg["seconds"], 1e-9)
    node.remove_pods()
    return {"p50_us": fg["p50_us"], "p99_us": fg["p99_us"], "bg_share": round(share, 3)}


def outside(requests):
    """`xsched demo --processes` on this machine: its rows by mode."""
    out = subprocess.run(
        [str(podman_env.ROOT / "target/release/xsched"), "demo", "--processes", "--json",
         "--requests", str(requests)],
        capture_output=True, text=True, check=True, timeout=300,
    ).stdout
    rows = {}
    for r in json.loads(out)["rows"]:
        name = r["mode"] if r["level"] is None else f"L{r['level']}"
        rows[name] = {"p50_us": r["p50_us"], "p99_us": r["p99_us"],
                      "bg_share": r["bg_device_share"]}
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=400)
    a = p.parse_args()
    podman_env.exit_on_sigterm()
    podman_env.recover_locks()
    podman_env.sweep()
    node = Node()
    ratios = {}
    try:
        node.start_daemon()
        node.wait_log(podman_env.DAEMON, "listening")
        for rnd in range(a.rounds):
            # Alternate which side goes first, so neither always runs in the other's wake.
            order = ["outside", "containers"] if rnd % 2 == 0 else ["containers", "outside"]
            got = {}
            for side in order:
                if side == "outside":
                    got["outside"] = outside(a.requests)
                else:
                    got["containers"] = {arm: in_containers(node, arm, a.requests) for arm in ARMS}
            for side, rows in got.items():
                base = rows["standalone"]["p99_us"]
                for mode, r in rows.items():
                    r["p99_ratio"] = round(r["p99_us"] / base, 3)
                    ratios.setdefault((side, mode), []).append(r["p99_ratio"])
            print(json.dumps({"round": rnd, "order": order, "at": time.strftime("%H:%M:%SZ", time.gmtime()), **got}), flush=True)
    finally:
        node.close()
    print("\nP99 over standalone, median of rounds (every round above):")
    for (side, mode), rs in sorted(ratios.items()):
        print(f"  {side:10} {mode:11} {statistics.median(rs):.3f}  {rs}")


if __name__ == "__main__":
    main()
