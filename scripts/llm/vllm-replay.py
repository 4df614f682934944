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
preset, and with its step time fitted (in Rust, `--fit-mean-ttlt`: the attention term β3, or
β0–β2 scaled for an engine faster than the preset) so that the first arm's simulated mean TTLT
is the one measured, which leaves the other arms as a test of the fit.

With `--runs` above 1, each arm's ratio to the first arm is taken run by run (the arms of one
run are minutes apart, so the engine's drift between runs cancels) and given with its 95 %
interval (Student's t over the runs). With `--solo`, ten requests spread over the answers'
lengths are first sent alone, one after another, straight to vLLM: each arm's longest relative
wait is taken over them, max of (TTLT − time alone) / time alone (the simulator's
`max_relative_wait`, there over every request). Everything goes to DIR/replay.json, each arm's
rows as the arm ends.
"""

import argparse
import http.server
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from vllmbench import ROOT, quantile
from vllmbench import bench as vllm_bench

LENGTH = "xsched_replay_length"  # the relay's field: the recorded answer's length
# Student's t, two-sided 95 %, by degrees of freedom (1..30; beyond, the normal's 1.96 is near).
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


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
                # Ends at the connection's close (HTTP/1.0): a client gone ends the copy (a
                # gateway stopped between arms mid-scrape, too), and closing `r` makes vLLM
                # abort the request.
                try:
                    while chunk := r.read1(65536):
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

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
    with open(os.path.join(args.out, f"gateway-{arm}.log"), "a") as log:
        gw, port = vllm_bench.start_gateway(args, relay_port, cmd, log)
    out = [None] * len(requests)
    threads = []
    start = time.perf_counter()
    try:
        for k, r in enumerate(requests):
            time.sleep(max(0.0, r["arrival"] - (time.perf_counter() - start)))
            # Daemon threads: a run stopped mid-arm (a `timeout`) is not held up by them.
            t = threading.Thread(target=send, args=(port, r, arm == "sagesched-oracle", args.cap,
                                                    out, k), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
    finally:
        gw.terminate()
        gw.wait()
    return out


def solo(relay_port, requests, measured=10):
    """The TTLT alone (s) of `measured` requests evenly spread over their answers' lengths (the
    shortest and the longest among them), sent one after another straight to vLLM (the relay);
    None for the others. Sending every one alone would take as long as the arms (a request
    alone decodes a token at a time), and a time alone fitted to these (`a + b·input +
    c·output`) goes to zero or below for the shortest answers, whose relative waits lead."""
    by_length = sorted(range(len(requests)), key=lambda k: requests[k]["output_tokens"])
    picked = [by_length[round(i * (len(requests) - 1) / max(measured - 1, 1))]
              for i in range(min(measured, len(requests)))]
    out = [None] * len(requests)
    for k in picked:
        send(relay_port, requests[k], False, requests[k]["output_tokens"], out, k)
    return [o and o["ttlt"] for o in out]


def interval(ratios):
    """The mean of per-run ratios and its 95 % half-width (None for a single run)."""
    mean = statistics.mean(ratios)
    if len(ratios) < 2:
        return mean, None
    t = T975[min(len(ratios) - 1, len(T975)) - 1]
    return mean, t * statistics.stdev(ratios) / math.sqrt(len(ratios))


def longest_relative_wait(rows, alone):
    """max over the requests timed alone of (TTLT − time alone) / time alone, over every run."""
    waits = [max(0.0, r["ttlt"] - a) / a for rows_ in rows for r, a in zip(rows_, alone)
             if r and r["ttlt"] is not None and a]
    return max(waits, default=None)


def simulated(args, fit=None):
    """The simulator's rows per arm on the same file (the preset's step time, or with its
    step time fitted so that `fit = (arm, mean TTLT)` holds), and the fit's line."""
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


def save(path, record):
    """`record` to `path` whole or not at all (written beside it, then renamed): each arm's rows
    are saved as it ends, so a run stopped part way keeps what it measured."""
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def stop(engine):
    """Stop vLLM's process group; killed if it has not ended in 30 s (it waits for open
    connections to close, and a run stopped mid-arm leaves some)."""
    os.killpg(engine.pid, signal.SIGTERM)
    try:
        engine.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()


