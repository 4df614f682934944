#!/usr/bin/env python3
"""Two tenants offering 3:1 load through the gateway to llama-server: their token shares.

One `llama-server` (`--parallel SLOTS`, SmolLM2-135M) behind a fresh gateway per run
(`--concurrency SLOTS`, `--policy` each of `--policies`). Two tenants send streamed requests at
Poisson arrivals, open loop: `heavy` at 3 × `--rate` a second, `light` at `--rate` (3:1
offered; together above what the engine serves, and `light` alone above half of it, so both
stay backlogged and a fair share is half). Every request is a ShareGPT prompt (≤
`--max-prompt-chars`, drawn from one shared sequence, so both tenants' prompts come from the
same mix) asking for `--tokens` tokens with `ignore_eos` and llama.cpp's prompt cache off
(`cache_prompt: false`: every run's prompts cost the same). Each run is measured over
`--window` seconds after `--warm` seconds, in two settings per policy:

- `vtc`: each tenant names itself (`x-llm-d-inference-fairness-id`), so the gateway shares the
  engine by VTC (prompt tokens + 2 × output tokens, the default weight 1 each);
- `one tenant`: nobody names a tenant (the baseline: served in the policy's order, so about as
  offered, 3:1).

Per run it prints the light tenant's share of the VTC-weighted tokens served inside the window
(each answer's prompt tokens, from its `usage`, when its first token came inside the window,
plus 2 × each output token streamed inside it, counted by the clients, one per event), its
share of the output tokens alone, and its output tokens over the heavy one's as counted by the
clients and by the gateway's `/metrics` over the window.

Usage: python3 scripts/llm/fairness-check.py --out DIR [--rounds 2] [--policies fcfs sagesched]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import itertools
import json
import random
import re
import threading
import time
import urllib.error
import urllib.request

# The engine, its options and gateway-bench.py's helpers (prompts, child processes).
from llmbench import bench, engine_options, start_engine

ENGINE_PORT = 18191
GATEWAY = "http://127.0.0.1:18192"
TENANT = "x-llm-d-inference-fairness-id"
TENANTS = ("heavy", "light")


class Tally:
    """What each tenant was served, with the time of each token, and failures."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = {t: [] for t in TENANTS}  # (time of an output token)
        self.prompts = {t: [] for t in TENANTS}  # (time of the first token, prompt tokens)
        self.failed = 0


def stream(prompt, tenant, named, tokens, seed, tally):
    """One streamed request of `tenant`; its tokens go into `tally`."""
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": tokens, "stream": True, "temperature": 0, "seed": seed,
                       "ignore_eos": True, "cache_prompt": False,
                       "stream_options": {"include_usage": True}}).encode()
    headers = {"Content-Type": "application/json"}
    if named:
        headers[TENANT] = tenant
    req = urllib.request.Request(GATEWAY + "/v1/chat/completions", body, headers)
    times, first, prompt_tokens = [], None, None
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for line in r:
                if not line.startswith(b"data: {"):
                    continue
                if b'"content"' in line:
                    now = time.perf_counter()
                    first = first or now
                    times.append(now)
                if b'"usage"' in line:
                    usage = json.loads(line[6:]).get("usage") or {}
                    prompt_tokens = usage.get("prompt_tokens", prompt_tokens)
    except (urllib.error.URLError, OSError):
        with tally.lock:
            tally.failed += 1
        time.sleep(0.2)
        return
    with tally.lock:
        tally.events[tenant] += times
        if first is not None and prompt_tokens is not None:
            tally.prompts[tenant].append((first, prompt_tokens))


