#!/usr/bin/env python3
"""A recorded request set (scripts/llm/long-answers.py's `requests-*.jsonl`) replayed on vLLM
itself under each policy, beside the simulator's replay of the very same file. Run it with
vLLM's python (scripts/vllm.sh prints it):

  $XSCHED_VLLM_PYTHON scripts/llm/vllm-replay.py --requests FILE --warm FILE --out DIR \\
      [--arms fcfs,sagesched,ssjf,sagesched-oracle] [--order-at gateway] [--seqs 4] [--runs 1]

One vLLM engine (`--scheduling-policy priority`, `--max-num-seqs` --seqs, prefix caching off)
and, per arm, one `xsched llm serve --policy ARM --order-at ... --concurrency SEQS
--history-from WARM` in front of it (the warm answers fill its predictor without passing
through the engine). Each request is sent at its recorded arrival (the project's own client:
`vllm bench serve` cannot give each request its own length and class), streamed, as a chat
with `max_tokens` --cap, so that the gateway predicts without seeing the answer's length. A
relay between the gateway and vLLM (in this process) sets each request's `max_tokens` to its
recorded length, with `ignore_eos`, so every answer is as long as the one recorded. The oracle
alone is told the length (`max_tokens` is the recorded one: its stated length). The arms run in
turn, rotated each run. Prints mean and P99 TTLT per arm and their ratio to the first arm's,
and the simulator's (`xsched llm replay` on the same file, the same seats) beside them: as
preset, and with its attention term β3 fitted (in Rust, `--fit-mean-ttlt`) so that the first
arm's simulated mean TTLT is the one measured, which leaves the other arms as a test of the
fit. Everything goes to DIR/replay.json.
"""

import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from vllmbench import ROOT, quantile
from vllmbench import bench as vllm_bench

LENGTH = "xsched_replay_length"  # the relay's field: the recorded answer's length


def relay(engine_port):
    """An HTTP relay to vLLM on a free port that sets `max_tokens` from LENGTH; its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        # Each event goes out as soon as vLLM sends it (no Nagle delay on the small writes).
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def forward(self, body=None):
            headers = {"Content-Type": "application/json"} if body is not None else {}
            req = urllib.request.Request(f"http://127.0.0.1:{engine_port}{self.path}", body,
                                         headers, method=self.command)
            try:
                r = urllib.request.urlopen(req, timeout=3600)
            except urllib.error.HTTPError as e:
                r = e
            except Exception as e:  # unreachable, timed out, reset: the gateway sees a 502
                self.send_error(502, f"the relay could not reach vLLM: {e}")
                return
            with r:
                self.send_response(r.code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "text/plain"))
                self.end_headers()
                # Ends at the connection's close (HTTP/1.0): a client gone ends the copy, and
                # closing `r` makes vLLM abort the request.
                while chunk := r.read1(65536):
                    self.wfile.write(chunk)

        def do_GET(self):
            self.forward()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            length = body.pop(LENGTH, None)
            if length is not None:
                body["max_tokens"], body["ignore_eos"] = length, True
            self.forward(json.dumps(body).encode())

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def read(path):
    with open(path) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["arrival"])


def send(port, r, oracle, cap, out, k):
    body = {"model": "smollm2", "messages": [{"role": "user", "content": r["prompt"]}],
            "max_tokens": r["output_tokens"] if oracle else cap, "ignore_eos": oracle,
            "stream": True, "temperature": 0, LENGTH: r["output_tokens"]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    t, ttft, done = time.perf_counter(), None, False
    try:
        with urllib.request.urlopen(req, timeout=3600) as resp:
            for line in resp:
                if ttft is None and line.startswith(b"data: {") and b'"content"' in line:
                    ttft = time.perf_counter() - t
                done |= line.startswith(b"data: [DONE]")
    except OSError as e:
        print(f"request {k}: {e}", file=sys.stderr)
    out[k] = {"ttft": ttft, "ttlt": time.perf_counter() - t if done else None}


def run_arm(args, arm, relay_port, requests):
    """The arm's per-request TTFT and TTLT (s), sent at their recorded arrivals."""
    cmd = ["--policy", arm, "--order-at", args.order_at, "--history-from", args.warm,
           "--embedding", args.embedding, "--engine-horizon", str(args.engine_horizon)]
    if args.order_at == "engine":
        # Every request is sent at once and waits in vLLM's own queue, where vLLM sends a
        # stream's head and then nothing until it runs it: the gateway's timeouts for an engine
        # that falls silent (60 s by default) would cut it there.
        cmd += ["--first-byte-timeout", "3600", "--idle-timeout", "3600"]
    with open(os.path.join(args.out, f"gateway-{arm}.log"), "a") as log:
        gw, port = vllm_bench.start_gateway(args, relay_port, cmd, log)
    out = [None] * len(requests)
    threads = []
    start = time.perf_counter()
    try:
        for k, r in enumerate(requests):
            time.sleep(max(0.0, r["arrival"] - (time.perf_counter() - start)))
            t = threading.Thread(target=send, args=(port, r, arm == "sagesched-oracle", args.cap,
                                                    out, k))
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
    finally:
        gw.terminate()
        gw.wait()
    return out


