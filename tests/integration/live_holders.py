"""A program to ask who holds its memory with `cumemtrace live --holders`
(test_holders.py, test_live_holders), on torch_model.py's stand-in for
PyTorch, under the tracer on the simulator.

    live_holders.py READY_FILE STOP_FILE

Keeps 40 tensors of 64 Ki floats in the global list `kept` (10 MiB), writes
its pid to READY_FILE, then works (a tensor made and dropped every 10 ms)
until STOP_FILE exists (20 s at most), and prints what it kept ("result:")
and the garbage collector's settings ("gc:"): the same whether it was asked
or not.
"""
import gc
import json
import os
import sys
import time

import torch_model
from torch_model import KiB, Tensor, c10


def keep(kept):
    kept.append(Tensor(64 * KiB))  # HOLD-kept


c10.c10sim_init(1)
kept = []
for _ in range(40):
    keep(kept)
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(f"{os.getpid()}\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
deadline = time.monotonic() + 20
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    scratch = Tensor(KiB)
    del scratch
    time.sleep(0.01)
print("result:", len(kept), sum(t.count for t in kept), flush=True)
print("gc:", json.dumps({"enabled": gc.isenabled(), "threshold": list(gc.get_threshold())}),
      flush=True)
