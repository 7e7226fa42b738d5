"""A training program with a model, its gradients and optimizer state, on
PyTorch's allocator played by the stand-in libc10_cuda.so (tests/sim/c10),
under the tracer on the simulator.

    torch_model.py SCENARIO

A minimal `torch` module goes into sys.modules, with the parts the tracer
reads: torch.cuda.memory_stats() from the stand-in's own figures,
torch.nn.Module with named_parameters() and children(), torch.Tensor with
data_ptr(), numel(), element_size(), is_cuda and grad_fn, Parameter with
.grad, torch.optim.Optimizer with param_groups and state, and autograd's
graph (mul() records one: nodes with next_functions and saved tensors). Each scenario prints what
those objects hold ("held: {...}") and the stand-in's figures ("stats:"),
which test_torch_model.py compares with the reports; `untouched` also prints
the interpreter's state before and after, and which attributes of a
deprecated object (every read warns, as torch.distributed.reduce_op's) were
read ("state:"). Markers as in torch_blocks.py:
  LEAK-<scenario>  kept every step: growing, the rest's largest site
  OOM-<scenario>   the request that fails
"""
import atexit
import ctypes
import gc
import json
import sys
import time
import types
import warnings

c10 = ctypes.CDLL("libc10_cuda.so")
c10.c10sim_malloc.restype = ctypes.c_void_p
c10.c10sim_malloc.argtypes = [ctypes.c_int, ctypes.c_size_t]
c10.c10sim_free.argtypes = [ctypes.c_int, ctypes.c_void_p]
KiB, MiB = 1 << 10, 1 << 20


def stats(device=0):
    figures = (ctypes.c_uint64 * 5)()
    c10.c10sim_stats(device, figures)
    return dict(zip(("allocated", "requested", "reserved", "inactive_split",
                     "inactive_split_blocks"), figures))


class Tensor:
    """float32 on the stand-in's device 0; freed when the last reference goes.
    grad_fn is a slot: a getter of the type's own, as PyTorch's C one."""
    __slots__ = ("grad_fn", "__dict__")
    is_cuda = True
    requires_grad = False

    def __init__(self, count):
        self.grad_fn = None
        self.count = count
        self.pointer = c10.c10sim_malloc(0, 4 * count)
        if not self.pointer:
            raise MemoryError(f"out of memory asking for {4 * count} bytes")

    def data_ptr(self):
        return self.pointer

    def numel(self):
        return self.count

    def element_size(self):
        return 4

    def __del__(self):
        if getattr(self, "pointer", None):
            c10.c10sim_free(0, self.pointer)


class Parameter(Tensor):
    grad = None
    requires_grad = True


class Node:
    """A function of autograd's graph, as PyTorch's C++ nodes are: the
    functions of its inputs in next_functions ((node, index) pairs), the
    tensors it saved for the backward pass in _saved_* attributes, all read
    through the type's own descriptors (slots here, C getters there)."""
    __slots__ = ("next_functions",)


class AccumulateGrad(Node):
    """A leaf's node: its tensor in .variable."""
    __slots__ = ("variable",)


class MulBackward0(Node):
    __slots__ = ("_saved_self", "_saved_other")


def edge(t):
    """The (node, index) by which a graph reaches its input `t`."""
    if getattr(t, "grad_fn", None) is not None:
        return (t.grad_fn, 0)
    if t.requires_grad:
        leaf = AccumulateGrad()
        leaf.variable = t
        return (leaf, 0)
    return (None, 0)


def mul(a, b):
    """a * b; its graph when an operand requires a gradient: the product's
    grad_fn saves both operands."""
    out = Tensor(a.count)
    if a.requires_grad or b.requires_grad:
        node = MulBackward0()
        node.next_functions = (edge(a), edge(b))
        node._saved_self, node._saved_other = a, b
        out.requires_grad, out.grad_fn = True, node
    return out


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})

    def __setattr__(self, name, value):
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix=""):
        for name, p in self._parameters.items():
            yield prefix + name, p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        return (p for _, p in self.named_parameters())


