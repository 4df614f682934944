#!/usr/bin/env python3
"""vLLM's priority inversion (vLLM issue 40004), measured on the installed build, and what the
gateway does about it. Run it with vLLM's python (scripts/vllm.sh prints it):

  $XSCHED_VLLM_PYTHON scripts/llm/vllm-inversion.py --out DIR [--rounds 2] [--probes 20]

One vLLM engine (`--scheduling-policy priority`, `--max-num-seqs` --seqs, prefix caching off).
Per arm, short urgent probes (--probe-tokens each, one every --gap seconds, ShareGPT prompts)
first alone, then while --flooders clients each send long best-effort requests back to back
(--flood-tokens each, `ignore_eos`), so that every seat of the engine is taken by the flood:

  vllm        straight to vLLM: the probes `priority: -10`, the flood `priority: 10` (lower
              wins); vLLM's own queue puts a probe first, but a full batch is not preempted
              for it: the probe waits for a flood request to end
  engine      `xsched llm serve --policy priority --order-at engine`: the gateway numbers the
              requests by class and vLLM orders them, as above
  gateway     `xsched llm serve --policy priority --order-at gateway --concurrency SEQS` with
              eviction `one`: the gateway holds the flood back and, when a probe finds no
              seat, evicts the sheddable request it admitted last (its stream is cut)

Both gateway arms get the classes file with eviction `one`; at `--order-at engine` every
request is already at the engine, so there is no seat for the gateway to free.

Through the gateway the probes are class `critical` and the flood `sheddable` (the
`x-llm-d-inference-objective` header). The arms run in turn, rotated each round. Prints each
arm's probe TTFT P50/P99 alone and under the flood and the flood's requests sent / cut; the
TTFTs go to DIR/inversion.json.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

import sharegpt_file

from vllmbench import ROOT, quantile
from vllmbench import bench as vllm_bench

OBJECTIVE = "x-llm-d-inference-objective"
GATEWAY_ARGS = {
    "engine": ["--policy", "priority", "--order-at", "engine"],
    "gateway": ["--policy", "priority", "--order-at", "gateway"],
}


def stream(port, prompt, max_tokens, seed, priority=None, objective=None):
    """One streamed request: (status, TTFT s or None, whether it was cut)."""
    body = {"model": "smollm2", "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "temperature": 0, "seed": seed,
            "ignore_eos": True}
    if priority is not None:
        body["priority"] = priority
    headers = {"Content-Type": "application/json"}
    if objective:
        headers[OBJECTIVE] = objective
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 json.dumps(body).encode(), headers)
    t, ttft, done = time.perf_counter(), None, False
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for line in r:
                if ttft is None and line.startswith(b"data: {") and b'"content"' in line:
                    ttft = time.perf_counter() - t
                done |= line.startswith(b"data: [DONE]")
            return r.status, ttft, not done
    except urllib.error.HTTPError as e:
        return e.code, None, True
    except OSError:
        return 0, ttft, True


def probes(args, port, prompts, direct):
    """The probes, one every --gap s: their TTFTs."""
    out = []
    for i, prompt in enumerate(prompts):
        start = time.perf_counter()
        kind = {"priority": -10} if direct else {"objective": "critical"}
        status, ttft, _ = stream(port, prompt, args.probe_tokens, i, **kind)
        if status != 200 or ttft is None:
            sys.exit(f"a probe failed: status {status}")
        out.append(ttft)
        time.sleep(max(0.0, args.gap - (time.perf_counter() - start)))
    return out


def flooded(args, port, prompts, flood, direct):
    """The probes while the flood runs, and the flood's counts."""
    stop, lock = threading.Event(), threading.Lock()
    counts = {"sent": 0, "cut": 0}

    def flooder(k):
        i = 0
        while not stop.is_set():
            kind = {"priority": 10} if direct else {"objective": "sheddable"}
            status, _, cut = stream(port, flood[(k * 7 + i) % len(flood)], args.flood_tokens,
                                    k * 100_000 + i, **kind)
            with lock:
                counts["sent"] += 1
                counts["cut"] += status != 200 or cut
            i += 1

    threads = [threading.Thread(target=flooder, args=(k,), daemon=True)
               for k in range(args.flooders)]
    for t in threads:
        t.start()
    time.sleep(args.fill)  # the flood takes every seat
    try:
        return probes(args, port, prompts, direct), counts
    finally:
        stop.set()
        for t in threads:
            t.join()


