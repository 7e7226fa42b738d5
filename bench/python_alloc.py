"""cudaMalloc+cudaFree pairs made from Python, for bench/run.py's Python table.

    python3 bench/python_alloc.py FRAMES PAIRS

Calls the runtime through ctypes.CDLL, which lets the GIL go as PyTorch,
CuPy and JAX do before they allocate, from FRAMES nested Python functions.
The first pair (the tracer's start-up) is left out of the timing. Prints one
JSON line: {"ns_per_pair": ...}.
"""
import ctypes
import json
import sys
import time

runtime = ctypes.CDLL("libcudart.so.13")
pointer = ctypes.c_void_p()
where, size = ctypes.byref(pointer), ctypes.c_size_t(512)


def pairs(count):
    for _ in range(count):
        runtime.cudaMalloc(where, size)
        runtime.cudaFree(pointer)


def nest(frames, count):
    return pairs(count) if frames <= 1 else nest(frames - 1, count)


frames, count = int(sys.argv[1]), int(sys.argv[2])
pairs(1)
start = time.perf_counter()
nest(frames, count)
print(json.dumps({"ns_per_pair": (time.perf_counter() - start) / count * 1e9}))
