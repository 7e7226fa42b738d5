"""CuPy's default memory pool, played by the stand-in package
(tests/sim/python/cupy), under the tracer on the simulator.

    cupy_blocks.py SCENARIO [SNAPSHOT]

The stand-in hands out blocks carved from chunks it takes with cudaMalloc,
as CuPy's pool does, so the driver sees what it sees under CuPy's default
mode. Scenarios mix real leaks with innocent temporaries; lines carry
markers test_cupy.py checks:
  LEAK-<scenario>  kept every step: growing, this line named
  HELD-<scenario>  held by a module global until the interpreter's teardown
  TEMP-<scenario>  a temporary: never growing, never held
  OOM-<scenario>   the request that fails
"""
import ctypes
import json
import os
import sys
import threading
import time

import cupy

MiB = 1 << 20


def step_pause():
    time.sleep(0.01)


def training_mix(steps=60):
    """A leak carved out of the chunk a larger temporary just gave back: the
    driver sees only the temporary's line ask for memory, every step."""
    weights = [cupy.empty(MiB // 4) for _ in range(4)]  # HELD-training_mix
    kept = []
    nothing = cupy.empty(0)     # size 0: no memory, no record
    for _ in range(steps):
        scratch = cupy.empty(MiB // 2)  # TEMP-training_mix
        del scratch
        kept.append(cupy.empty(MiB // 4))  # LEAK-training_mix
        activation = cupy.empty(3 << 16)  # TEMP-training_mix
        view = activation.view()
        del activation, view
        step_pause()
    return weights, kept, nothing


def held_at_end():
    return [cupy.empty(2 * MiB) for _ in range(3)]  # HELD-held_at_end


def explicit_free():
    """PooledMemory.free() gives a block back while its object lives on: the
    block the pool hands out again at that address is another one, which the
    first object's end must not end."""
    first = cupy.empty(MiB)
    first.data.mem.free()
    second = cupy.empty(MiB)  # HELD-explicit_free
    assert second.data.ptr == first.data.ptr, "the pool gave the same block again"
    del first
    return second


def replaced(steps=20):
    """The program puts an allocator of its own in after a while (RMM's,
    a pool of its own): ours is not put back."""
    kept = [cupy.empty(MiB) for _ in range(4)]
    time.sleep(0.3)             # the bridge sees ours in place
    cupy.cuda.set_allocator(cupy.cuda.MemoryPool().malloc)
    for _ in range(steps):
        kept.append(cupy.empty(MiB))
        step_pause()
    time.sleep(0.3)             # and sees it replaced
    return kept


def not_a_pool(steps=30):
    """No pool at all (set_allocator(None) before any allocation): each
    array is a cudaMalloc of its own, which the driver view traces."""
    cupy.cuda.set_allocator(None)
    kept = []
    for _ in range(steps):
        scratch = cupy.empty(2 * MiB)  # TEMP-not_a_pool
        kept.append(cupy.empty(64 << 10))  # LEAK-not_a_pool
        del scratch
        step_pause()
    return kept


def exhaustion_oom():
    kept = []
    try:
        while True:
            kept.append(cupy.empty(16 * MiB))  # OOM-exhaustion_oom
    except cupy.cuda.OutOfMemoryError:
        print(f"exhaustion_oom: OutOfMemoryError after {len(kept)} arrays", flush=True)
    return kept


def threads_and_snapshots(seconds=1.5):
    """Four threads allocate through the pool (its lock, then ours) while
    the main thread asks for snapshots (our locks)."""
    api = ctypes.CDLL(None)
    stop = time.time() + seconds
    errors = []

    def churn():
        try:
            while time.time() < stop:
                arrays = [cupy.empty(16 << 10) for _ in range(8)]
                del arrays
        except Exception as error:
            errors.append(error)

    workers = [threading.Thread(target=churn) for _ in range(4)]
    for w in workers:
        w.start()
    snapshots = 0
    while time.time() < stop:
        if snapshots < 25:      # every report is checked against the schema: enough
            api.cumemtrace_snapshot(b"snap-%d" % snapshots)
            snapshots += 1
        time.sleep(0.05)
    for w in workers:
        w.join()
    assert not errors, errors
    print(f"threads_and_snapshots: {snapshots} snapshots", flush=True)


def fork_while_allocating(seconds=1.0):
    """fork() while threads allocate: every child allocates, frees, exits."""
    stop = time.time() + seconds

    def churn():
        while time.time() < stop:
            arrays = [cupy.empty(16 << 10) for _ in range(4)]
            del arrays

    workers = [threading.Thread(target=churn) for _ in range(3)]
    for w in workers:
        w.start()
    children = 0
    while time.time() < stop:
        pid = os.fork()
        if pid == 0:    # the pool's lock may have been held: the child's own calls
            import signal
            signal.alarm(20)
            cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(MiB))
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        children += 1
    for w in workers:
        w.join()
    print(f"children {children}", flush=True)


def chunk_before_traced(steps=20):
    """The pool's first chunk is taken before our allocator is in (a program
    whose first CUDA call is CuPy's), and a temporary reuses it each step:
    at the end the chunk is the pool's cached memory, not its line's."""
    first = cupy.empty(4 * MiB)  # TEMP-chunk_before_traced
    del first
    wait_for_allocator()
    for _ in range(steps):
        scratch = cupy.empty(4 * MiB)  # TEMP-chunk_before_traced
        del scratch
        step_pause()


def wait_for_allocator():
    deadline = time.time() + 30
    while getattr(cupy.cuda.get_allocator(), "__name__", "") != "cumemtrace_cupy_malloc":
        assert time.time() < deadline, "cumemtrace's allocator never went in"
        time.sleep(0.01)


def wait_traced():
    """The tracer starts at the program's first CUDA call, which is inside
    the pool's first cudaMalloc: that one block is not traced. Take it, give
    it back, and wait for our allocator to be in place."""
    block = cupy.empty(1)
    del block
    cupy.get_default_memory_pool().free_all_blocks()
    wait_for_allocator()


def stats():
    pool = cupy.get_default_memory_pool()
    return {"used": pool.used_bytes(), "total": pool.total_bytes()}


SCENARIOS = {f.__name__: f for f in (training_mix, chunk_before_traced, held_at_end, explicit_free,
                                      replaced, not_a_pool,
                                      exhaustion_oom, threads_and_snapshots,
                                      fork_while_allocating)}
HELD = None   # module global: what a scenario returns lives until interpreter teardown

if __name__ == "__main__":
    if os.environ.get("WAIT_TRACED") == "1":
        wait_traced()
    HELD = SCENARIOS[sys.argv[1]]()
    if len(sys.argv) > 2:   # a snapshot now, and the pool's own figures of the same moment
        ctypes.CDLL(None).cumemtrace_snapshot(sys.argv[2].encode())
    print("stats:", json.dumps(stats()), flush=True)