def run_arm(args, arm, vllm_port, prompts, flood):
    """One arm: (TTFTs alone, under the flood, flood counts)."""
    if arm == "vllm":
        return (probes(args, vllm_port, prompts, True),) + flooded(args, vllm_port, prompts,
                                                                    flood, True)
    classes = os.path.join(args.out, "classes.toml")
    with open(classes, "w") as f:
        f.write('eviction = "one"\n')
    with open(os.path.join(args.out, f"gateway-{arm}.log"), "a") as log:
        gw, port = vllm_bench.start_gateway(args, vllm_port,
                                            GATEWAY_ARGS[arm] + ["--classes", classes], log)
        try:
            return (probes(args, port, prompts, False),) + flooded(args, port, prompts, flood,
                                                                    False)
        finally:
            gw.terminate()
            gw.wait()


def ms(values, q):
    return quantile(values, q) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=os.environ.get("XSCHED_VLLM_MODEL"))
    ap.add_argument("--xsched", default=os.path.join(ROOT, "target/release/xsched"))
    ap.add_argument("--seqs", type=int, default=4, help="vLLM's --max-num-seqs")
    ap.add_argument("--kv-gib", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--gap", type=float, default=1.5)
    ap.add_argument("--probe-tokens", type=int, default=16)
    ap.add_argument("--flooders", type=int, default=8)
    ap.add_argument("--flood-tokens", type=int, default=256)
    ap.add_argument("--fill", type=float, default=5.0, help="seconds the flood runs before probes")
    ap.add_argument("--arms", default="vllm,engine,gateway")
    args = ap.parse_args()
    # A SIGTERM (a `timeout`) unwinds, so the engine and gateways below are stopped with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not args.model:
        sys.exit("no model: --model or XSCHED_VLLM_MODEL (scripts/vllm.sh prints it)")
    os.makedirs(args.out, exist_ok=True)
    arms = args.arms.split(",")
    texts = [t[0] for t in map(sharegpt_file.first_turn,
                               sharegpt_file.records(sharegpt_file.path())) if t]
    texts = [t for t in texts if 20 <= len(t) <= 1000]
    flood, texts = texts[:200], texts[200:]
    if len(texts) < args.rounds * len(arms) * args.probes:
        sys.exit("not enough ShareGPT prompts for so many rounds, arms and probes")
    results = {arm: [] for arm in arms}
    with open(os.path.join(args.out, "vllm.log"), "w") as log:
        engine, vllm_port = vllm_bench.start_vllm(args, log)
        try:
            for rnd in range(args.rounds):
                for arm in arms[rnd % len(arms):] + arms[:rnd % len(arms)]:
                    mine, texts = texts[:args.probes], texts[args.probes:]
                    alone, under, counts = run_arm(args, arm, vllm_port, mine, flood)
                    results[arm].append({"alone_s": alone, "flood_s": under, "flood": counts})
                    with open(os.path.join(args.out, "inversion.json"), "w") as f:
                        json.dump(results, f)  # after each arm: a later failure loses nothing
                    print(f"round {rnd + 1} {arm}: probe TTFT P99 alone {ms(alone, 0.99):.0f} ms,"
                          f" under the flood {ms(under, 0.99):.0f} ms; flood {counts}", flush=True)
        finally:
            os.killpg(engine.pid, 15)
            engine.wait()
    print(f"\n| arm | round | probe TTFT P50 / P99 ms alone | under the flood | P99 ratio |"
          f" flood sent / cut |\n|---|---|---|---|---|---|")
    for arm in arms:
        for k, r in enumerate(results[arm]):
            a, u, c = r["alone_s"], r["flood_s"], r["flood"]
            print(f"| {arm} | {k + 1} | {ms(a, 0.5):.0f} / {ms(a, 0.99):.0f} | "
                  f"{ms(u, 0.5):.0f} / {ms(u, 0.99):.0f} | {ms(u, 0.99) / ms(a, 0.99):.2f} | "
                  f"{c['sent']} / {c['cut']} |")


if __name__ == "__main__":
    main()
