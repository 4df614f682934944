#!/usr/bin/env python3
"""tinygrad on OpenCL (`DEV=CL`), unchanged, as the shim's real-framework workload: an MLP
inference loop (784-256-256-10, batch 4, TinyJit) and an MLP training loop (784-1024-1024-10,
batch 256, Adam). Every run is seeded, so two runs compute the same numbers; each mode prints one
JSON line on standard output.

  mlp.py infer REQUESTS [PERIOD_MS]  open-loop requests every PERIOD_MS (default 10, +-25 %
                                     jitter): latency from each request's scheduled arrival to its
                                     result, P50/P99 (ms), and a digest of every output
  mlp.py train STEPS                 STEPS Adam steps (at least 3): the last loss, a digest of
                                     every loss and of the final weights, steps/s after the first
                                     two (which compile)
  mlp.py train-until-stdin-closes    Adam steps until standard input closes (the background of a
                                     pair): steps and steps/s

Run it under xsched with `xsched run [--global] --priority N -- python3 mlp.py ...`.
"""

import hashlib
import json
import os
import random
import select
import sys
import time

os.environ.setdefault("DEV", "CL")

import numpy as np  # noqa: E402
from tinygrad import Tensor, TinyJit, nn  # noqa: E402
from tinygrad.helpers import Context  # noqa: E402

# After tinygrad's import: scripts/ has a tinygrad/ folder too (this one).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from quantile import quantile  # noqa: E402  (scripts/quantile.py)


class MLP:
    def __init__(self, sizes):
        self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = x.relu()
        return x


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def infer(requests, period_ms):
    Tensor.manual_seed(1)
    model = MLP([784, 256, 256, 10])
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((4, 784)).astype(np.float32) for _ in range(8)]

    @TinyJit
    def step(x):
        return model(x).realize()

    for x in inputs[:3]:  # TinyJit captures on the second call, replays from the third
        step(Tensor(x)).numpy()
    jitter = random.Random(3)
    outputs, latency = [], []
    start = time.perf_counter() + 0.05
    for i in range(requests):
        due = start + i * period_ms / 1000 + jitter.uniform(-0.25, 0.25) * period_ms / 1000
        time.sleep(max(0.0, due - time.perf_counter()))
        out = step(Tensor(inputs[i % len(inputs)])).numpy()
        latency.append((time.perf_counter() - due) * 1000)
        outputs.append(out)
    nan = float("nan")
    print(json.dumps({
        "mode": "infer", "requests": requests, "p50_ms": round(quantile(latency, 0.5, nan), 3),
        "p99_ms": round(quantile(latency, 0.99, nan), 3), "outputs": digest(outputs),
    }), flush=True)


def trainer():
    Tensor.manual_seed(4)
    model = MLP([784, 1024, 1024, 10])
    params = nn.state.get_parameters(model)
    opt = nn.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(5)
    x = Tensor(rng.standard_normal((256, 784)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, 256).astype(np.int32))

    @TinyJit
    def step():
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    return step, params


def train(steps):
    step, params = trainer()
    # The first two steps compile and capture the JIT: counted in the losses, not in the time.
    losses = [float(step().numpy()) for _ in range(min(2, steps))]
    start = time.perf_counter()
    for _ in range(steps - len(losses)):
        losses.append(float(step().numpy()))
    took = max(time.perf_counter() - start, 1e-9)
    print(json.dumps({
        "mode": "train", "steps": steps, "steps_per_s": round((steps - 2) / took, 3),
        "loss": losses[-1], "losses": digest([np.array(losses)]),
        "weights": digest([p.numpy() for p in params]),
    }), flush=True)


def train_until_stdin_closes():
    step, _ = trainer()
    step().numpy()
    print(json.dumps({"mode": "train", "started": True}), flush=True)
    steps, start = 0, time.perf_counter()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        if ready and not sys.stdin.read(1):
            break
        step().numpy()
        steps += 1
    took = time.perf_counter() - start
    print(json.dumps({"mode": "train", "steps": steps, "steps_per_s": round(steps / took, 3)}),
          flush=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "infer":
        infer(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)
    elif mode == "train":
        train(max(3, int(sys.argv[2])))
    elif mode == "train-until-stdin-closes":
        train_until_stdin_closes()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
