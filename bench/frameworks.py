"""CuPy's blocks and JAX's arrays under the tracer, on the stand-in packages
(tests/sim/python), for bench/run.py's frameworks table.

    python3 bench/frameworks.py cupy PAIRS
    python3 bench/frameworks.py jax ARRAYS

cupy: PAIRS arrays of 1 KiB made and dropped through CuPy's pool (served
from its cache after the first: no CUDA call), after a warm-up that waits
for cumemtrace's allocator when it is preloaded. Prints {"ns_per_pair": ...}.
jax: ARRAYS live arrays, then two snapshots, each of which sweeps them (the
first records them all, the second finds them all known); the sweep times
are the tracer's own (CUMEMTRACE_DEBUG=1 lines, read by run.py). Prints
{"python_ns_per_array": ...}: what the same calls into the stand-in cost
from Python, the part of a sweep that is the stand-in's, not ours.
"""
import ctypes
import json
import os
import sys
import time


def cupy_pairs(count):
    import cupy
    block = cupy.empty(256)
    del block
    deadline = time.time() + 30
    while "LD_PRELOAD" in os.environ and os.environ.get("CUMEMTRACE_FRAMEWORKS") != "0" and \
            getattr(cupy.cuda.get_allocator(), "__name__", "") != "cumemtrace_cupy_malloc":
        assert time.time() < deadline, "cumemtrace's allocator never went in"
        time.sleep(0.01)
    start = time.perf_counter()
    for _ in range(count):
        block = cupy.empty(256)
        del block
    return {"ns_per_pair": (time.perf_counter() - start) / count * 1e9}


def jax_sweeps(count):
    import jax.numpy as jnp
    arrays = [jnp.ones(64) for _ in range(count)]
    api = ctypes.CDLL(None)
    api.cumemtrace_snapshot(os.path.join(os.environ.get("BENCH_DIR", "."), "first").encode())
    api.cumemtrace_snapshot(os.path.join(os.environ.get("BENCH_DIR", "."), "again").encode())
    start = time.perf_counter()
    for a in arrays:
        a.unsafe_buffer_pointer()
        a.on_device_size_in_bytes()
        hash(a.traceback)
    return {"python_ns_per_array": (time.perf_counter() - start) / count * 1e9}


if __name__ == "__main__":
    mode, count = sys.argv[1], int(sys.argv[2])
    print(json.dumps(cupy_pairs(count) if mode == "cupy" else jax_sweeps(count)), flush=True)
