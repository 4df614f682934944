#!/usr/bin/env python3
"""tinygrad inference beside tinygrad training on POCL, A/B in one run, interleaved rounds: the
foreground's P99 over its P99 alone and training's steps/s, for

  alone       the inference loop alone (the baseline of every ratio)
  native      both, no xsched
  xsched      both under `xsched run --global` and the daemon (hpf: inference 10, training 0)
  sliced      the same with kernel slicing (XSCHED_SLICE_US)
  held        xsched, the daemon's policy `hpf:hold=MS`: training stays suspended until
              inference has been idle for MS (the host CPU's gaps between its kernels)
  yield       held, and training's queue keeps launching while held, on idle CPU only
              (XSCHED_CPU_HOLD=yield: its threads at SCHED_IDLE, its kernels still running)

and training alone natively, under xsched and sliced (slicing's own cost against both). Prints every run as a JSON line,
then the medians.

Needs target/release/xsched and target/release/libxsched_opencl.so
(cargo build --release -p xsched-cli -p xsched-shim-opencl) and tinygrad (bash
scripts/tinygrad.sh; its python in XSCHED_TINYGRAD_PYTHON or --python).

Usage: pair.py [--rounds 3] [--requests 300] [--period-ms 10] [--slice-us 500] [--hold-ms 3]
              [--arms alone,native,xsched,sliced,held,yield]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from quantile import quantile  # noqa: E402  (scripts/quantile.py)

XSCHED = ROOT / "target/release/xsched"
MLP = ROOT / "scripts/tinygrad/mlp.py"
SHIMMED = ("xsched", "sliced", "held", "yield")


def command(python, args, arm, socket, priority, slice_us):
    """mlp.py ARGS as the arm runs it, and its environment."""
    env = {**os.environ, "DEV": "CL", "XSCHED_OPENCL_SHIM": str(ROOT / "target/release/libxsched_opencl.so")}
    env.pop("XSCHED_SLICE_US", None)
    env.pop("XSCHED_CPU_HOLD", None)
    argv = [python, str(MLP), *args]
    if arm in SHIMMED:
        argv = [str(XSCHED), "run", "--global", "--socket", socket, "--priority", str(priority), "--", *argv]
        if arm == "sliced":
            env["XSCHED_SLICE_US"] = str(slice_us)
        if arm == "yield":
            env["XSCHED_CPU_HOLD"] = "yield"
    return argv, env


def last_json(text):
    return json.loads([l for l in text.splitlines() if l.startswith("{")][-1])


def set_policy(arm, a, socket):
    """The daemon's policy for `arm` (the hold only in `held`)."""
    policy = f"hpf:hold={a.hold_ms}" if arm in ("held", "yield") else "hpf"
    subprocess.run([str(XSCHED), "policy", "set", "--socket", socket, policy], check=True,
                   stdout=subprocess.DEVNULL)


def pair(python, arm, a, socket):
    """One run of `arm`: the foreground's result, and the background's (None when alone)."""
    if arm in SHIMMED:
        set_policy(arm, a, socket)
    bg = None
    if arm != "alone":
        argv, env = command(python, ["train-until-stdin-closes"], arm, socket, 0, a.slice_us)
        bg = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
        bg.stdout.readline()  # started: its kernels are compiled and it is training
    argv, env = command(python, ["infer", str(a.requests), str(a.period_ms)], arm, socket, 10, a.slice_us)
    fg = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=True)
    result = {"arm": arm, **last_json(fg.stdout)}
    if bg is not None:
        out, _ = bg.communicate("", timeout=300)
        result["train_steps_per_s"] = last_json(out)["steps_per_s"]
    return result


def train_alone(python, arm, a, socket):
    argv, env = command(python, ["train", str(a.steps)], arm, socket, 0, a.slice_us)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=True)
    return {"arm": f"train-{arm}", **last_json(out.stdout)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--period-ms", type=float, default=10.0)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--slice-us", type=int, default=500)
    p.add_argument("--hold-ms", type=float, default=3.0)
    p.add_argument("--arms", default="alone,native,xsched,sliced,held,yield")
    p.add_argument("--no-train-alone", action="store_true", help="skip slicing's cost runs")
    p.add_argument("--python", default=os.environ.get("XSCHED_TINYGRAD_PYTHON", "python3"))
    a = p.parse_args()
    socket = tempfile.mktemp(prefix="xsched-pair-", suffix=".sock")
    daemon = subprocess.Popen([str(XSCHED), "serve", "--socket", socket], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    runs = []
    try:
        arms = a.arms.split(",")
        for rnd in range(a.rounds):
            # Each round starts one arm later: no arm always runs first.
            for arm in arms[rnd % len(arms):] + arms[: rnd % len(arms)]:
                r = {"round": rnd, **pair(a.python, arm, a, socket)}
                print(json.dumps(r), flush=True)
                runs.append(r)
            alone = ["native", "xsched", "sliced"]
            for arm in [] if a.no_train_alone else alone[rnd % 3:] + alone[: rnd % 3]:
                r = {"round": rnd, **train_alone(a.python, arm, a, socket)}
                print(json.dumps(r), flush=True)
                runs.append(r)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    summarize(runs)


def summarize(runs):
    def med(arm, key):
        values = [r[key] for r in runs if r["arm"] == arm and key in r]
        return quantile(values, 0.5, default=float("nan"))

    alone = med("alone", "p99_ms")
    print("\nmedians of the rounds:")
    for arm in dict.fromkeys(r["arm"] for r in runs if not r["arm"].startswith("train-")):
        print(f"  {arm:8} P99 {med(arm, 'p99_ms'):8.2f} ms  {med(arm, 'p99_ms') / alone:5.2f}x alone"
              f"  training {med(arm, 'train_steps_per_s'):6.2f} steps/s")
    native, shimmed, sliced = (med(f"train-{arm}", "steps_per_s") for arm in ("native", "xsched", "sliced"))
    if native == native:  # not NaN: the cost runs ran
        print(f"  training alone: native {native:.3f} steps/s, under xsched {shimmed:.3f}"
              f" ({(1 - shimmed / native) * 100:+.1f} % cost), sliced {sliced:.3f}"
              f" ({(1 - sliced / native) * 100:+.1f} % against native,"
              f" {(1 - sliced / shimmed) * 100:+.1f} % against xsched unsliced)")


if __name__ == "__main__":
    sys.exit(main())
