#!/usr/bin/env python3
"""A critical class's TTFT alone and under a sheddable flood, through the gateway to llama-server.

One `llama-server` (`--parallel SLOTS`, SmolLM2-135M) behind one FCFS gateway (`--concurrency
SLOTS`, the built-in classes). Per round: `--probes` streamed requests of the probed class (ShareGPT prompts,
llama.cpp's prompt cache off), one every `--gap` seconds, first alone, then while `--flooders` clients each send sheddable streamed
requests back to back (`x-llm-d-inference-objective: sheddable`, `--flood-tokens` each). The
probes are `critical`, under each `--evictions` setting of the classes file (`one`: it evicts the
running sheddable request admitted last when no slot is free; `all`: every one, and none runs
beside it), and, for comparison, `standard` (which evicts nothing and waits for a slot). A fresh
gateway for each. With `--slo-ms N`, critical probes also run once more with a TTFT deadline
(`x-llm-d-slo-ttft-ms: N`, eviction `one`), which evicts only when waiting would miss it. Prints,
per class, TTFT P50 and P99 alone and under the flood and their ratio, the share of probes
within `--slo-ms` when given, and how many flood requests were evicted; each probe's TTFTs go
to `ttft-*.json` under --out.

Usage: python3 scripts/llm/flood-check.py --out DIR [--rounds 2] [--probes 20]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import json
import threading
import time
import urllib.error
import urllib.request

# The engine, its options and gateway-bench.py's helpers.
from llmbench import bench, engine_options, start_engine

GATEWAY = "http://127.0.0.1:18172"
OBJECTIVE = "x-llm-d-inference-objective"
SLO = "x-llm-d-slo-ttft-ms"


def stream(prompt, objective, max_tokens, seed, slo_ms=None):
    """One streamed request: (status, TTFT s or None, whether it ended with an error event)."""
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "stream": True, "temperature": 0, "seed": seed,
                       "ignore_eos": True, "cache_prompt": False}).encode()
    headers = {"Content-Type": "application/json", OBJECTIVE: objective}
    if slo_ms:
        headers[SLO] = str(slo_ms)
    req = urllib.request.Request(GATEWAY + "/v1/chat/completions", body, headers)
    t, ttft, errored = time.perf_counter(), None, False
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for line in r:
                if ttft is None and line.startswith(b"data: {") and b'"content"' in line:
                    ttft = time.perf_counter() - t
                errored |= line.startswith(b'data: {"error"')
            return r.status, ttft, errored
    except urllib.error.HTTPError as e:
        return e.code, None, True


def probes(args, objective, prompts, slo_ms=None):
    """The probes, one every `--gap` s: their TTFTs."""
    ttfts = []
    for i, prompt in enumerate(prompts):
        start = time.perf_counter()
        status, ttft, _ = stream(prompt, objective, args.probe_tokens, i, slo_ms)
        if status != 200 or ttft is None:
            raise SystemExit(f"a {objective} probe failed: {status}")
        ttfts.append(ttft)
        time.sleep(max(0.0, args.gap - (time.perf_counter() - start)))
    return ttfts


def flooded(args, objective, prompts, flood, slo_ms=None):
    stop, counts, lock = threading.Event(), {"sent": 0, "evicted": 0, "answered_503": 0}, threading.Lock()

    def flooder(k):
        i = 0
        while not stop.is_set():
            status, _, errored = stream(flood[(k * 7 + i) % len(flood)], "sheddable",
                                        args.flood_tokens, k * 100_000 + i)
            with lock:
                counts["sent"] += 1
                counts["evicted"] += status == 200 and errored
                counts["answered_503"] += status == 503  # shed, or evicted before its answer began
            i += 1
            if status != 200:
                time.sleep(0.2)

    threads = [threading.Thread(target=flooder, args=(k,), daemon=True) for k in range(args.flooders)]
    for t in threads:
        t.start()
    time.sleep(5)  # the flood fills the slots
    try:
        return probes(args, objective, prompts, slo_ms), counts
    finally:
        stop.set()
        for t in threads:
            t.join()


def p(values, q):
    return bench.quantile(values, q) * 1e3


def main():
    ap = argparse.ArgumentParser()
    engine_options(ap)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--gap", type=float, default=1.5, help="seconds between probes")
    ap.add_argument("--probe-tokens", type=int, default=16)
    ap.add_argument("--flooders", type=int, default=8)
    ap.add_argument("--flood-tokens", type=int, default=256)
    ap.add_argument("--evictions", nargs="+", default=["one", "all"], choices=["none", "one", "all"],
                    help="the classes file's eviction settings the critical probes run under")
    ap.add_argument("--standard", action=argparse.BooleanOptionalAction, default=True,
                    help="also probe the standard class, which evicts nothing (for comparison)")
    ap.add_argument("--slo-ms", type=int,
                    help="also probe critical requests with this TTFT deadline (eviction one)")
    args = ap.parse_args()
    procs = bench.Procs()
    rows = []
    # (eviction, probed class): `standard` evicts nothing under any setting.
    configs = [(e, "critical", None) for e in args.evictions]
    if args.standard:
        configs.append(("one", "standard", None))
    if args.slo_ms:
        configs.append(("one", "critical", args.slo_ms))
    try:
        start_engine(args, procs, 18171)
        # ShareGPT prompts, each probe's the same alone and under the flood (llama.cpp's prompt
        # cache is off for every request: `cache_prompt: false`).
        every = bench.prompts(args, args.probes * len(configs) * args.rounds + 200, 3000)
        flood, every = every[:200], every[200:]
        for rnd in range(args.rounds):
            for eviction, objective, slo_ms in configs:
                classes = args.out / f"classes-{eviction}.toml"
                classes.write_text(f'eviction = "{eviction}"\n')
                gw = bench.Procs()
                try:
                    gw.start([args.xsched, "llm", "serve", "--listen", GATEWAY.removeprefix("http://"),
                              "--upstream", "http://127.0.0.1:18171", "--concurrency", str(args.slots),
                              "--policy", "fcfs", "--classes", str(classes)],
                             args.out / f"gateway-{rnd}-{eviction}-{objective}-{slo_ms}.log")
                    bench.wait_up(GATEWAY, "the gateway")
                    mine, every = every[:args.probes], every[args.probes:]
                    alone = probes(args, objective, mine, slo_ms)
                    under, counts = flooded(args, objective, mine, flood, slo_ms)
                finally:
                    gw.stop()
                name = f"{objective} (eviction {eviction}" + (f", deadline {slo_ms} ms)" if slo_ms else ")")
                rows.append((rnd + 1, name, alone, under, counts))
                (args.out / f"ttft-{rnd + 1}-{eviction}-{objective}-{slo_ms}.json").write_text(
                    json.dumps({"alone_s": alone, "flood_s": under, "flood": counts}))
                print(f"round {rnd + 1} {objective}, eviction {eviction}: TTFT P99 alone "
                      f"{p(alone, 0.99):.0f} ms, under the flood {p(under, 0.99):.0f} ms; flood {counts}",
                      flush=True)
    finally:
        procs.stop()
    print(f"\n### A class's TTFT alone and under a sheddable flood ({args.flooders} clients, "
          f"{args.flood_tokens} tokens each; {args.probes} probes of {args.probe_tokens} tokens)\n")
    within = f" | under the flood within {args.slo_ms} ms" if args.slo_ms else ""
    print(f"| round | class | TTFT P50 / P99 ms alone | under the flood | P99 ratio{within} | flood requests sent / evicted mid-answer / answered 503 |")
    print("|---|---|---|---|---|---|" + ("---|" if args.slo_ms else ""))
    for rnd, objective, alone, under, c in rows:
        met = ""
        if args.slo_ms:
            met = f" {sum(t * 1e3 <= args.slo_ms for t in under)} of {len(under)} |"
        print(f"| {rnd} | {objective} | {p(alone, 0.5):.0f} / {p(alone, 0.99):.0f} | "
              f"{p(under, 0.5):.0f} / {p(under, 0.99):.0f} | {p(under, 0.99) / p(alone, 0.99):.2f} |"
              f"{met} {c['sent']} / {c['evicted']} / {c['answered_503']} |")


if __name__ == "__main__":
    main()
