#!/usr/bin/env python3
"""Multi-turn conversations over two llama-servers: does `--router prefix-affinity` send each
turn where its history is cached, and what does it save against the other routers?

Two `llama-server`s (`--parallel SLOTS` each, one thread each, SmolLM2-135M; each keeps the
prompts of finished requests in RAM, llama.cpp's `--cache-ram`, 8 GiB by default) behind one FCFS
gateway. `--conversations` ShareGPT conversations of at least `--turns` human turns are replayed
by `--clients` clients at once: each sends a conversation's turns in order, every turn carrying
the conversation so far (the recorded answers as the assistant's turns, each message cut at
`--max-message-chars`), streamed with `max_tokens` `--max-tokens`, and the next turn after a
think time (exponential, mean `--think` s, seeded per conversation and turn: the same in every
run). Without think time a closed loop that fills every slot sends each next turn to the one
slot just freed, its own, under every router; users pause between turns, so engines have
room to choose from.
Per run, the engines are started afresh (their caches empty), so every router meets the same
conversations the same way; routers alternate their order by round.

Figures per run: mean TTFT of first turns and of later turns (where a cache can help), the run's
span, and the prompt tokens the engines prefilled (`llamacpp:prompt_tokens_total`, summed over both:
what their caches did not save) against the prompt tokens sent (every answer's `timings`:
`prompt_n` + `cache_n`).

Usage: python3 scripts/llm/prefix-check.py --out DIR [--rounds 2] [--conversations 24]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import json
import os
import queue
import random
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

# gateway-bench.py's helpers.
from llmbench import ROOT, bench

ENGINES = [18191, 18192]
GATEWAY = "127.0.0.1:18193"
ROUTERS = ["prefix-affinity", "least-outstanding", "round-robin"]


def conversations(args):
    """The first `--conversations` ShareGPT conversations with `--turns` human turns, each as
    [(human, gpt), ...] cut to `--turns` turns and `--max-message-chars` a message."""
    out = []
    records = bench.sharegpt_records()
    while len(out) < args.conversations:
        msgs = next(records).get("conversations", [])
        turns = []
        for human, gpt in zip(msgs[0::2], msgs[1::2]):
            if human.get("from") != "human" or gpt.get("from") != "gpt":
                break
            h, g = human["value"].strip(), gpt["value"].strip()
            if not h or not g:
                break
            turns.append((h[: args.max_message_chars], g[: args.max_message_chars]))
        if len(turns) >= args.turns:
            out.append(turns[: args.turns])
    return out


def engine_command(args, port):
    server = args.llama_server or os.environ.get("XSCHED_LLAMA_SERVER")
    if not server:
        sys.exit("no llama-server: set XSCHED_LLAMA_SERVER or --llama-server")
    return [server, "--model", str(bench.gguf()), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(args.slots), "--ctx-size", str(4096 * args.slots), "--threads", "1",
            "--seed", "1", "--metrics"]


def prompt_tokens_prefilled(port):
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    for line in page.splitlines():
        if line.startswith("llamacpp:prompt_tokens_total"):
            return float(line.rsplit(" ", 1)[1])
    sys.exit(f"no llamacpp:prompt_tokens_total at port {port}")


def turn(url, messages, max_tokens):
    """One streamed turn: (TTFT s, prompt tokens the engine reports for it or None)."""
    body = json.dumps({"model": "default", "messages": messages, "max_tokens": max_tokens,
                       "stream": True, "temperature": 0, "seed": 1}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t = time.perf_counter()
    ttft, sent = None, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if not line.startswith(b"data: {"):
                continue
            if ttft is None and b'"content"' in line:
                ttft = time.perf_counter() - t
            if b'"timings"' in line:
                timings = json.loads(line[6:]).get("timings", {})
                sent = timings.get("prompt_n", 0) + timings.get("cache_n", 0)
    return ttft if ttft is not None else time.perf_counter() - t, sent


def replay(args, convs):
    """Every conversation through the gateway: (first-turn TTFTs, later TTFTs, tokens sent)."""
    todo = queue.Queue()
    for c in enumerate(convs):
        todo.put(c)
    first, later, sent = [], [], []
    lock = threading.Lock()
    errors = []

    def client():
        while True:
            try:
                conv = todo.get_nowait()
            except queue.Empty:
                return
            index, conv = conv
            think = random.Random(index)
            messages = []
            for k, (human, gpt) in enumerate(conv):
                if k > 0:
                    time.sleep(think.expovariate(1 / args.think) if args.think > 0 else 0)
                messages.append({"role": "user", "content": human})
                try:
                    ttft, tokens = turn(f"http://{GATEWAY}", messages, args.max_tokens)
                except OSError as e:
                    errors.append(e)
                    return
                with lock:
                    (first if k == 0 else later).append(ttft)
                    if tokens is not None:
                        sent.append(tokens)
                messages.append({"role": "assistant", "content": gpt})

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit(f"{len(errors)} turns failed, first: {errors[0]}")
    return first, later, sum(sent)


def run(args, router, convs, rnd):
    procs = bench.Procs()
    try:
        for port in ENGINES:
            procs.start(engine_command(args, port), args.out / f"engine-{port}-{rnd}-{router}.log")
        for port in ENGINES:
            bench.wait_up(f"http://127.0.0.1:{port}", f"llama-server at {port}")
        procs.start([args.xsched, "llm", "serve", "--listen", GATEWAY, "--upstream",
                     ",".join(f"http://127.0.0.1:{p}" for p in ENGINES), "--policy", "fcfs",
                     "--router", router, "--concurrency", str(args.slots)],
                    args.out / f"gateway-{rnd}-{router}.log")
        bench.wait_up(f"http://{GATEWAY}", "the gateway")
        before = sum(prompt_tokens_prefilled(p) for p in ENGINES)
        start = time.perf_counter()
        first, later, sent = replay(args, convs)
        span = time.perf_counter() - start
        prefilled = sum(prompt_tokens_prefilled(p) for p in ENGINES) - before
    finally:
        procs.stop()
    row = {"round": rnd, "router": router, "first_ttft_ms": statistics.mean(first) * 1e3,
           "later_ttft_ms": statistics.mean(later) * 1e3,
           "later_p90_ms": bench.quantile(later, 0.9) * 1e3, "span_s": span,
           "prefilled": prefilled, "sent": sent}
    (args.out / f"round{rnd}-{router}.json").write_text(json.dumps(row))
    print(json.dumps(row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=24)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--think", type=float, default=1.0, help="mean think time between turns, s")
    ap.add_argument("--max-message-chars", type=int, default=1200)
    ap.add_argument("--routers", nargs="+", default=ROUTERS)
    ap.add_argument("--llama-server")
    ap.add_argument("--xsched", default=str(ROOT / "target/release/xsched"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    convs = conversations(args)
    rows = []
    for rnd in range(args.rounds):
        order = args.routers if rnd % 2 == 0 else list(reversed(args.routers))
        rows += [run(args, router, convs, rnd) for router in order]
    print(f"\n### {len(convs)} conversations of {args.turns} turns, {args.clients} clients, "
          f"think time {args.think} s, two llama-servers of {args.slots} slots\n")
    print("| router | first-turn TTFT ms | later-turn TTFT ms (mean) | later P90 ms | span s | "
          "prompt tokens prefilled / sent |")
    print("|---|---|---|---|---|---|")
    for router in args.routers:
        rs = [r for r in rows if r["router"] == router]
        cell = lambda key, fmt="{:.0f}": " / ".join(fmt.format(r[key]) for r in rs)
        share = " / ".join(f"{r['prefilled']:.0f} / {r['sent']} ({r['prefilled'] / max(r['sent'], 1):.2f})"
                           for r in rs)
        print(f"| {router} | {cell('first_ttft_ms')} | {cell('later_ttft_ms')} | "
              f"{cell('later_p90_ms')} | {cell('span_s', '{:.1f}')} | {share} |")


if __name__ == "__main__":
    main()
