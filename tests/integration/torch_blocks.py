"""PyTorch's caching allocator, played by the stand-in libc10_cuda.so
(tests/sim/c10), under the tracer on the simulator.

    torch_blocks.py SCENARIO

The stand-in hands out blocks carved from cached segments exactly where
PyTorch would, and tells trace trackers what it does, so the tracer sees
what it sees under PyTorch's default mode. Scenarios mix real leaks with
innocent temporaries; lines carry markers test_torch_*.py check:
  LEAK-<scenario>  kept every step: growing, this line named
  FREED-<scenario> kept every step, freed just before the program ends:
                   grew, then freed near the end (released), this line named
  HELD-<scenario>  held by a module global until the interpreter's teardown
  TEMP-<scenario>  a temporary: never growing, never held
  OOM-<scenario>   the request that fails
"""
import atexit
import ctypes
import json
import os
import sys
import threading
import time

c10 = ctypes.CDLL("libc10_cuda.so")
c10.c10sim_malloc.restype = ctypes.c_void_p
c10.c10sim_malloc.argtypes = [ctypes.c_int, ctypes.c_size_t]
c10.c10sim_free.argtypes = [ctypes.c_int, ctypes.c_void_p]
c10.c10sim_backward.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
MiB = 1 << 20


class Tensor:
    """Freed when the last reference goes, as a torch.Tensor is."""

    def __init__(self, size, device=0):
        self.device = device
        self.pointer = c10.c10sim_malloc(device, size)
        if not self.pointer:
            raise MemoryError(f"out of memory asking for {size} bytes")

    def __del__(self):
        if getattr(self, "pointer", None):
            c10.c10sim_free(self.device, self.pointer)


# The same Tensor as PyTorch's own, whose file is a framework's: its frames
# are never a site, so a tensor's site is the line that made it, as under
# PyTorch (scenarios modules_and_leak, compiled).
FRAMEWORK_TENSOR = """
class Tensor:
    def __init__(self, size, device=0):
        self.device = device
        self.pointer = c10.c10sim_malloc(device, size)
        if not self.pointer:
            raise MemoryError(f"out of memory asking for {size} bytes")

    def __del__(self):
        if getattr(self, "pointer", None):
            c10.c10sim_free(self.device, self.pointer)
"""
framework = {"c10": c10}
exec(compile(FRAMEWORK_TENSOR, "/opt/venv/lib/python3/site-packages/torch/_tensor.py", "exec"),
     framework)


def stats(device=0):
    figures = (ctypes.c_uint64 * 5)()
    c10.c10sim_stats(device, figures)
    return dict(zip(("allocated", "requested", "reserved", "inactive_split",
                     "inactive_split_blocks"), figures))


def step_pause():
    time.sleep(0.01)


def training_mix(steps=60):
    weights = [Tensor(4 * MiB) for _ in range(4)]  # HELD-training_mix
    kept = []
    for _ in range(steps):
        scratch = Tensor(48 * MiB)  # TEMP-training_mix
        kept.append(Tensor(256 << 10))  # LEAK-training_mix
        activation = Tensor(3 * MiB)  # TEMP-training_mix
        del scratch, activation
        step_pause()
    return weights, kept


def leak_beside_temporaries(steps=60, marked=True):
    """One line keeps a small tensor each step and makes two large
    temporaries it frees before the step's end, as `loss = f(g(h))` keeps
    the loss. The program marks its steps (cumemtrace_mark), so growth is
    observed between steps, where the temporaries are gone; its unmarked
    twin (leak_beside_temporaries_unmarked) is observed over its events,
    wherever they fall: the leak is told from the temporaries either way."""
    mark = ctypes.CDLL(None).cumemtrace_mark if marked else lambda label: None
    if marked:
        mark.argtypes = [ctypes.c_char_p]
    mark(b"start")
    kept = []
    for _ in range(steps):
        scratch = Tensor(48 * MiB)  # TEMP-leak_beside_temporaries
        a, b, k = Tensor(4 * MiB), Tensor(4 * MiB), Tensor(512)  # LEAK-leak_beside_temporaries
        kept.append(k)
        time.sleep(0.004)           # the step's work, its temporaries alive
        del scratch, a, b
        mark(b"step")
        step_pause()
    return kept


