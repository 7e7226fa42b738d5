"""A CuPy loop for the GPU suite: prints the memory pool's own figures."""
import json
import os
import sys

import cupy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracer_snapshot import snapshot  # noqa: E402


def main():
    total = 0.0
    for i in range(30):
        a = cupy.arange(1 << 20, dtype=cupy.float32) * (i + 1)
        total += float((a * 2).sum())
    cupy.cuda.Device().synchronize()
    pool = cupy.get_default_memory_pool()
    snapshot()
    print(json.dumps({"sum": total, "pool_total_bytes": pool.total_bytes(),
                      "pool_used_bytes": pool.used_bytes()}), flush=True)


if __name__ == "__main__":
    main()
