#!/usr/bin/env python3
"""A real engine that hangs beside a healthy one: how long the gateway's clients wait.

Two `llama-server`s (SmolLM2-135M, `--slots` each) behind one gateway at its defaults
(`least-outstanding`, first-byte timeout 300 s). The second engine is hung with SIGSTOP (the
kernel still accepts its connections; nothing answers), then `--requests` chat requests (every
other one streamed) are sent at once. Each request's status and the seconds from the hang to
its answer are recorded, with a client timeout of `--client-timeout` s. `--xsched` (the release
build by default) and each `--compare` binary run in turn: A/B side by side in one run.

Usage: python3 scripts/llm/hang-check.py --out DIR [--compare BIN ...] [--requests 8]
(XSCHED_LLAMA_SERVER names the engine; bash scripts/llama-server.sh builds it.)
"""

import argparse
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

from llmbench import bench, engine_options

GATEWAY = "http://127.0.0.1:18191"
HEALTHY, HUNG = 18192, 18193


def ask(i, stream, timeout):
    """One chat request: (status or 'timeout', seconds taken)."""
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": f"Count to {i + 3}."}],
                       "max_tokens": 16, "stream": stream, "temperature": 0, "seed": i}).encode()
    req = urllib.request.Request(GATEWAY + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, time.perf_counter() - start
    except urllib.error.HTTPError as e:
        return e.code, time.perf_counter() - start
    except OSError:
        return "timeout", time.perf_counter() - start


def run(args, xsched, k):
    """The requests through a gateway of `xsched` with the second engine hung: each outcome."""
    gw = bench.Procs()
    try:
        gw.start([xsched, "llm", "serve", "--listen", GATEWAY.removeprefix("http://"),
                  "--upstream", f"http://127.0.0.1:{HEALTHY}", "--upstream",
                  f"http://127.0.0.1:{HUNG}", "--concurrency", str(args.slots)],
                 args.out / f"gateway-{k}.log")
        bench.wait_up(GATEWAY, "the gateway")
        time.sleep(1.0)  # the engines' metrics read once
        os.kill(args.hung_pid, signal.SIGSTOP)
        outcomes = [None] * args.requests
        hung_at = time.perf_counter()

        def one(i):
            outcomes[i] = ask(i, i % 2 == 0, args.client_timeout)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(args.requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return outcomes, time.perf_counter() - hung_at
    finally:
        os.kill(args.hung_pid, signal.SIGCONT)
        gw.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    engine_options(ap, slots=4)
    ap.add_argument("--compare", action="append", default=[],
                    help="another xsched binary run the same way after --xsched, repeated for more")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--client-timeout", type=float, default=30.0)
    args = ap.parse_args()
    builds = [args.xsched] + args.compare
    args.engine = "llama-server"
    args.out.mkdir(parents=True, exist_ok=True)
    procs = bench.Procs()
    rows = []
    try:
        procs.start(bench.engine_command(args, HEALTHY), args.out / "engine-healthy.log")
        args.hung_pid = procs.start(bench.engine_command(args, HUNG), args.out / "engine-hung.log").pid
        bench.wait_up(f"http://127.0.0.1:{HEALTHY}", "llama-server")
        bench.wait_up(f"http://127.0.0.1:{HUNG}", "llama-server")
        for k, xsched in enumerate(builds):
            outcomes, took = run(args, xsched, k)
            answered = [s for s, _ in outcomes if s == 200]
            rows.append((xsched, outcomes, took))
            print(f"{xsched}: {len(answered)} of {len(outcomes)} answered 200; "
                  f"statuses {[s for s, _ in outcomes]}; slowest {max(t for _, t in outcomes):.2f} s",
                  flush=True)
    finally:
        procs.stop()
    (args.out / "hang.json").write_text(json.dumps(
        [{"xsched": x, "outcomes": o, "all_done_s": t} for x, o, t in rows]))
    print(f"\n### {args.requests} requests with one of two llama-servers hung (SIGSTOP), "
          f"gateway at its defaults, client timeout {args.client_timeout:.0f} s\n")
    print("| build | answered 200 | other statuses | no answer in time | slowest answer s |")
    print("|---|---|---|---|---|")
    for x, o, _ in rows:
        ok = sum(s == 200 for s, _ in o)
        late = sum(s == "timeout" for s, _ in o)
        other = len(o) - ok - late
        slowest = max((t for s, t in o if s != "timeout"), default=float("nan"))
        print(f"| {x} | {ok} | {other} | {late} | {slowest:.2f} |")


if __name__ == "__main__":
    main()