def leak_beside_temporaries_unmarked(steps=60):
    return leak_beside_temporaries(steps, marked=False)


# The shapes growth must call the same way on every run (bench/growth_repeat.py
# repeats them; CUMEMTRACE_TEST_STEP_S sets a step's pause, 0.02 s by default).
def step_seconds():
    return float(os.environ.get("CUMEMTRACE_TEST_STEP_S", "0.02"))


def short_leak(steps=78):
    """78 steps (1.5 s), each keeping 1 MiB made on the line of an 8 MiB
    temporary: growing."""
    kept = []
    for _ in range(steps):
        scratch, k = Tensor(8 * MiB), Tensor(1 * MiB)  # LEAK-short_leak
        kept.append(k)
        time.sleep(step_seconds() / 2)   # the step's work, the temporary alive
        del scratch
        time.sleep(step_seconds() / 2)
    return kept


def small_beside_big(steps=150):
    """150 steps (3 s), each keeping 512 bytes made on the line of a 4 MiB
    temporary: growing."""
    kept = []
    for _ in range(steps):
        scratch, k = Tensor(4 * MiB), Tensor(512)  # LEAK-small_beside_big
        kept.append(k)
        time.sleep(step_seconds() / 2)
        del scratch
        time.sleep(step_seconds() / 2)
    return kept


def steady_serving(steps=150):
    """A server that holds steady: weights, a cache of the last 8 requests'
    buffers of varying length (the oldest evicted), and per-request
    temporaries: nothing growing."""
    weights = Tensor(16 * MiB)  # HELD-steady_serving
    cache = []
    for step in range(steps):
        length = 1 + (step * 7919) % 13
        cache.append(Tensor(length * 256 << 10))  # TEMP-steady_serving
        if len(cache) > 8:
            cache.pop(0)
        activation = Tensor(length * MiB)  # TEMP-steady_serving
        time.sleep(step_seconds() / 2)
        del activation
        time.sleep(step_seconds() / 2)
    return weights


# Each half of a step of temporaries_at_samples: longer than the
# CUMEMTRACE_SAMPLE_MS its test sets (20) and the tracer's thread's 8 ms look.
SAMPLED_HALF = 0.05


def temporaries_at_samples(steps=20):
    """leak_beside_temporaries' line, sampled over time (no marks), with the
    samples put where they hurt: one line makes a step's 8 MiB temporary and
    the small tensors the step keeps, and the temporary lives through the
    step's work. Each half of a step outlasts the sampling interval, so a
    sample falls at the first tensor after each pause: at the line's first
    kept tensor, its temporary gone, and at the scratch tensor made while its
    temporary is alive. Read at the samples' moments the line goes 8 MiB up,
    8 MiB down, and looked like nothing growing; its low point between
    samples rises every time. Beside it a temporary alone, and a cache
    filled over the first steps, then held: neither growing."""
    kept, cache = [], []
    for step in range(steps):
        made = []
        for size in (512, 8 * MiB, 512, 512):
            made.append(Tensor(size))  # LEAK-temporaries_at_samples
        if step < 4:
            cache.append(Tensor(2 * MiB))  # HELD-temporaries_at_samples
        time.sleep(SAMPLED_HALF)    # the step's work, the line's temporary alive
        scratch = Tensor(16 * MiB)  # TEMP-temporaries_at_samples
        del made[1], scratch
        kept.extend(made)
        time.sleep(SAMPLED_HALF)    # between steps, every temporary gone
    return kept, cache


def remade_larger(steps=60):
    """A buffer freed, then made again larger each step (freed first, to
    keep the program's peak down): the line holds more at every step, yet
    nothing for a moment between the free and the allocation, where its low
    point is 0. Growing all the same, on its bytes at the samples."""
    buffer = None
    for step in range(steps):
        buffer = None
        buffer = Tensor((step + 1) << 18)  # LEAK-remade_larger
        scratch = Tensor(8 * MiB)  # TEMP-remade_larger
        del scratch
        step_pause()
    return buffer


