"""Tensors through the stand-in for PyTorch's caching allocator (tests/sim/c10),
from a Python call depth like a model's forward, for bench/run.py's torch table.

    python3 bench/torch_tensors.py FRAMES STEPS [--between N | --backward]

Each step is a "forward": FRAMES - 3 Python frames that stay the same from
tensor to tensor (the training loop, the model, its blocks), then
one of four layers, each of which calls one of two operations, each of which
allocates a tensor and frees the one before: the outer frames repeat, the
inner three vary, as under a real model. Every allocation and free goes
through ctypes (the GIL let go, as PyTorch does) into the stand-in, which
tells the tracer's trace tracker. The tensors are served from the stand-in's
cache after the first step: no CUDA call. A warm-up step comes first; then
the marks "tensors: start" and "tensors: end" (only when traced) bracket the
timed steps, so the report's self_time_ns at each (CUMEMTRACE_SELF_TIME=1)
gives the tracer's own time. Prints one JSON line: {"ns_per_tensor": ...,
"tensors": ...}; a tensor is its allocation and its free.

--backward: the same number of tensors, each made and freed by a backward
node the stand-in's autograd engine runs on a thread of its own, which runs
no Python, while the main thread waits in one call at the same depth (one
thread for all the timed steps, as PyTorch's engine keeps one a device):
what a model's gradients cost, whose stacks borrow the main thread's frames.

--between N: before each tensor, N objects of a pool of 24,000 (about a
megabyte) are touched in turn, for a model's own work between two of its
tensors: the interpreter's code, and data beyond the first-level caches.
What the tracer then costs the whole program, and not only inside its
callback, is what its code and data evict of the program's (bench/run.py's
whole-program columns).
"""
import ctypes
import json
import sys
import time

c10 = ctypes.CDLL("libc10_cuda.so")
c10.c10sim_malloc.restype = ctypes.c_void_p
c10.c10sim_malloc.argtypes = [ctypes.c_int, ctypes.c_size_t]
c10.c10sim_free.argtypes = [ctypes.c_int, ctypes.c_void_p]
c10.c10sim_backward.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
mark = getattr(ctypes.CDLL(None), "cumemtrace_mark", None)     # None untraced
TENSORS_PER_LAYER = 8
held = [None]


class Thing:
    __slots__ = ("count",)

    def __init__(self):
        self.count = 0


POOL = [Thing() for _ in range(24000)] if "--between" in sys.argv else []
BETWEEN = int(sys.argv[sys.argv.index("--between") + 1]) if POOL else 0
cursor = [0]


def model_work():
    at = cursor[0]
    for thing in POOL[at:at + BETWEEN]:
        thing.count += 1
    cursor[0] = (at + BETWEEN) % (len(POOL) - BETWEEN)


def tensor(size):
    if BETWEEN:
        model_work()
    pointer = c10.c10sim_malloc(0, size)
    assert pointer, f"the stand-in refused {size} bytes"
    if held[0]:
        c10.c10sim_free(0, held[0])
    held[0] = pointer


def matmul(size):
    tensor(size)


def add(size):
    tensor(size + 512)


def attention(i):
    for j in range(TENSORS_PER_LAYER // 2):
        matmul(4096 * (j + 1))
        add(2048)


def feed_forward(i):
    for j in range(TENSORS_PER_LAYER // 2):
        add(8192)
        matmul(1024 * (j + 1))


def norm(i):
    for j in range(TENSORS_PER_LAYER // 2):
        add(512)
        add(1024)


def embedding(i):
    for j in range(TENSORS_PER_LAYER // 2):
        matmul(16384)
        matmul(512)


LAYERS = (attention, feed_forward, norm, embedding)


def forward(layers):
    for i in range(layers):
        LAYERS[i % len(LAYERS)](i)


def nest(frames, layers):
    return forward(layers) if frames <= 0 else nest(frames - 1, layers)


def step(frames, layers):
    # <module>, main, step, nest() k + 1 times, forward, a layer, an operation
    # and tensor(): FRAMES in all, at the allocation.
    nest(frames - 8, layers)


def backward(steps, layers):
    """All `steps` of backward nodes in one call, on one engine thread."""
    c10.c10sim_backward(0, 4096, steps * layers * TENSORS_PER_LAYER, None)


def nest_backward(frames, steps, layers):
    # <module>, main, nest_backward() k + 1 times and backward: FRAMES in
    # all, which the engine thread's stacks borrow.
    if frames <= 0:
        return backward(steps, layers)
    return nest_backward(frames - 1, steps, layers)


def main():
    frames, steps = int(sys.argv[1]), int(sys.argv[2])
    layers = 64
    c10.c10sim_init(1)
    step(frames, layers)                 # warm-up: the cache's segments, the tracker
    if "--backward" in sys.argv:
        nest_backward(frames - 4, 1, layers)
    if mark:
        mark(b"tensors: start")
    start = time.perf_counter()
    if "--backward" in sys.argv:
        nest_backward(frames - 4, steps, layers)
    else:
        for _ in range(steps):
            step(frames, layers)
    elapsed = time.perf_counter() - start
    if mark:
        mark(b"tensors: end")
    tensors = steps * layers * TENSORS_PER_LAYER
    print(json.dumps({"ns_per_tensor": elapsed / tensors * 1e9, "tensors": tensors}), flush=True)


if __name__ == "__main__":
    main()
