"""Time a PyTorch training step: the median over windows of steps after a warm-up.

    python3 tests/gpu/torch_step_time.py STEPS [--model small|large|transformer|transformer12]
                                         [--history default|python|none]
                                         [--switch [--pairs N]]

Run it with and without the tracer (same mode) and compare; prints one JSON
line. The step time is the median of 10 windows of STEPS/10 steps, so a pause
in one window (a collection, another process) does not move it.
- small: a 2-layer MLP, batch 256. About 0.2 ms a step on an H100: the CPU
  launching kernels is the limit, so any CPU time the tracer took would show.
- large: a 4-layer MLP, width 8192, batch 8192, bf16 autocast. Several ms a
  step, the GPU the limit: a training job's step.
- transformer: a 6-layer transformer encoder (width 512, 8 heads, sequence
  256, batch 32), AdamW, bf16 autocast: about 600 tensors allocated and freed
  a step, each a trace-tracker event when tensors are traced one by one.
- transformer12: the same encoder with 12 layers: twice the layers' tensors
  a step, each step about twice as long.
`--history` turns on torch.cuda.memory._record_memory_history, the reference
cumemtrace is compared with: `default` (its defaults: C++ and Python stacks
at every event), `python` (context="alloc", stacks="python"), `none`
(context=None: events, no stacks). Used by bench/gpu_cost.py.
`--switch`, traced with the tracker library's bench build
(CUMEMTRACE_TORCH_TRACKER=.../libcumemtrace_torch_bench.so): N pairs (20) of
windows of STEPS steps, the tracker's events dropped in one window of each
pair (torch_tracker_bench_off) and recorded in the other, in alternating
order; prints the median of the pairs' ratios (recorded / dropped), each
window's time, the garbage collections that started in each kind of
window (whether the interpreter's pauses fell on one side), the CPU time
of the tracer's own thread in the recorded windows, and that of all the
program's other threads in each kind of window (whether the step's added
time is CPU those threads spent, or time they waited). One process, so what differs from one process to the next (its
placement, its caches, the machine's other work) falls on both sides. Run
untraced, the same pairs with nothing switched say how alike two windows
are.
"""
import ctypes
import gc
import json
import os
import statistics
import sys
import time

import torch

WINDOWS = 10


def mark(label):
    """A cumemtrace mark when the tracer is preloaded (nothing otherwise): the
    report then tells how many allocations it recorded during the timed steps."""
    function = getattr(ctypes.CDLL(None), "cumemtrace_mark", None)
    if function:
        function.argtypes = [ctypes.c_char_p]
        function(label.encode())


class Encoder(torch.nn.Module):
    def __init__(self, width=512, heads=8, layers=6):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True,
                                                 dropout=0.1)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.head(self.encoder(x))