def kept_then_freed(steps=60):
    """A function keeps each step's output in a list beside a per-step
    temporary, and returns: the list goes, then the program ends."""
    def epoch():
        outputs = []
        for _ in range(steps):
            scratch = Tensor(16 * MiB)  # TEMP-kept_then_freed
            outputs.append(Tensor(1 * MiB))  # FREED-kept_then_freed
            del scratch
            step_pause()
        return len(outputs)
    return epoch()


def held_at_end():
    return [Tensor(8 * MiB) for _ in range(3)]  # HELD-held_at_end


def never_freed():
    pointers = []
    for _ in range(4):
        pointers.append(c10.c10sim_malloc(0, 2 * MiB))  # HELD-never_freed
    return pointers


def cache_idle():
    big = Tensor(256 * MiB)  # TEMP-cache_idle
    del big
    small = Tensor(1 * MiB)
    time.sleep(0.05)
    return small


def fragmentation_oom():
    every = []
    try:
        while True:
            every.append(Tensor(6 * MiB))  # HELD-fragmentation_oom
    except MemoryError:
        pass
    kept = every[::3]
    del every
    try:
        Tensor(40 * MiB)  # OOM-fragmentation_oom
    except MemoryError:
        print("fragmentation_oom: out of memory", flush=True)
    return kept


def pool_oom():
    """Under SIMCUDA_MEMORY=1G: 150 tensors of 6 MiB fill 50 large-pool
    segments of 20 MiB, and freeing one of each three leaves a 6 MiB hole in
    each; then 512 KiB tensors, which only the small pool's 2 MiB segments
    serve, until the driver has no room for one more segment: holes twelve
    times the request, in the wrong pool."""
    big = [Tensor(6 * MiB) for _ in range(150)]  # HELD-pool_oom
    del big[1::3]
    small = []
    try:
        while True:
            small.append(Tensor(512 * 1024))  # OOM-pool_oom
    except MemoryError:
        print(f"pool_oom: out of memory after {len(small)} small tensors", flush=True)
    return big, small


def fragmented_at_end():
    """Small tensors kept to the end between freed larger ones: the holes
    between them are there until the interpreter's teardown frees them."""
    pairs = [(Tensor(6 * MiB), Tensor(2 * MiB)) for _ in range(48)]  # HELD-fragmented_at_end
    kept = [small for _, small in pairs]
    del pairs
    return kept


def exhaustion_oom():
    kept = []
    try:
        while True:
            kept.append(Tensor(64 * MiB))  # OOM-exhaustion_oom
    except MemoryError:
        print(f"exhaustion_oom: out of memory after {len(kept)} blocks", flush=True)
    return kept


def crash_with_tensors():
    """Tensors live when the program crashes: the dump names them."""
    kept = [Tensor(3 * MiB) for _ in range(4)]  # HELD-crash_with_tensors
    os.abort()
    return kept


def teardown_ctypes(steps=40):
    """No framework: cudaMalloc'd buffers owned by Python objects, kept in a
    module global and freed by __del__ at the interpreter's teardown."""
    cudart = ctypes.CDLL("libcudart.so.13")

    class Buffer:
        def __init__(self, size):
            self.pointer = ctypes.c_void_p()
            assert cudart.cudaMalloc(ctypes.byref(self.pointer), ctypes.c_size_t(size)) == 0

        def __del__(self):
            cudart.cudaFree(self.pointer)

    kept = []
    for _ in range(steps):
        kept.append(Buffer(1 * MiB))  # LEAK-teardown_ctypes
        scratch = Buffer(8 * MiB)  # TEMP-teardown_ctypes
        del scratch
        step_pause()
    return kept