def tenant_tokens(text):
    """Output tokens per tenant in a `/metrics` text."""
    out = {}
    for m in re.finditer(r'^xsched_gateway_tenant_output_tokens_total\{[^}]*tenant="([^"]*)"\} (\d+)$',
                         text, re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def scrape():
    return tenant_tokens(urllib.request.urlopen(GATEWAY + "/metrics", timeout=5).read().decode())


def run(args, prompts, named):
    """One measured run against the gateway already up: per tenant (output tokens, weighted
    tokens) inside the window, the gateway's counts over it, and the requests that failed
    before the window's end."""
    tally, stop, draw, lock = Tally(), threading.Event(), itertools.count(), threading.Lock()

    def request(tenant, seed):
        with lock:
            i = next(draw)
        stream(prompts[i % len(prompts)], tenant, named, args.tokens, seed, tally)

    def arrivals(tenant, rate, seed):
        # Poisson arrivals, open loop: each request on a thread of its own, however many wait.
        rng, k = random.Random(seed), 0
        while not stop.wait(rng.expovariate(rate)):
            threading.Thread(target=request, args=(tenant, seed * 100_000 + k), daemon=True).start()
            k += 1

    rates = {"heavy": 3 * args.rate, "light": args.rate}
    sources = [threading.Thread(target=arrivals, args=(t, rates[t], n + 1), daemon=True)
               for n, t in enumerate(TENANTS)]
    for t in sources:
        t.start()
    time.sleep(args.warm)
    start, before = time.perf_counter(), scrape()
    time.sleep(args.window)
    end, after = time.perf_counter(), scrape()
    failed = tally.failed
    stop.set()
    for t in sources:
        t.join()
    inside = lambda at: start <= at < end  # noqa: E731
    out = {}
    with tally.lock:
        for t in TENANTS:
            output = sum(1 for at in tally.events[t] if inside(at))
            prompts_in = [n for at, n in tally.prompts[t] if inside(at)]
            mean_prompt = sum(prompts_in) / max(1, len(prompts_in))
            out[t] = (output, sum(prompts_in) + 2 * output, mean_prompt)
    gateway = {t: after.get(t, 0) - before.get(t, 0) for t in TENANTS} if named else None
    # The requests still waiting or in flight fail when the gateway stops: not counted.
    return out, gateway, failed


def main():
    ap = argparse.ArgumentParser()
    engine_options(ap)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--policies", nargs="+", default=["fcfs", "sagesched"])
    ap.add_argument("--rate", type=float, default=1.5,
                    help="the light tenant's requests a second (heavy: 3×); above half what the "
                         "engine serves, so both tenants stay backlogged")
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens of every request")
    ap.add_argument("--warm", type=float, default=15.0, help="seconds before the window")
    ap.add_argument("--window", type=float, default=60.0, help="seconds measured")
    args = ap.parse_args()
    procs = bench.Procs()
    rows = []
    try:
        start_engine(args, procs, ENGINE_PORT)
        prompts = bench.prompts(args, 2000, 0)
        for rnd in range(args.rounds):
            settings = [(p, named) for p in args.policies for named in (True, False)]
            if rnd % 2:
                settings.reverse()
            for policy, named in settings:
                gw = bench.Procs()
                try:
                    gw.start([args.xsched, "llm", "serve", "--listen", GATEWAY.removeprefix("http://"),
                              "--upstream", f"http://127.0.0.1:{ENGINE_PORT}", "--concurrency", str(args.slots), "--policy", policy],
                             args.out / f"gateway-{rnd}-{policy}-{'vtc' if named else 'one'}.log")
                    bench.wait_up(GATEWAY, "the gateway")
                    served, gateway, failed = run(args, prompts, named)
                finally:
                    gw.stop()
                rows.append((rnd + 1, policy, named, served, gateway, failed))
                share = served["light"][0] / max(1, served["light"][0] + served["heavy"][0])
                print(f"round {rnd + 1} {policy} {'vtc' if named else 'one tenant'}: light's output "
                      f"share {share:.3f}; {served}; gateway {gateway}; failed {failed}", flush=True)
    finally:
        procs.stop()
    (args.out / "rows.json").write_text(json.dumps(rows))
    print(f"\n### Two tenants offering 3:1 ({3 * args.rate:g} and {args.rate:g} requests a second, "
          f"Poisson, {args.tokens} tokens each; {args.slots} slots; {args.window:.0f} s windows)\n")
    print("| round | policy | tenants | light's share of VTC-weighted tokens | of output tokens | "
          "light / heavy output tokens (clients; gateway's /metrics) | mean prompt tokens light / heavy "
          "| failed |")
    print("|---|---|---|---|---|---|---|---|")
    for rnd, policy, named, s, g, failed in rows:
        light, heavy = s["light"], s["heavy"]
        ratio = f"{light[0] / max(1, heavy[0]):.3f}"
        if g:
            ratio += f"; {g['light'] / max(1, g['heavy']):.3f}"
        print(f"| {rnd} | {policy} | {'vtc' if named else 'one tenant'} | "
              f"{light[1] / max(1, light[1] + heavy[1]):.3f} | {light[0] / max(1, light[0] + heavy[0]):.3f} | "
              f"{ratio} | {light[2]:.0f} / {heavy[2]:.0f} | {failed} |")


if __name__ == "__main__":
    main()