class ModuleList(Module):
    def __init__(self, modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __getitem__(self, i):
        return self._modules[str(i)]


class Linear(Module):
    def __init__(self, inputs, outputs):
        super().__init__()
        self.weight = Parameter(inputs * outputs)
        self.bias = Parameter(outputs)


class Layer(Module):
    def __init__(self, width):
        super().__init__()
        self.linear1 = Linear(width, 4 * width)
        self.linear2 = Linear(4 * width, width)


class Encoder(Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = ModuleList([Layer(width) for _ in range(depth)])


class Model(Module):
    def __init__(self, width=128, depth=4):
        super().__init__()
        self.embedding = Linear(256, width)
        self.encoder = Encoder(width, depth)


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}


class Adam(Optimizer):
    def step(self):
        for p in self.param_groups[0]["params"]:
            if p.grad is not None and p not in self.state:
                self.state[p] = {"step": 1, "exp_avg": Tensor(p.count),
                                 "exp_avg_sq": Tensor(p.count)}


class Cuda:
    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def memory_stats(device):
        s = stats(device)
        return {"allocated_bytes.all.current": s["allocated"],
                "requested_bytes.all.current": s["requested"],
                "reserved_bytes.all.current": s["reserved"],
                "inactive_split_bytes.all.current": s["inactive_split"],
                "inactive_split.all.current": s["inactive_split_blocks"]}


torch = types.ModuleType("torch")
torch.Tensor = Tensor
torch.cuda = Cuda
torch.nn = types.SimpleNamespace(Module=Module, Parameter=Parameter)
torch.optim = types.SimpleNamespace(Optimizer=Optimizer, Adam=Adam)
sys.modules["torch"] = torch


def held(model, optimizer):
    """What the program's own objects hold, as PyTorch users would add it up."""
    params = list(model.parameters())
    return {"parameters": sum(p.numel() * p.element_size() for p in params),
            "gradients": sum(p.grad.numel() * p.grad.element_size()
                             for p in params if p.grad is not None),
            "optimizer_state": sum(v.numel() * v.element_size() for s in optimizer.state.values()
                                   for v in s.values() if isinstance(v, Tensor)),
            "largest": max(model.named_parameters(), key=lambda np: np[1].count)[0]}


def train(model, optimizer, steps, kept):
    for _ in range(steps):
        activation = Tensor(256 * KiB)
        kept.append(Tensor(64 * KiB))  # LEAK-training
        for p in model.parameters():
            if p.grad is None:
                p.grad = Tensor(p.count)
        optimizer.step()
        del activation
        time.sleep(0.005)


def training():
    """A model, its gradients and Adam's state; one line keeps a tensor per
    step. A snapshot in the middle, then the end."""
    global kept
    model = Model()
    optimizer = Adam(model.parameters())
    kept = []
    train(model, optimizer, 30, kept)
    print("held:", json.dumps(held(model, optimizer)), flush=True)
    process = ctypes.CDLL(None)
    if hasattr(process, "cumemtrace_snapshot"):     # untraced: no snapshot
        process.cumemtrace_snapshot(b"mid")
    train(model, optimizer, 10, kept)
    return model, optimizer


def exhaustion_oom():
    """Activations kept until the device is full."""
    model = Model()
    optimizer = Adam(model.parameters())
    train(model, optimizer, 2, [])
    print("held:", json.dumps(held(model, optimizer)), flush=True)
    kept = []
    try:
        while True:
            kept.append(Tensor(16 * MiB))  # OOM-exhaustion_oom
    except MemoryError:
        print("exhaustion_oom: out of memory", flush=True)
    return model, optimizer, kept


def fragmentation_oom():
    """Two of every three 6 MiB activations freed, then 40 MiB: free bytes
    in the cache, in holes none of which fits."""
    model = Model()
    optimizer = Adam(model.parameters())
    train(model, optimizer, 2, [])
    print("held:", json.dumps(held(model, optimizer)), flush=True)
    every = []
    try:
        while True:
            every.append(Tensor(6 * MiB // 4))
    except MemoryError:
        pass
    kept = every[::3]
    del every
    try:
        Tensor(40 * MiB // 4)  # OOM-fragmentation_oom
    except MemoryError:
        print("fragmentation_oom: out of memory", flush=True)
    return model, optimizer, kept


TOUCHED = []


class DeprecatedOp:
    """As torch.distributed.reduce_op: every attribute read warns."""

    def __getattribute__(self, name):
        TOUCHED.append(name)
        warnings.warn("torch.distributed.reduce_op is deprecated", FutureWarning)
        return object.__getattribute__(self, name)


def interpreter_state():
    return {"filters": len(warnings.filters), "gc": [gc.isenabled(), *gc.get_threshold()],
            "modules": sorted(sys.modules)}


def untouched():
    """training beside a deprecated object that only the program knows of:
    the reports read the model and leave the rest as it was."""
    torch.distributed = types.SimpleNamespace(reduce_op=DeprecatedOp())
    before = interpreter_state()
    atexit.register(lambda: print("touched at exit:", TOUCHED, flush=True))
    result = training()
    print("state:", json.dumps({"before": before, "after": interpreter_state(),
                                "touched": TOUCHED}), flush=True)
    return result


def no_modules():
    """Tensors, but no module or optimizer: the split cannot be known."""
    return [Tensor(MiB) for _ in range(3)]


SCENARIOS = {f.__name__: f for f in (training, exhaustion_oom, fragmentation_oom, no_modules,
                                      untouched)}
HELD = None

if __name__ == "__main__":
    c10.c10sim_init(1)
    HELD = SCENARIOS[sys.argv[1]]()
    print("stats:", json.dumps(stats()), flush=True)