def threads_and_snapshots(seconds=1.5, most=50):
    """Four threads allocate through the stand-in (its lock, then ours) while
    the main thread asks for snapshots (our locks) and holds the GIL: `most`
    of them, spread over the time (a report costs ~2 ms, and the test checks
    every one against the schema, ~0.1 s each)."""
    api = ctypes.CDLL(None)
    stop = time.time() + seconds
    errors = []

    def churn():
        try:
            while time.time() < stop:
                t = [Tensor(64 << 10) for _ in range(8)]
                del t
        except Exception as error:
            errors.append(error)

    workers = [threading.Thread(target=churn) for _ in range(4)]
    for w in workers:
        w.start()
    snapshots = 0
    while time.time() < stop:
        if snapshots < most * (1 - (stop - time.time()) / seconds) + 1:
            api.cumemtrace_snapshot(b"snap-%d" % snapshots)
            snapshots += 1
        else:
            time.sleep(0.001)
    for w in workers:
        w.join()
    assert not errors, errors
    print(f"threads_and_snapshots: {snapshots} snapshots", flush=True)


def watched():
    """Holds tensors, and a cache keeping a freed 32 MiB, while `cumemtrace
    live` looks (test_torch_blocks.py, test_torch_blocks_live): writes the pid to
    $TORCH_BLOCKS_READY, then waits until that file is gone."""
    weights = [Tensor(4 * MiB) for _ in range(4)]  # HELD-watched
    scratch = Tensor(32 * MiB)  # TEMP-watched
    del scratch
    ready = os.environ["TORCH_BLOCKS_READY"]
    with open(ready + ".tmp", "w") as handle:
        handle.write(f"{os.getpid()}\n")
    os.rename(ready + ".tmp", ready)
    stop = time.time() + 60
    while os.path.exists(ready) and time.time() < stop:
        time.sleep(0.02)
    return weights


def traceback_of(frame):
    """What the report must show for an allocation made in `frame`: its
    Python frames, innermost first (the function's qualified name from 3.11)."""
    frames = []
    while frame:
        code = frame.f_code
        frames.append((code.co_filename, getattr(code, "co_qualname", code.co_name),
                       frame.f_lineno))
        frame = frame.f_back
    return tuple(frames)


def frames_reused(rounds=40):
    """Tensors whose frames look alike to a walk that remembers the last
    one's: the same call depth, so the same frame addresses, reaching other
    lines, other functions, generators at other points, recursion of another
    depth, and code objects freed and compiled again at the same address under
    another file name. Every tensor is kept; prints how many each traceback
    holds, which the report's stacks must match exactly. Two threads at once,
    each with its own frames."""
    kept, lock = {}, threading.Lock()

    def keep(frame, pointer):
        assert pointer
        where = traceback_of(frame)
        with lock:
            kept.setdefault(where, []).append(pointer)

    def one_line_or_another(i):
        if i % 2:
            keep(sys._getframe(), c10.c10sim_malloc(0, 4096))
        else:
            keep(sys._getframe(), c10.c10sim_malloc(0, 4096))

    def first(i):
        keep(sys._getframe(), c10.c10sim_malloc(0, 8192))

    def second(i):
        keep(sys._getframe(), c10.c10sim_malloc(0, 8192))

    def producer(step):
        while True:
            keep(sys._getframe(), c10.c10sim_malloc(0, 2048))
            yield
            keep(sys._getframe(), c10.c10sim_malloc(0, 2048))
            yield

    def recurse(depth):
        if depth:
            return recurse(depth - 1)
        keep(sys._getframe(), c10.c10sim_malloc(0, 1024))

    names = [f"<frames_reused {i}>" for i in range(rounds)]   # kept: each its own address

    def compiled(i):
        source = "def site(keep, sys, c10):\n    keep(sys._getframe(), c10.c10sim_malloc(0, 512))\n"
        scope = {}
        exec(compile(source, names[i % len(names)], "exec"), scope)
        scope["site"](keep, sys, c10)
        scope.clear()      # the code object goes: the next may take its address

    def rounds_of(thread):
        generators = [producer(1), producer(2)]
        for i in range(rounds):
            one_line_or_another(i + thread)
            (first if (i + thread) % 2 else second)(i)
            next(generators[i % 2])
            recurse(i % 3)
            compiled(i)

    workers = [threading.Thread(target=rounds_of, args=(1,))]
    for w in workers:
        w.start()
    rounds_of(0)
    for w in workers:
        w.join()
    print("frames_reused:", json.dumps([[list(f) for f in where] + [len(pointers)]
                                        for where, pointers in kept.items()]), flush=True)
    return kept


