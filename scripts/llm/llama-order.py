#!/usr/bin/env python3
"""SageSched against FCFS in front of llama.cpp's llama-server (issue 29's first figure).

One `llama-server` (`--parallel SLOTS`, SmolLM2-135M), then for each pair, in alternating
order, a fresh FCFS gateway and a fresh SageSched gateway (`--concurrency SLOTS`): each is first
warmed with `--warm` other prompts (so SageSched's history holds answers), then loaded with the
same `--requests` ShareGPT prompts at the same Azure code arrival gaps (`xsched llm load
--trace azure-code --rate R --recorded-lengths --max-tokens M`: every request asks for its
recorded answer's length with `ignore_eos`). Prints a markdown table: per pair, each policy's
mean and P99 TTLT, its longest relative wait (max over requests of (TTLT − time alone) / time
alone, each prompt's time alone measured once, first, one request at a time straight to the
engine; `--no-alone` skips that pass and the column) and SageSched's mean against FCFS's;
writes every sample under --out.
`--against direct` pairs the FCFS gateway with the same load sent straight to the engine
instead (what the gateway costs when it does not reorder). `--against sagesched,srpt-oracle`
runs each against FCFS in the same pair (the order rotating): the oracle orders by each
request's stated length (its recorded length, sent with `ignore_eos`), the ceiling of any
admission order on this load.

Usage: python3 scripts/llm/llama-order.py --out DIR [--pairs 3] [--first-pair 1] [--rate 0.8] [--requests 40]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import json
import subprocess

# The engine, its options and gateway-bench.py's helpers.
from llmbench import bench, engine_options, start_engine


def load(xsched, port, args, extra, samples=None):
    cmd = [xsched, "llm", "load", "--url", f"http://127.0.0.1:{port}", "--json",
           "--recorded-lengths", "--max-tokens", str(args.max_tokens),
           "--max-prompt-chars", str(args.max_prompt_chars)] + extra
    if samples:
        cmd += ["--samples", str(samples)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def samples(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def relative_wait(path, alone):
    """The longest (TTLT − time alone) / time alone of a run's answered requests, as text."""
    if alone is None:
        return "–"
    rel = [(x["ttlt_s"] - alone[x["prompt"]]) / alone[x["prompt"]]
           for x in samples(path) if x.get("status") == 200 and alone.get(x["prompt"])]
    return f"{max(rel):.1f}" if rel else "–"


def main():
    ap = argparse.ArgumentParser()
    engine_options(ap)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--first-pair", type=int, default=1,
                    help="number the pairs from here (to continue a run: the order alternates by it)")
    ap.add_argument("--rate", type=float, default=0.8)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--warm", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--against", default="sagesched",
                    help="what FCFS is paired with, comma-separated: gateway policies, or "
                         "`direct` (the same load straight to the engine)")
    ap.add_argument("--no-alone", action="store_true",
                    help="skip the pass that measures each prompt alone (no relative wait)")
    args = ap.parse_args()
    procs = bench.Procs()
    rows = []
    try:
        start_engine(args, procs, 18181)
        others = args.against.split(",")
        alone = None
        if not args.no_alone:
            # The measured requests (no --skip: the same in every pair), one at a time.
            load(args.xsched, 18181, args, ["--sequential", "--requests", str(args.requests),
                                            "--duration", "3600"], args.out / "alone.jsonl")
            alone = {x["prompt"]: x["ttlt_s"] for x in samples(args.out / "alone.jsonl")
                     if x["status"] == 200}
        for pair in range(args.first_pair - 1, args.first_pair - 1 + args.pairs):
            arms = ["fcfs"] + others
            shift = pair % len(arms)
            order = arms[shift:] + arms[:shift]
            got = {}
            for target in order:
                gw = bench.Procs()
                try:
                    # `direct`: the same load straight to the engine, no gateway.
                    port = 18181 if target == "direct" else 18182
                    if target != "direct":
                        gw.start([args.xsched, "llm", "serve", "--listen", "127.0.0.1:18182",
                                  "--upstream", "http://127.0.0.1:18181", "--concurrency",
                                  str(args.slots), "--policy", target],
                                 args.out / f"gateway-{pair + 1}-{target}.log")
                        bench.wait_up("http://127.0.0.1:18182", "the gateway")
                    load(args.xsched, port, args, ["--rate", "1", "--requests", str(args.warm),
                                                   "--skip", str(1000 + 100 * pair)])
                    got[target] = load(args.xsched, port, args,
                                       ["--rate", str(args.rate), "--trace", "azure-code",
                                        "--requests", str(args.requests), "--duration", "3600"],
                                       args.out / f"pair{pair}-{target}.jsonl")
                finally:
                    gw.stop()
            f = got["fcfs"]
            rel = {t: relative_wait(args.out / f"pair{pair}-{t}.jsonl", alone) for t in order}
            for other in others:
                s = got[other]
                gain = 1 - s["ttlt_mean_ms"] / f["ttlt_mean_ms"]
                rows.append((pair + 1, order[0], other, f, s, gain, rel["fcfs"], rel[other]))
                print(f"pair {pair + 1}: fcfs {f['ttlt_mean_ms']:.0f} ms, {other} "
                      f"{s['ttlt_mean_ms']:.0f} ms ({gain * 100:+.1f} %)", flush=True)
    finally:
        procs.stop()
    print("\n| pair (first) | against | FCFS mean / P99 TTLT ms | its mean / P99 TTLT ms | "
          "its mean below FCFS's | longest relative wait FCFS / it | failed |")
    print("|---|---|---|---|---|---|---|")
    for pair, first, other, f, s, gain, rf, rs in rows:
        print(f"| {pair} ({first}) | {other} | {f['ttlt_mean_ms']:.0f} / {f['ttlt_p99_ms']:.0f} | "
              f"{s['ttlt_mean_ms']:.0f} / {s['ttlt_p99_ms']:.0f} | {gain * 100:.1f} % | "
              f"{rf} / {rs} | {f['failed']} / {s['failed']} |")


if __name__ == "__main__":
    main()