def simulated(args, fit=None):
    """The simulator's rows per arm on the same file (the preset's step time, or with its
    attention term fitted so that `fit = (arm, mean TTLT)` holds), and the fit's line."""
    cmd = [args.xsched, "llm", "replay", "--requests", args.requests, "--warm", args.warm,
           "--max-num-seqs", str(args.seqs), "--policy", args.arms, "--order-at", args.order_at,
           "--engine-horizon", str(args.engine_horizon), "--embedding", args.embedding]
    if fit:
        cmd += ["--fit-mean-ttlt", f"{fit[0]}={fit[1]}"]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    return {r["policy"]: r for r in rows if "policy" in r}, next(
        (r["fit"] for r in rows if "fit" in r), None)


def summary(rows):
    ttlt = [r["ttlt"] for r in rows if r and r["ttlt"] is not None]
    return {"completed": len(ttlt), "failed": len(rows) - len(ttlt),
            "mean_ttlt": sum(ttlt) / max(len(ttlt), 1), "p99_ttlt": quantile(ttlt, 0.99, 0.0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", required=True)
    ap.add_argument("--warm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=os.environ.get("XSCHED_VLLM_MODEL"))
    ap.add_argument("--xsched", default=os.path.join(ROOT, "target/release/xsched"))
    ap.add_argument("--arms", default="fcfs,sagesched,ssjf,sagesched-oracle")
    ap.add_argument("--order-at", default="gateway", choices=["gateway", "engine"])
    ap.add_argument("--engine-horizon", type=float, default=60.0)
    ap.add_argument("--embedding", default="hashed", choices=["hashed", "minilm"])
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("--kv-gib", type=int, default=2)
    ap.add_argument("--cap", type=int, default=1024, help="max_tokens the gateway sees")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    # A SIGTERM (a `timeout`) unwinds, so the engine and gateways below are stopped with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not args.model:
        sys.exit("no model: --model or XSCHED_VLLM_MODEL (scripts/vllm.sh prints it)")
    os.makedirs(args.out, exist_ok=True)
    requests, arms = read(args.requests), args.arms.split(",")
    results = {arm: [] for arm in arms}
    with open(os.path.join(args.out, "vllm.log"), "w") as log:
        engine, engine_port = vllm_bench.start_vllm(args, log)
        try:
            relay_port = relay(engine_port)
            for run in range(args.runs):
                for arm in arms[run % len(arms):] + arms[:run % len(arms)]:
                    rows = run_arm(args, arm, relay_port, requests)
                    results[arm].append(rows)
                    s = summary(rows)
                    print(f"run {run + 1} {arm}: {s} at {time.strftime('%H:%M:%S')}", flush=True)
        finally:
            os.killpg(engine.pid, 15)
            engine.wait()
    measured = {arm: summary([r for rows in results[arm] for r in rows]) for arm in arms}
    path = os.path.join(args.out, "replay.json")
    with open(path, "w") as f:  # the measurements first: a failed simulation loses nothing
        json.dump({"args": vars(args), "vllm": results, "measured": measured}, f)
    failed = {arm: m["failed"] for arm, m in measured.items() if m["failed"]}
    if failed:
        sys.exit(f"requests failed on vLLM ({failed}): no fit from a partial run")
    # The simulator as preset, then with β3 fitted to the first arm's measured mean: the other
    # arms are what the fit did not see.
    preset, _ = simulated(args)
    fitted, fit = simulated(args, (arms[0], measured[arms[0]]["mean_ttlt"]))
    with open(path, "w") as f:
        json.dump({"args": vars(args), "vllm": results, "measured": measured,
                   "simulated": preset, "fitted": fitted, "fit": fit}, f)
    print(f"\nβ3 fitted to {arms[0]}'s mean TTLT: {fit}")
    base = arms[0]
    print(f"\n| arm | vLLM mean TTLT | over {base} | P99 | simulated (preset) | over {base} | "
          f"sim / vLLM | simulated (β3 fitted) | over {base} | sim / vLLM |\n"
          f"|---|---|---|---|---|---|---|---|---|---|")
    for arm in arms:
        v, m, f = measured[arm], preset[arm], fitted[arm]
        print(f"| {arm} | {v['mean_ttlt']:.1f} s | {v['mean_ttlt'] / measured[base]['mean_ttlt']:.3f}"
              f" | {v['p99_ttlt']:.0f} s | {m['mean_ttlt']:.1f} s | "
              f"{m['mean_ttlt'] / preset[base]['mean_ttlt']:.3f} | "
              f"{m['mean_ttlt'] / v['mean_ttlt']:.2f} | {f['mean_ttlt']:.1f} s | "
              f"{f['mean_ttlt'] / fitted[base]['mean_ttlt']:.3f} | "
              f"{f['mean_ttlt'] / v['mean_ttlt']:.2f} |")

if __name__ == "__main__":
    main()