def same_file_again(rounds=40):
    """Code compiled again and again under one file name, each time where
    the last one's code objects were freed, its tensor on one line or the
    next: the same bytes of code at the same addresses, under the same file,
    at another line. Every tensor is kept; prints how many each traceback
    holds, as frames_reused does."""
    kept = {}

    def keep(frame, pointer):
        assert pointer
        kept.setdefault(traceback_of(frame), []).append(pointer)

    sources = ["def site(keep, sys, c10):\n    keep(sys._getframe(), c10.c10sim_malloc(0, 256))\n",
               "def site(keep, sys, c10):\n\n    keep(sys._getframe(), c10.c10sim_malloc(0, 256))\n"]
    for i in range(rounds):
        scope = {}
        exec(compile(sources[i // 2 % 2], "<same_file_again>", "exec"), scope)
        scope["site"](keep, sys, c10)
        scope.clear()      # the code objects go: the next takes their addresses
    print("frames_reused:", json.dumps([[list(f) for f in where] + [len(pointers)]
                                        for where, pointers in kept.items()]), flush=True)
    return kept


def threads_come_and_go(threads=200):
    """Short-lived threads, one after another, each making the same tensors
    from the same lines (the second and third found by their frames' key, a
    table of some 200 KiB each thread maps at its first): the process's
    anonymous memory does not grow with the threads, and each tensor keeps
    its line. Prints that memory (KiB) before and after."""
    kept = []

    def mapped_kib():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("RssAnon:"))

    def allocate(depth):
        if depth:
            return allocate(depth - 1)
        for _ in range(3):
            kept.append(Tensor(4096))  # LEAK-threads_come_and_go
        kept.append(Tensor(8192))  # HELD-threads_come_and_go

    def run_one():
        worker = threading.Thread(target=allocate, args=(4,))
        worker.start()
        worker.join()

    for _ in range(10):     # the tracer's and the C library's first mappings
        run_one()
    before = mapped_kib()
    for _ in range(threads):
        run_one()
    print("mapped:", json.dumps({"before": before, "after": mapped_kib(), "threads": threads}),
          flush=True)
    return kept


def backward_nodes(steps=30):
    """Backward nodes run by the stand-in's autograd engine, on its own thread
    that runs no Python, while this one waits: every step makes an activation
    here, then keeps the gradients of two nodes (growing, named by the line
    that ran them) and lets those of four others go."""
    kept = []
    for _ in range(steps):
        activation = Tensor(2 * MiB)  # TEMP-backward_nodes
        gradients = (ctypes.c_void_p * 2)()
        c10.c10sim_backward(0, MiB, 2, gradients)  # LEAK-backward_nodes
        kept.append(gradients)
        c10.c10sim_backward(0, 3 * MiB, 4, None)  # TEMP-backward_nodes
        del activation
        step_pause()
    return kept


def backward_depths(nodes=40):
    """Backward nodes run on the stand-in's engine thread, many to a call,
    while this thread waits at two places of different depths: every
    gradient kept. Each node's stack at each place is made once, then found
    again by its key (the node and the reading of this thread's frames).
    The forward's tensors come first (the main thread's frames are lent
    once it has allocated), and leave their segments in the cache: no
    gradient asks the driver, whose call would walk the main thread's
    frames anew, and the engine thread must see by itself that they moved."""
    forward = [Tensor(MiB) for _ in range(2 * nodes)]  # TEMP-backward_depths
    del forward
    near = (ctypes.c_void_p * nodes)()
    c10.c10sim_backward(0, MiB, nodes, near)  # NEAR-backward_depths
    return [near, backward_deeper(nodes)]


def backward_deeper(nodes):
    far = (ctypes.c_void_p * nodes)()
    c10.c10sim_backward(0, MiB, nodes, far)  # FAR-backward_depths
    return far


def modules_and_leak(steps=40):
    """A model of 24 modules, each its own file holding its weights to the
    end, and one line that keeps a tensor every step beside a temporary."""
    layers = []
    for i in range(24):
        source = (f"def build(Tensor, MiB):\n"
                  f"    return [Tensor({1 + i % 4} * MiB) for _ in range(2)]\n")
        scope = {}
        exec(compile(source, f"/srv/model/layer{i}.py", "exec"), scope)
        layers.append(scope["build"](framework["Tensor"], MiB))  # HELD-modules_and_leak
    kept = []
    for _ in range(steps):
        scratch = framework["Tensor"](8 * MiB)  # TEMP-modules_and_leak
        kept.append(framework["Tensor"](256 << 10))  # LEAK-modules_and_leak
        del scratch
        step_pause()
    return layers, kept


# What torch.compile runs: Inductor's generated module (a file in its cache
# folder) and an FX graph module (compiled from a string), the graph calling
# the generated code, which allocates.
INDUCTOR_MODULE = """
def call(c10, size):
    return c10.c10sim_malloc(0, size)
"""
FX_MODULE = """
def forward(call, c10, size):
    return call(c10, size)
"""


def compiled(steps=30):
    """A compiled model whose every output the loop keeps: the site is the
    line that called it, not a line of the generated code."""
    inductor, graph = {}, {}
    exec(compile(INDUCTOR_MODULE, "/tmp/torchinductor_x/ab/cabc.py", "exec"), inductor)
    exec(compile(FX_MODULE, "<eval_with_key>.3", "exec"), graph)
    kept = []
    for _ in range(steps):
        kept.append(graph["forward"](inductor["call"], c10, MiB))  # LEAK-compiled
        step_pause()
    return kept


SCENARIOS = {f.__name__: f for f in (training_mix, leak_beside_temporaries,
                                      leak_beside_temporaries_unmarked, short_leak,
                                      small_beside_big, steady_serving,
                                      temporaries_at_samples, remade_larger, kept_then_freed,
                                      held_at_end, never_freed,
                                      cache_idle, fragmentation_oom, fragmented_at_end,
                                      exhaustion_oom, pool_oom, teardown_ctypes, crash_with_tensors,
                                      threads_and_snapshots, watched, frames_reused,
                                      same_file_again,
                                      backward_nodes, backward_depths, threads_come_and_go,
                                      modules_and_leak,
                                      compiled)}
HELD = None


def take_code_watchers():
    """Every code watcher the interpreter has (CPython 3.12 on: eight), as a
    program that watches code objects itself might take them, before the
    tracer's first chance; given back at exit, before the callback goes
    with this module."""
    watcher = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)(lambda event, code: 0)
    ctypes.pythonapi.PyCode_AddWatcher.argtypes = [type(watcher)]
    ctypes.pythonapi.PyCode_ClearWatcher.argtypes = [ctypes.c_int]
    taken = []
    try:
        while True:
            taken.append(ctypes.pythonapi.PyCode_AddWatcher(watcher))
    except RuntimeError:     # none left
        pass

    def give_back(watcher=watcher):     # the callback lives until then
        for i in taken:
            ctypes.pythonapi.PyCode_ClearWatcher(i)

    atexit.register(give_back)


if __name__ == "__main__":
    if os.environ.get("TORCH_BLOCKS_TAKE_CODE_WATCHERS"):
        take_code_watchers()
    c10.c10sim_init(1)
    HELD = SCENARIOS[sys.argv[1]]()
    if len(sys.argv) > 2:   # a snapshot now, and the stand-in's own figures of the same moment
        ctypes.CDLL(None).cumemtrace_snapshot(sys.argv[2].encode())
    print("stats:", json.dumps(stats()), flush=True)