def print_measured(arms, measured):
    """The measured table: per-run ratios to the first arm with their interval."""
    print(f"\n| arm | runs | mean TTLT | over {arms[0]}, per run | 95 % interval | P99 | "
          f"longest relative wait |\n|---|---|---|---|---|---|---|")
    for arm in arms:
        m = measured[arm]
        half = "" if m["ratio_95"] is None else f"±{m['ratio_95']:.3f}"
        wait = "" if m["max_relative_wait"] is None else f"{m['max_relative_wait']:.1f}"
        print(f"| {arm} | {len(m['per_run_mean_ttlt'])} | {m['mean_ttlt']:.1f} s | "
              f"{m['ratio']:.3f} | {half} | {m['p99_ttlt']:.0f} s | {wait} |", flush=True)


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
    ap.add_argument("--solo", action="store_true",
                    help="first time requests alone, for the longest relative wait")
    args = ap.parse_args()
    # A SIGTERM (a `timeout`) unwinds, so the engine and gateways below are stopped with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not args.model:
        sys.exit("no model: --model or XSCHED_VLLM_MODEL (scripts/vllm.sh prints it)")
    os.makedirs(args.out, exist_ok=True)
    requests, arms = read(args.requests), args.arms.split(",")
    path = os.path.join(args.out, "replay.json")
    results, alone = {arm: [] for arm in arms}, None
    with open(os.path.join(args.out, "vllm.log"), "w") as log:
        engine, engine_port = vllm_bench.start_vllm(args, log)
        try:
            relay_port = relay(engine_port)
            if args.solo:
                alone = solo(relay_port, requests)
                timed = [a for a in alone if a]
                print(f"alone: {len(timed)} requests, {min(timed):.2f}–{max(timed):.2f} s "
                      f"at {time.strftime('%H:%M:%S')}", flush=True)
            for run in range(args.runs):
                for arm in arms[run % len(arms):] + arms[:run % len(arms)]:
                    rows = run_arm(args, arm, relay_port, requests)
                    results[arm].append(rows)
                    save(path, {"args": vars(args), "vllm": results, "alone": alone})
                    s = summary(rows)
                    print(f"run {run + 1} {arm}: {s} at {time.strftime('%H:%M:%S')}", flush=True)
        finally:
            stop(engine)
    measured = {arm: summary([r for rows in results[arm] for r in rows]) for arm in arms}
    for arm in arms:
        per_run = [summary(rows)["mean_ttlt"] for rows in results[arm]]
        base_runs = [summary(rows)["mean_ttlt"] for rows in results[arms[0]]]
        ratio, half = interval([a / b for a, b in zip(per_run, base_runs)])
        measured[arm].update(per_run_mean_ttlt=per_run, ratio=ratio, ratio_95=half,
                             max_relative_wait=alone and longest_relative_wait(results[arm], alone))
    # The measurements first: a failed simulation loses nothing.
    save(path, {"args": vars(args), "vllm": results, "alone": alone, "measured": measured})
    print_measured(arms, measured)
    failed = {arm: m["failed"] for arm, m in measured.items() if m["failed"]}
    if failed:
        sys.exit(f"requests failed on vLLM ({failed}): no fit from a partial run")
    # The simulator as preset, then with its step time fitted to the first arm's measured mean:
    # the other arms are what the fit did not see.
    preset, _ = simulated(args)
    fitted, fit = simulated(args, (arms[0], measured[arms[0]]["mean_ttlt"]))
    save(path, {"args": vars(args), "vllm": results, "alone": alone, "measured": measured,
                "simulated": preset, "fitted": fitted, "fit": fit})
    print(f"\nstep time fitted to {arms[0]}'s mean TTLT: {fit}")
    base = arms[0]
    print(f"\n| arm | vLLM mean TTLT | over {base} | P99 | simulated (preset) | over {base} | "
          f"sim / vLLM | simulated (fitted) | over {base} | sim / vLLM |\n"
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
