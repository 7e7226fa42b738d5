"""A CuPy loop for bench/gpu_cost.py: prints {"step_ms": ...} for STEPS steps.

    python3 bench/cupy_step.py [STEPS]

Each step makes a few temporaries through CuPy's memory pool (a few
cudaMallocs at the start, then reuse), computes and reads back a sum.
"""
import json
import sys
import time

import cupy


def step(i):
    a = cupy.arange(1 << 20, dtype=cupy.float32) * (i % 7 + 1)
    b = cupy.sqrt(a) + a * 0.5
    return float(b.sum())


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for i in range(50):
        step(i)   # warm-up: pool filled, kernels compiled
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    total = 0.0
    for i in range(steps):
        total += step(i)
    cupy.cuda.Device().synchronize()
    elapsed = time.perf_counter() - start
    print(json.dumps({"step_ms": elapsed * 1000 / steps, "checksum": total}), flush=True)


if __name__ == "__main__":
    main()
