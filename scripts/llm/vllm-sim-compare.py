#!/usr/bin/env python3
"""The engine simulator against real vLLM, for the very same requests.

  python3 scripts/llm/vllm-sim-compare.py fit DIR
      the step-time fit from a vllm-bench.py run (DIR/results/alone.json: requests one at a
      time; DIR/results/capacity.json: all at once): β0, β1, β2 in µs, printed as JSON
  python3 scripts/llm/vllm-sim-compare.py compare DIR [--xsched BIN] [--engine PRESET]
                                                      [--step-us fit|B0,B1,B2]
      every measured run of DIR replayed through the simulator (`xsched llm replay`: the same
      arrivals, prompts and lengths, the same policy in the same place) and the table of
      measured against simulated mean and P99 TTLT per cell and arm (DIR/sim-table.md);
      `--step-us fit` replaces the preset's step time by DIR's own fit (the machine's speed
      that day: a shared VM's speed moves between days)

How the fit reads vLLM's own client's figures (as vidur profiles operators, from timings):
one request alone decodes one token a step, so its median inter-token gap is β0 + β2; the
capacity run's median gap, with --seqs requests decoding at once, is β0 + seqs·β2; the
time to a first token alone, against the prompt's tokens, has slope β1. β3 (attention) is
left at 0: the window is 2 048 tokens and the gaps do not resolve it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from quantile import quantile  # noqa: E402  (scripts/quantile.py)

ARMS = {
    "fcfs": ("fcfs", "engine"),
    "engine": ("sagesched", "engine"),
    "gateway": ("sagesched", "gateway"),
    "oracle": ("sagesched-oracle", "engine"),
}


def load(path):
    with open(path) as f:
        return json.load(f)


def fit(out, seqs):
    alone = load(os.path.join(out, "results", "alone.json"))
    full = load(os.path.join(out, "results", "capacity.json"))
    gaps = lambda r: [g for itl in r["itls"] for g in itl[1:]]
    one = quantile(gaps(alone), 0.5)
    many = quantile(gaps(full), 0.5)
    b2 = max(0.0, (many - one) / max(seqs - 1, 1))
    b0 = one - b2
    xs, ys = alone["input_lens"], alone["ttfts"]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b1 = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return {
        "beta_us": [round(b0 * 1e6, 1), round(max(b1, 0.0) * 1e6, 2), round(b2 * 1e6, 1)],
        "decode_gap_alone_ms": round(one * 1e3, 2),
        "decode_gap_full_ms": round(many * 1e3, 2),
        "ttft_intercept_ms": round((my - b1 * mx) * 1e3, 1),
        "seqs": seqs,
    }


def replay(args, out, name, policy, order_at):
    """The measured run `name` through the simulator: its JSON line."""
    res = load(os.path.join(out, "results", name))
    run = int(name.split("-run")[1].split("-")[0]) if "-run" in name else 0
    prompts = [json.loads(l)["prompt"] for l in open(os.path.join(out, f"requests-{run}.jsonl"))]
    t0 = min(res["start_times"])
    rows = [{"arrival": s - t0, "prompt": p, "input_tokens": i, "output_tokens": o}
            for s, p, i, o in zip(res["start_times"], prompts, res["input_lens"], res["output_lens"])]
    path = os.path.join(out, "replay", name.replace(".json", ".jsonl"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    warm = os.path.join(out, "replay", "warm.jsonl")
    if not os.path.exists(warm):
        with open(warm, "w") as f:
            for l in open(os.path.join(out, "warm.jsonl")):
                r = json.loads(l)
                f.write(json.dumps({"prompt": r["prompt"], "input_tokens": 0,
                                    "output_tokens": r["output_tokens"]}) + "\n")
    cmd = [args.xsched, "llm", "replay", "--requests", path, "--warm", warm, "--engine",
           args.engine, "--max-num-seqs", str(args.seqs), "--policy", policy, "--order-at", order_at]
    if args.step_us:
        cmd += ["--step-us", args.step_us]
    line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[0]
    sim = json.loads(line)
    lat = res["latencies"]
    measured = {"mean_ttlt": sum(lat) / len(lat), "p99_ttlt": quantile(lat, 0.99)}
    return measured, sim


def compare(args):
    out = args.dir
    if args.step_us == "fit":
        args.step_us = ",".join(str(b) for b in fit(out, args.seqs)["beta_us"])
        print(f"step time: {args.step_us} µs (this run's fit)", flush=True)
    rows = defaultdict(lambda: {"m_mean": [], "s_mean": [], "m_p99": [], "s_p99": []})
    for name in sorted(os.listdir(os.path.join(out, "results"))):
        parts = name[:-5].split("-")
        if len(parts) < 4 or parts[0] not in ("poisson", "bursty"):
            continue
        arm = name[:-5].split("-", 3)[3]
        if arm not in ARMS:
            continue
        policy, order_at = ARMS[arm]
        m, s = replay(args, out, name, policy, order_at)
        key = (parts[0], float(parts[1]), arm)
        rows[key]["m_mean"].append(m["mean_ttlt"])
        rows[key]["s_mean"].append(s["mean_ttlt"])
        rows[key]["m_p99"].append(m["p99_ttlt"])
        rows[key]["s_p99"].append(s["p99_ttlt"])
        print(json.dumps({"run": name, "measured": m, "simulated": {k: s[k] for k in ("mean_ttlt", "p99_ttlt")}}), flush=True)
    lines = ["| arrivals | load | arm | measured mean TTLT (s) | simulated | error | measured P99 | simulated | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    mean = lambda v: sum(v) / len(v)
    for (kind, load_, arm), r in sorted(rows.items()):
        mm, sm, mp, sp = mean(r["m_mean"]), mean(r["s_mean"]), mean(r["m_p99"]), mean(r["s_p99"])
        lines.append(f"| {kind} | {load_} | {arm} | {mm:.2f} | {sm:.2f} | {100 * (sm / mm - 1):+.1f} % "
                     f"| {mp:.2f} | {sp:.2f} | {100 * (sp / mp - 1):+.1f} % |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "sim-table.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["fit", "compare"])
    ap.add_argument("dir")
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--xsched", default=os.path.join(ROOT, "target", "release", "xsched"))
    ap.add_argument("--engine", default="smollm2-135m-cpu")
    ap.add_argument("--step-us", help="`fit` (DIR's own) or B0,B1,B2 in µs; default: the preset's")
    args = ap.parse_args()
    if args.what == "fit":
        print(json.dumps(fit(args.dir, args.seqs)))
    else:
        compare(args)


if __name__ == "__main__":
    main()
