#!/usr/bin/env python3
"""Foreground for scripts/gpu-check.sh: open-loop inference requests on the GPU with random
weights (a small transformer by default; ResNet-50 with --model resnet50 if torchvision is
installed). An unchanged PyTorch program: xsched reaches it only through LD_PRELOAD.
Prints one JSON line: request latency P50/P99 in ms."""
import argparse
import faulthandler
import json
import os
import signal
import sys
import time

# scripts/quantile.py (gpu-check.sh stages it beside gpu/, as in scripts/).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from quantile import quantile  # noqa: E402


def build(model, batch, torch):
    if model == "resnet50":
        import torchvision  # optional

        net = torchvision.models.resnet50(weights=None)
        x = torch.randn(batch, 3, 224, 224)
    else:
        layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, batch_first=True)
        net = torch.nn.TransformerEncoder(layer, num_layers=6)
        x = torch.randn(batch, 128, 512)
    return net.cuda().eval(), x.cuda()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["transformer", "resnet50"], default="transformer")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--period-ms", type=float, default=20.0, help="arrival period (open loop)")
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    # scripts/gpu-check.sh sends SIGUSR1 to a run that overran its bound: every thread's stack.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    import torch

    torch.manual_seed(0)
    net, x = build(a.model, a.batch, torch)
    lat = []
    with torch.inference_mode():
        start = time.perf_counter()
        for i in range(a.warmup + a.requests):
            due = start + i * a.period_ms / 1e3
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)
            t = max(due, time.perf_counter())
            net(x)
            torch.cuda.synchronize()
            if i >= a.warmup:
                lat.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({
        "mode": "fg", "model": a.model, "requests": len(lat),
        "p50_ms": round(quantile(lat, 0.5), 3),
        "p99_ms": round(quantile(lat, 0.99), 3),
    }))


if __name__ == "__main__":
    main()
