#!/usr/bin/env python3
"""OpenCL on POCL: an unchanged OpenCL program as a foreground (open-loop requests) beside a
saturating background process, natively and through the xsched shim + daemon (default
settings: only XSCHED_PRIORITY per process), for short and long background kernels; plus the
shim's per-call cost on clEnqueueNDRangeKernel. Prints a Markdown table for docs/BENCHMARKS.md.

Usage: python3 scripts/bench-opencl.py [--runs 3] [--requests 300] [--bg-works 100,1000]
       python3 scripts/bench-opencl.py --calls-only   (the per-call cost in each XSCHED_MODE)
Needs: cargo build --release -p xsched-cli -p xsched-shim-opencl, POCL, cc and the OpenCL
headers (scripts/test.sh installs them).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XSCHED = os.path.join(ROOT, "target/release/xsched")
SHIM = os.path.join(ROOT, "target/release/libxsched_opencl.so")
SOURCE = os.path.join(ROOT, "crates/shim-opencl/tests/c/vecprog.c")
INCLUDE = os.path.join(ROOT, "crates/interpose/c")  # checksum.h, shared with the CUDA programs
N = "16384"


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("XSCHED_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def fg(prog, work, period_us, requests, kernels, env):
    out = subprocess.run([prog, "fg", N, str(work), str(period_us), str(requests), str(kernels)],
                         env=clean_env(env), check=True, capture_output=True, text=True)
    return last_json(out.stdout)


def start_bg(prog, work, env):
    p = subprocess.Popen([prog, "bg", N, str(work)], env=clean_env(env),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    p.stdout.readline()  # running
    time.sleep(0.5)
    return p


def stop_bg(p):
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    return last_json(out)


def bg_alone(prog, work, seconds):
    p = start_bg(prog, work, {})
    time.sleep(seconds)
    return stop_bg(p)["kernels_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--fg-work", type=int, default=50, help="fg kernel length knob")
    ap.add_argument("--fg-kernels", type=int, default=8, help="kernels per fg request")
    ap.add_argument("--period-us", type=int, default=15000)
    ap.add_argument("--bg-works", default="100,1000", help="bg kernel length knobs (short, long)")
    ap.add_argument("--calls-only", action="store_true",
                    help="only the per-call cost, natively and through the shim in each XSCHED_MODE")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="xsched-bench-ocl-")
    prog = os.path.join(tmp, "vecprog")
    subprocess.run(["cc", "-O2", "-Wno-deprecated-declarations", "-I", INCLUDE, "-o", prog, SOURCE,
                    "-lOpenCL", "-lm"], check=True)
    sock = os.path.join(tmp, "xsched.sock")
    daemon = subprocess.Popen([XSCHED, "serve", "--socket", sock],
                              stderr=subprocess.DEVNULL, env=clean_env({}))
    while not os.path.exists(sock):
        time.sleep(0.05)
    shim = {"LD_PRELOAD": SHIM, "XSCHED_SCHEDULER": "global", "XSCHED_SOCKET": sock}
    rows = []
    try:
        for bg_work in [] if args.calls_only else [int(w) for w in args.bg_works.split(",")]:
            res = {k: [] for k in ["alone", "native", "shim", "bg_alone", "bg_native", "bg_shim",
                                   "p50_alone", "p50_native", "p50_shim"]}
            for run in range(args.runs):
                a = fg(prog, args.fg_work, args.period_us, args.requests, args.fg_kernels, {})
                seconds = a["requests"] * args.period_us / 1e6
                res["bg_alone"].append(bg_alone(prog, bg_work, seconds))
                for mode, env_fg, env_bg in [
                    ("native", {}, {}),
                    ("shim", {**shim, "XSCHED_PRIORITY": "10"}, {**shim, "XSCHED_PRIORITY": "0"}),
                ]:
                    p = start_bg(prog, bg_work, env_bg)
                    f = fg(prog, args.fg_work, args.period_us, args.requests, args.fg_kernels, env_fg)
                    b = stop_bg(p)
                    res[mode].append(f["p99_us"] / a["p99_us"])
                    res["p50_" + mode].append(f["p50_us"])
                    res["bg_" + mode].append(b["kernels_per_s"])
                res["alone"].append(a["p99_us"])
                res["p50_alone"].append(a["p50_us"])
                print(f"bg_work {bg_work} run {run}: alone p99 {a['p99_us']:.0f} us, "
                      f"native {res['native'][-1]:.2f}x, shim {res['shim'][-1]:.2f}x, "
                      f"bg/s alone {res['bg_alone'][-1]:.0f} native {res['bg_native'][-1]:.0f} "
                      f"shim {res['bg_shim'][-1]:.0f}", file=sys.stderr)
            rows.append((bg_work, res))
        over = {}
        calls = [("native", {}), ("shim", {"LD_PRELOAD": SHIM})]
        calls += [(f"shim {m}", {"LD_PRELOAD": SHIM, "XSCHED_MODE": m})
                  for m in ["observe", "cooperative", "preemptive"]]
        for name, env in calls:
            vals = []
            for _ in range(args.runs):
                out = subprocess.run([prog, "overhead", "1", "0", "2000"], env=clean_env(env),
                                     check=True, capture_output=True, text=True)
                vals.append(last_json(out.stdout)["enqueue_ns"])
            over[name] = vals
    finally:
        daemon.terminate()
        daemon.wait()

    med = statistics.median
    rng = lambda v, f: f"{f(med(v))} ({f(min(v))}–{f(max(v))})"
    x = lambda r: f"{r:.2f}×"
    us = lambda u: f"{u:.0f}"
    print(f"fg: N={N}, work {args.fg_work}, one request = write + {args.fg_kernels} kernels + "
          f"blocking read, every "
          f"{args.period_us} µs, {args.requests} requests; median (min–max) of {args.runs} runs\n")
    print("| bg kernel (work) | fg P99 standalone µs | native P99 ratio | shim+daemon P99 ratio "
          "| fg P50 µs alone / native / shim | bg kernels/s alone | bg native | bg shim |")
    print("|---|---|---|---|---|---|---|---|")
    for bg_work, r in rows:
        print(f"| {bg_work} | {rng(r['alone'], us)} | {rng(r['native'], x)} | "
              f"{rng(r['shim'], x)} | {us(med(r['p50_alone']))} / {us(med(r['p50_native']))} / "
              f"{us(med(r['p50_shim']))} | {us(med(r['bg_alone']))} | {us(med(r['bg_native']))} | "
              f"{us(med(r['bg_shim']))} |")
    print(f"\nclEnqueueNDRangeKernel call, best of 5 × 2000 calls, median (min–max) of {args.runs} "
          "runs (the shim in process, local scheduler):\n")
    print("| program | ns per call | added by xsched |")
    print("|---|---|---|")
    for name, vals in over.items():
        print(f"| {name} | {rng(vals, us)} | {med(vals) - med(over['native']):+.0f} |")


if __name__ == "__main__":
    main()
