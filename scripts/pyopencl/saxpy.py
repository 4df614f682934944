#!/usr/bin/env python3
"""A PyOpenCL program (PyPI's wheel, which links its own copy of the ICD loader): N launches of a
saxpy kernel on the first OpenCL device, then prints one JSON line with a digest of the result.
With `hold`, it prints "holding" after the launches and waits for stdin to close before reading
the result back, so a test can look at its queue in `xsched top` meanwhile.

Usage: saxpy.py [N] [hold]
"""

import hashlib
import json
import sys

import numpy as np
import pyopencl as cl

SOURCE = """
__kernel void saxpy(__global float* y, __global const float* x, float a) {
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    hold = "hold" in sys.argv[2:]
    device = cl.get_platforms()[0].get_devices()[0]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, SOURCE).build()
    x = np.arange(4096, dtype=np.float32) / 7
    y = np.ones(4096, dtype=np.float32)
    mf = cl.mem_flags
    x_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    y_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y)
    saxpy = program.saxpy
    for i in range(n):
        saxpy(queue, y.shape, (64,), y_buf, x_buf, np.float32(0.5 + i % 3))
    if hold:
        print("holding", flush=True)
        sys.stdin.read()
    cl.enqueue_copy(queue, y, y_buf)
    queue.finish()
    digest = hashlib.sha256(y.tobytes()).hexdigest()[:16]
    print(json.dumps({"launches": n, "device": device.name, "digest": digest, "sum": float(y.sum())}))


if __name__ == "__main__":
    sys.exit(main())
