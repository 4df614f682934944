#!/usr/bin/env python3
"""Streamed requests in bursts through the official `openai` client, counting what failed.

Sends TOTAL streamed chat completions to BASE_URL in bursts of BURST at once (each burst
starts when the previous one has ended), with `max_tokens` cycling through 1..MAX_TOKENS so
answers end at different times; every `--every-cap`th request sends `max_completion_tokens`
instead (OpenAI's newer field) at CAP. The client never retries (`max_retries=0`): a failure is
counted, not hidden. Prints one JSON line: sent, answered whole (a finish reason seen),
failures by reason, and the largest completion seen under `max_completion_tokens`.

Usage: python3 scripts/llm/burst_check.py BASE_URL [--total 500] [--burst 25] [--max-tokens 24]
"""

import argparse
import collections
import json
import threading

from openai import OpenAI

PROMPTS = [
    "Name three colours.",
    "Write a short poem about the sea.",
    "What is two plus two?",
    "Explain in a few sentences how a bicycle works.",
    "List the days of the week.",
]


def one(client, i, args, failures, capped, lock):
    request = dict(
        model="smollm2",
        messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        temperature=0.7,
        seed=i,
        stream=True,
        stream_options={"include_usage": True},
    )
    cap = args.every_cap and i % args.every_cap == 0
    if cap:
        request["max_completion_tokens"] = args.cap
    else:
        request["max_tokens"] = 1 + i % args.max_tokens
    try:
        finished, tokens = None, None
        for chunk in client.chat.completions.create(**request):
            if chunk.choices and chunk.choices[0].finish_reason:
                finished = chunk.choices[0].finish_reason
            if chunk.usage:
                tokens = chunk.usage.completion_tokens
        reason = None if finished else "no finish reason"
    except Exception as e:  # counted by kind, whatever the client raised
        reason = f"{type(e).__name__}: {str(e)[:120]}"
    with lock:
        if reason:
            failures[reason] += 1
        elif cap and tokens is not None:
            capped.append(tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--total", type=int, default=500)
    ap.add_argument("--burst", type=int, default=25)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--every-cap", type=int, default=10)
    ap.add_argument("--cap", type=int, default=3)
    args = ap.parse_args()
    client = OpenAI(base_url=args.base, api_key="unused", max_retries=0, timeout=300)
    failures, capped, lock = collections.Counter(), [], threading.Lock()
    sent = 0
    while sent < args.total:
        n = min(args.burst, args.total - sent)
        threads = [
            threading.Thread(target=one, args=(client, sent + k, args, failures, capped, lock))
            for k in range(n)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sent += n
    print(json.dumps({
        "sent": sent,
        "answered": sent - sum(failures.values()),
        "failures": dict(failures),
        "capped_requests": len(capped),
        "capped_max_completion_tokens": max(capped) if capped else None,
        "cap": args.cap,
    }))


if __name__ == "__main__":
    main()