def build(kind):
    if kind in ("transformer", "transformer12"):
        model = Encoder(layers=12 if kind == "transformer12" else 6).cuda()
        x = torch.randn(32, 256, 512, device="cuda")
        y = torch.randn(32, 256, 512, device="cuda")
        return model, x, y
    if kind == "large":
        width, batch = 8192, 8192
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers[:-1]).cuda()
    else:
        width, batch = 1024, 256
        model = torch.nn.Sequential(torch.nn.Linear(width, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, width)).cuda()
    x = torch.randn(batch, width, device="cuda")
    y = torch.randn(batch, width, device="cuda")
    return model, x, y


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2000
    kind = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "small"
    if "--history" in sys.argv:    # the field's reference: PyTorch's own recorder
        how = sys.argv[sys.argv.index("--history") + 1]
        options = {"default": {}, "python": {"context": "alloc", "stacks": "python"},
                   "none": {"context": None}}[how]
        torch.cuda.memory._record_memory_history(max_entries=100000, **options)
    torch.manual_seed(0)
    model, x, y = build(kind)
    adam = torch.optim.AdamW if kind.startswith("transformer") else torch.optim.Adam
    optimizer = adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=kind != "small"):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(200 if kind == "small" else 20):
        step()
    torch.cuda.synchronize()
    if "--switch" in sys.argv:
        pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 20
        return switched(step, steps, pairs)
    per_window = max(1, steps // WINDOWS)
    windows = []
    mark("timed steps: start")
    for _ in range(WINDOWS):
        started = time.perf_counter()
        for _ in range(per_window):
            loss = step()
        torch.cuda.synchronize()
        windows.append((time.perf_counter() - started) / per_window * 1000)
    mark("timed steps: end")
    print(json.dumps({"step_ms": round(statistics.median(windows), 4),
                      "windows_ms": [round(w, 4) for w in windows],
                      "loss": round(float(loss.detach()), 6)}), flush=True)


def thread_cpu_ns(name, others=False, field=0):
    """CPU time so far of this process's threads called `name` (schedstat);
    with `others`, of all its threads but those. Field 1: the time they
    waited for a CPU instead (on a run queue)."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm:
                if (comm.read().strip() == name) == others:
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                total += int(stat.read().split()[field])
        except (OSError, ValueError, IndexError):
            pass
    return total


def switched(step, steps, pairs):
    """--switch: windows of `steps` steps, recorded and dropped in turn."""
    library = os.environ.get("CUMEMTRACE_TORCH_TRACKER", "")
    off = None
    if "LD_PRELOAD" in os.environ and library.endswith("_bench.so"):
        off = ctypes.c_int.in_dll(ctypes.CDLL(library), "torch_tracker_bench_off")
    thread_ns = 0
    program_ns = {True: 0, False: 0}
    waited_ns = {True: 0, False: 0}
    collections = {True: [0, 0, 0], False: [0, 0, 0]}
    running = [None]          # the kind of window running: True, False, None between

    def collecting(phase, info):
        if phase == "start" and running[0] is not None:
            collections[running[0]][info["generation"]] += 1

    def window(recorded):
        nonlocal thread_ns
        if off is not None:
            off.value = 0 if recorded else 1
        if recorded:
            mark("switch on: start")
            before = thread_cpu_ns("cumemtrace-rec")
        program = thread_cpu_ns("cumemtrace-rec", others=True)
        queued = thread_cpu_ns("cumemtrace-rec", others=True, field=1)
        running[0] = recorded
        started = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        took = (time.perf_counter() - started) / steps * 1000
        running[0] = None
        program_ns[recorded] += thread_cpu_ns("cumemtrace-rec", others=True) - program
        waited_ns[recorded] += thread_cpu_ns("cumemtrace-rec", others=True, field=1) - queued
        if recorded:
            thread_ns += thread_cpu_ns("cumemtrace-rec") - before
            mark("switch on: end")
        return took

    gc.callbacks.append(collecting)
    on, dropped = [], []
    for number in range(pairs):
        if number % 2 == 0:
            on.append(window(True))
            dropped.append(window(False))
        else:
            dropped.append(window(False))
            on.append(window(True))
    gc.callbacks.remove(collecting)
    if off is not None:
        off.value = 0
    print(json.dumps({"ratio": round(statistics.median(a / b for a, b in zip(on, dropped)), 4),
                      "on_ms": [round(w, 4) for w in on],
                      "off_ms": [round(w, 4) for w in dropped],
                      "collections": {"on": collections[True], "off": collections[False]},
                      "switched": off is not None,
                      "tracer_thread_us_per_step": round(thread_ns / 1000 / (pairs * steps), 2),
                      "program_threads_us_per_step": {
                          "on": round(program_ns[True] / 1000 / (pairs * steps), 1),
                          "off": round(program_ns[False] / 1000 / (pairs * steps), 1)},
                      "program_threads_waited_us_per_step": {
                          "on": round(waited_ns[True] / 1000 / (pairs * steps), 1),
                          "off": round(waited_ns[False] / 1000 / (pairs * steps), 1)}}),
          flush=True)


if __name__ == "__main__":
    main()
