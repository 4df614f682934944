#!/usr/bin/env python3
"""Background for scripts/gpu-check.sh: a training loop (a transformer with random data) until
SIGTERM. An unchanged PyTorch program. Prints a JSON line when it started and one with its
throughput (iterations per second) when stopped."""
import argparse
import faulthandler
import json
import signal
import time

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    a = p.parse_args()
    # scripts/gpu-check.sh sends SIGUSR1 to a run that overran its bound: every thread's stack.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    import torch

    signal.signal(signal.SIGTERM, on_term)
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, num_layers=6).cuda().train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    x = torch.randn(a.batch, a.seq, 512, device="cuda")
    for _ in range(3):  # warm up before saying we run
        opt.zero_grad()
        net(x).square().mean().backward()
        opt.step()
    torch.cuda.synchronize()
    print(json.dumps({"mode": "bg", "started": True}), flush=True)
    iters, start = 0, time.perf_counter()
    while not stop:
        opt.zero_grad()
        net(x).square().mean().backward()
        opt.step()
        iters += 1
        if iters % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"mode": "bg", "iters": iters, "seconds": round(seconds, 3),
                      "iters_per_s": round(iters / seconds, 3)}), flush=True)


if __name__ == "__main__":
    main()
