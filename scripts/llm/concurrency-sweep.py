#!/usr/bin/env python3
"""Learned concurrency against every fixed `--concurrency`, in front of llama.cpp's llama-server.

One `llama-server` (`--parallel SLOTS`, SmolLM2-135M); per round, for each fixed concurrency 1 to
SLOTS and for `--learn-concurrency` (at most SLOTS), in an order that alternates by round, a fresh
FCFS gateway loaded with the same `--requests` ShareGPT prompts arriving at `--rate` a second
(well above what the engine serves, so the gateway's queue holds a backlog throughout), each
asking for its recorded answer's length (at most `--max-tokens`) with `ignore_eos`. Throughput:
the tokens streamed back over the run's span (first send to last answer's end). Prints a
markdown table and writes every sample under --out.

Usage: python3 scripts/llm/concurrency-sweep.py --out DIR [--rounds 2] [--requests 120] [--rate 50]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import json
import statistics
import subprocess
import urllib.request

# The engine, its options and gateway-bench.py's helpers.
from llmbench import bench, engine_options, start_engine

GATEWAY = "127.0.0.1:18192"


def run(args, config, rnd):
    """One run: (tokens a second, mean TTLT s, the learned concurrency or None)."""
    extra = ["--concurrency", str(args.slots)]
    if config == "learned":
        extra.append("--learn-concurrency")
    else:
        extra[1] = str(config)
    gw = bench.Procs()
    samples = args.out / f"round{rnd}-{config}.jsonl"
    try:
        gw.start([args.xsched, "llm", "serve", "--listen", GATEWAY,
                  "--upstream", "http://127.0.0.1:18191", "--policy", "fcfs"] + extra,
                 args.out / f"gateway-{rnd}-{config}.log")
        bench.wait_up(f"http://{GATEWAY}", "the gateway")
        subprocess.run([args.xsched, "llm", "load", "--url", f"http://{GATEWAY}", "--json",
                        "--recorded-lengths", "--max-tokens", str(args.max_tokens),
                        "--max-prompt-chars", str(args.max_prompt_chars), "--rate", str(args.rate),
                        "--requests", str(args.requests), "--skip", str(2000 + rnd * args.requests),
                        "--duration", "3600", "--samples", str(samples)],
                       check=True, capture_output=True, text=True)
        learned = None
        if config == "learned":
            with urllib.request.urlopen(f"http://{GATEWAY}/metrics") as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("xsched_gateway_upstream_learned_concurrency{"):
                        learned = int(float(line.rsplit(" ", 1)[1]))
    finally:
        gw.stop()
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    ok = [r for r in rows if r["status"] == 200]
    if len(ok) != len(rows):
        raise SystemExit(f"{config}: {len(rows) - len(ok)} of {len(rows)} requests failed")
    span = max(r["sent_s"] + r["ttlt_s"] for r in ok) - min(r["sent_s"] for r in ok)
    tokens = sum(r["chunks"] for r in ok)
    return tokens / span, statistics.mean(r["ttlt_s"] for r in ok), learned


def main():
    ap = argparse.ArgumentParser()
    engine_options(ap)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--only", nargs="+", help="run only these of 1..SLOTS and `learned` "
                    "(the same requests per round as a full sweep's, to compare with one)")
    args = ap.parse_args()
    configs = list(range(1, args.slots + 1)) + ["learned"]
    if args.only:
        configs = [c for c in configs if str(c) in args.only]
    got = {c: [] for c in configs}
    procs = bench.Procs()
    try:
        start_engine(args, procs, 18191)
        for rnd in range(args.rounds):
            for config in configs if rnd % 2 == 0 else configs[::-1]:
                got[config].append(run(args, config, rnd))
                rate, ttlt, learned = got[config][-1]
                print(f"round {rnd + 1} {config}: {rate:.1f} tokens/s, mean TTLT {ttlt:.1f} s"
                      + (f", learned {learned}" if learned else ""), flush=True)
    finally:
        procs.stop()
    fixed = [c for c in configs if c != "learned"]
    best = {rnd: max((got[c][rnd][0] for c in fixed), default=float("nan")) for rnd in range(args.rounds)}
    print(f"\n### Concurrency sweep: {args.requests} requests at {args.rate} a second, "
          f"{args.slots} slots, FCFS\n")
    print("| concurrency | " + " | ".join(f"round {r + 1} tokens/s (of best fixed)" for r in range(args.rounds))
          + " | mean TTLT s |")
    print("|---" * (args.rounds + 2) + "|")
    for c in configs:
        cells = [f"{got[c][r][0]:.1f} ({got[c][r][0] / best[r]:.2f})" for r in range(args.rounds)]
        name = "learned (final " + "/".join(str(x[2]) for x in got[c]) + ")" if c == "learned" else str(c)
        print(f"| {name} | " + " | ".join(cells)
              + f" | {statistics.mean(x[1] for x in got[c]):.1f} |")


if __name__ == "__main__":
    main()
