"""Who holds the tensors: objects of every kind the retention walk must
name, on torch_model.py's stand-in for PyTorch (tests/sim/c10), under the
tracer on the simulator.

    torch_holders.py SCENARIO

Each line that allocates a held group is marked `# HOLD-<name>`; the
program prints what it holds ("held: {name: [tensors, bytes]}") and the
garbage collector's state around its snapshot and at its end ("gc:"),
which test_holders.py compares with the reports. SIMTORCH_HOLDERS_HEAP=N
adds N small objects to the heap the walk must cross.
"""
import atexit
import ctypes
import gc
import json
import os
import sys
import threading
import time

import torch_model
from torch_model import KiB, Model, Tensor, c10, mul


class View(Tensor):
    """A second tensor on another's storage, as x[::2] or x.view(...)."""

    def __init__(self, base):
        self.count = base.count
        self.pointer = base.pointer
        self.base = base

    def __del__(self):
        pass


class KeepOutputs:
    """A callback keeping every step's outputs in a class attribute."""
    outputs = []


class Peer:
    __slots__ = ("peer", "tensor", "__dict__")


def make_store():
    kept = []

    def store(t):
        kept.append(t)
    return store


def worker(ready, stop):
    mine = [Tensor(16 * KiB) for _ in range(3)]  # HOLD-thread
    ready.set()
    stop.wait()
    return mine


def gc_state():
    return {"enabled": gc.isenabled(), "threshold": list(gc.get_threshold()),
            "collections": [g["collections"] for g in gc.get_stats()],
            "older": list(gc.get_count())[1:]}


def everything():
    """Every kind of holder, growing for 30 steps; a snapshot, then the end."""
    global model, cache, a, b, views, store, sessions
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker, args=(ready, stop), name="loader", daemon=True)
    thread.start()
    ready.wait()
    model = Model(width=32, depth=1)
    model.outs = []
    cache = {"layers": [(Tensor(8 * KiB), Tensor(8 * KiB)) for _ in range(4)]}  # HOLD-nested
    sessions = {f"session-{i}": Tensor(2 * KiB) for i in range(12)}  # HOLD-table
    record["\x1b[2J\n"] = Tensor(KiB)  # HOLD-escape
    base = Tensor(32 * KiB)  # HOLD-views
    views = [View(base) for _ in range(3)]
    del base
    a, b = Peer(), Peer()
    a.peer, b.peer = b, a
    b.tensor = Tensor(24 * KiB)  # HOLD-cycle
    store = make_store()
    hidden = Tensor(40 * KiB)  # HOLD-from_c
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(hidden))
    del hidden
    local = [Tensor(12 * KiB) for _ in range(2)]  # HOLD-local
    for _ in range(30):
        model.outs.append(Tensor(64 * KiB))  # HOLD-outs
        KeepOutputs.outputs.append({"preds": Tensor(20 * KiB), "loss": 0.5})  # HOLD-class
        store(Tensor(4 * KiB))  # HOLD-closure
        time.sleep(0.005)
    size = lambda n: n * 4
    print("held:", json.dumps({
        "outs": [30, 30 * size(64 * KiB)], "class": [30, 30 * size(20 * KiB)],
        "closure": [30, 30 * size(4 * KiB)], "nested": [8, 8 * size(8 * KiB)],
        "views": [4, size(32 * KiB)], "cycle": [1, size(24 * KiB)],
        "from_c": [1, size(40 * KiB)], "local": [2, 2 * size(12 * KiB)],
        "thread": [3, 3 * size(16 * KiB)],
        "table": [12, 12 * size(2 * KiB)], "escape": [1, size(KiB)]}), flush=True)
    before = gc_state()
    process = ctypes.CDLL(None)
    if hasattr(process, "cumemtrace_snapshot"):     # untraced: no snapshot
        process.cumemtrace_snapshot(b"holders")
    print("gc:", json.dumps({"before": before, "after": gc_state()}), flush=True)
    atexit.register(lambda: print("gc at exit:", json.dumps(gc_state()), flush=True))
    print("result:", sum(t.count for t in model.outs), len(KeepOutputs.outputs), len(local),
          flush=True)
    return local, stop


class Unpack:
    """A saved-tensor hook's unpack function, as torch.utils.checkpoint's
    (which runs the forward pass again) or save_on_cpu's (which copies back
    to the device): it allocates, and counts its calls."""
    calls = 0

    @property
    def __isabstractmethod__(self):
        Unpack.calls += 1
        UNPACKED.append(Tensor(8 * KiB))
        return False


class HookedBackward(staticmethod):
    """A node whose saved tensor is behind an unpack hook: PyTorch's C getter
    calls the hook. Modelled by a C getter that calls Python code:
    staticmethod's __isabstractmethod__ reads its callable's attribute of
    that name, here Unpack's property."""
    _saved_self = staticmethod.__dict__["__isabstractmethod__"]


def graphs():
    """Losses kept with their graphs: each loss holds, through its
    grad_fn's saved tensors and next_functions, the activations nothing
    else holds. A graph's saved tensor behind an unpack hook is never read."""
    global model, losses
    model = Model(width=32, depth=1)
    weight = model.embedding.weight
    losses = []
    for _ in range(30):
        act = Tensor(48 * KiB)  # HOLD-graph_act
        hidden = mul(act, weight)  # HOLD-graph_hidden
        losses.append(mul(hidden, hidden))  # HOLD-losses
        del act, hidden
        time.sleep(0.005)
    hooked = Tensor(KiB)
    hooked.grad_fn = HookedBackward(Unpack())
    losses.append(hooked)
    size = lambda n: n * 4
    print("held:", json.dumps({
        "graph_act": [30, 30 * size(48 * KiB)],
        "graph_hidden": [30, 30 * size(48 * KiB)],
        "losses": [30, 30 * size(48 * KiB)]}), flush=True)
    process = ctypes.CDLL(None)
    if hasattr(process, "cumemtrace_snapshot"):     # untraced: no snapshot
        process.cumemtrace_snapshot(b"holders")
    atexit.register(lambda: print("unpacked:", Unpack.calls, flush=True))
    print("result:", len(losses), Unpack.calls, flush=True)


SCENARIOS = {f.__name__: f for f in (everything, graphs)}
UNPACKED = []
KEPT = None
record = {}
HEAP = [[i] for i in range(int(os.environ.get("SIMTORCH_HOLDERS_HEAP", "0")))]

if __name__ == "__main__":
    c10.c10sim_init(1)
    KEPT = SCENARIOS[sys.argv[1]]()
