#!/usr/bin/env python3
"""The summary of scripts/gpu-check.sh's run step, as Markdown tables for docs/results/gpu-runs.md:
the PyTorch foreground's latency in each mode, the CUDA runtime program in each mode, and the
preemption latency by level and command length. A step that left no result shows as such.

usage: summary.py RESULTS_DIR GPU_NAME TORCH(0|1)"""
import json
import pathlib
import sys


def last_json(path):
    """The last JSON line of a result file, or None where the step left none."""
    try:
        return json.loads(path.read_text().strip().splitlines()[-1])
    except (OSError, IndexError, ValueError):
        return None


def torch_table(out):
    alone = last_json(out / "standalone-fg.json")
    rows = [
        ("standalone", "standalone", None),
        ("native, beside the background", "native", "native"),
        ("under the shim alone (in-process scheduler)", "shim-local", None),
        ("under the shim + daemon (hpf), beside the background", "shim", "shim"),
    ]
    print("| foreground | p50 ms | p99 ms | p99 / standalone | background iters/s |")
    print("|---|---|---|---|---|")
    for label, fg_name, bg_name in rows:
        fg = last_json(out / f"{fg_name}-fg.json")
        bg = (last_json(out / f"{bg_name}-bg.json") or {}) if bg_name else {}
        rate = bg.get("iters_per_s", "no result" if bg_name else "-")
        if fg is None or "p99_ms" not in fg:
            print(f"| {label} | no result | | | {rate} |")
            continue
        ratio = f"{fg['p99_ms'] / alone['p99_ms']:.2f}" if alone and "p99_ms" in alone else "-"
        print(f"| {label} | {fg['p50_ms']} | {fg['p99_ms']} | {ratio} | {rate} |")
    print()


def cudart_table(out):
    modes = ["native", "shim-local", "shim-global", "shim-blocking"]
    if not any((out / f"cudart-{m}.txt").exists() for m in modes):
        return
    print("| CUDA runtime program | result | last step reached |")
    print("|---|---|---|")
    for mode in modes:
        try:
            result = (out / f"cudart-{mode}.txt").read_text().strip() or "no result"
            steps = [line for line in (out / f"cudart-{mode}.err").read_text().splitlines()
                     if line.startswith("cudart-probe:")]
        except OSError:
            result, steps = "not run", []
        print(f"| {mode} | {result} | {steps[-1] if steps else '-'} |")
    print()


def preempt_table(out):
    print("| level | cmd us | fg alone us | preempt p50 us | preempt p99 us |")
    print("|---|---|---|---|---|")
    path = out / "preempt.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            r = json.loads(line)
            print(f"| {r['level']} | {r['cmd_us']} | {r['fg_alone_us']} | {r['p50_us']} | {r['p99_us']} |")
        except (ValueError, KeyError):
            print(f"| not a result: {line[:80]} | | | | |")


def main():
    out, gpu, torch = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    print(f"GPU: {gpu}\n")
    if torch:
        torch_table(out)
    cudart_table(out)
    preempt_table(out)


if __name__ == "__main__":
    main()
