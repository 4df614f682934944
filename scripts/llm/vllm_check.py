#!/usr/bin/env python3
"""Checks of a gateway in front of a real vLLM engine, with the official `openai` client.
Prints one JSON line.

  hangup GATEWAY ENGINE   a streamed request (1 500 tokens, ignore_eos) through the gateway,
                          its client gone after 3 chunks: how long until the engine's own
                          `vllm:num_requests_running` is back to 0 (vLLM aborted it)
  toolong GATEWAY         a prompt beyond the engine's 2 048-token window, twice: each answer's
                          status and message (the engine's 400, passed on), then whether a
                          short request is still answered
  order GATEWAY           four requests fill the engine's slots (--max-num-seqs 4), then seven
                          wait, each stating its length (ignore_eos), sent together, and one
                          more after 0.3 s, critical (`x-dynamo-request-priority: 100`): the
                          order their first tokens came
  classes GATEWAY         the slots filled as for order, then six requests of ten tokens,
                          50 ms apart, alternating class -5 (sheddable) and 0
                          (`x-dynamo-request-priority`), the -5 one first: the order their
                          first tokens came

GATEWAY and ENGINE are base URLs (http://127.0.0.1:PORT).
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request

from openai import OpenAI

MODEL = "smollm2"


def running(engine):
    text = urllib.request.urlopen(f"{engine}/metrics", timeout=5).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    )


def hangup(gateway, engine):
    client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=120)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Tell me a very long story."}],
        max_tokens=1500,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    chunks = 0
    for _ in stream:
        chunks += 1
        if chunks == 3:
            break
    before = running(engine)
    stream.close()
    gone = time.monotonic()
    while running(engine) > 0 and time.monotonic() - gone < 30:
        time.sleep(0.05)
    return {
        "chunks": chunks,
        "running_before": before,
        "running_after": running(engine),
        "aborted_after_s": round(time.monotonic() - gone, 3),
    }


def toolong(gateway):
    out = []
    for _ in range(2):
        body = json.dumps({"model": MODEL, "max_tokens": 4,
                           "messages": [{"role": "user", "content": "word " * 5000}]}).encode()
        req = urllib.request.Request(f"{gateway}/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                out.append({"status": r.status, "message": ""})
        except urllib.error.HTTPError as e:
            out.append({"status": e.code, "message": e.read().decode(errors="replace")[:300]})
    client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=120)
    short = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi."}], max_tokens=4)
    return {"too_long": out, "short_answered": bool(short.choices[0].message.content)}


# Seconds: first tokens closer than this came out of one engine step (a decode step of this
# model on two cores is 40 ms or more).
STEP_TIE = 0.025


class Firsts:
    """Streamed requests through a gateway, each in a thread: when each one's first token came."""

    def __init__(self, gateway):
        self.client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=300)
        self.firsts = {}
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.threads = []

    def one(self, tag, tokens, headers):
        stream = self.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"Count to many ({tag})."}],
            max_tokens=tokens,
            stream=True,
            extra_body={"ignore_eos": True},
            extra_headers=headers or {},
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                with self.lock:
                    self.firsts.setdefault(tag, time.monotonic() - self.start)

    def go(self, tag, tokens, headers=None):
        t = threading.Thread(target=self.one, args=(tag, tokens, headers))
        t.start()
        self.threads.append(t)

    def fill(self):
        """Fillers of distinct lengths take the four slots (they free one at a time)."""
        for k, n in enumerate([40, 50, 60, 70]):
            self.go(f"fill{k}", n)
        while len(self.firsts) < 4 and time.monotonic() - self.start < 60:
            time.sleep(0.02)

    def ordered(self, rank):
        """The waiting requests by first token. Requests vLLM admits in one step have their
        first tokens in that step's output: which the client reads first is a race between its
        threads, not vLLM's order. Such requests (first tokens closer than STEP_TIE, under half
        of a decode step here) are one group, listed by `rank`; vLLM's order across steps is
        what is checked."""
        for t in self.threads:
            t.join()
        waited = sorted((t, tag) for tag, t in self.firsts.items() if not tag.startswith("fill"))
        groups = []
        for t, tag in waited:
            if groups and t - groups[-1][-1][0] < STEP_TIE:
                groups[-1].append((t, tag))
            else:
                groups.append([(t, tag)])
        ordered = [tag for g in groups for tag in sorted((tag for _, tag in g), key=rank)]
        return {"first_tokens": ordered,
                "same_step": [[tag for _, tag in g] for g in groups if len(g) > 1],
                "first_token_s": {tag: round(t, 3) for t, tag in waited}}


def order(gateway):
    f = Firsts(gateway)
    f.fill()
    for tag, n in [("n30", 30), ("n5", 5), ("n20", 20), ("n10", 10), ("n25", 25), ("n15", 15)]:
        f.go(tag, n)
    time.sleep(0.3)
    f.go("critical", 30, {"x-dynamo-request-priority": "100"})
    return f.ordered(lambda tag: 0 if tag == "critical" else int(tag[1:]))


def classes(gateway):
    f = Firsts(gateway)
    f.fill()
    for tag in ["s0", "a0", "s1", "a1", "s2", "a2"]:
        priority = "-5" if tag.startswith("s") else "0"
        f.go(tag, 10, {"x-dynamo-request-priority": priority})
        time.sleep(0.05)
    return f.ordered(lambda tag: (tag[0] == "s", tag))


def main():
    what = sys.argv[1]
    if what == "hangup":
        print(json.dumps(hangup(sys.argv[2], sys.argv[3])))
    elif what == "toolong":
        print(json.dumps(toolong(sys.argv[2])))
    elif what == "order":
        print(json.dumps(order(sys.argv[2])))
    elif what == "classes":
        print(json.dumps(classes(sys.argv[2])))
    else:
        sys.exit(f"unknown check {what}: hangup, toolong, order or classes")


if __name__ == "__main__":
    main()
