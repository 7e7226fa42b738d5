"""A process to watch with `cumemtrace live` (test_command.py, test_live_view), on the
simulator through ctypes.

    live_target.py READY_FILE [fork]

Holds 32 MiB of weights from load_weights() and keeps 1 MiB more every
50 ms from remember(), 60 times; writes "PID" (and, with fork, "PID CHILD")
to READY_FILE once the weights are held; prints what it kept at the end, the
same whether it was watched or not. With fork, a child keeps 2 MiB every
50 ms from child_work(), 40 times, then waits for READY_FILE.stop (30 s
at most: a watcher slowed by a loaded machine still finds it) and exits
first.
"""
import ctypes
import os
import sys
import time

cuda = ctypes.CDLL("libcudart.so.13")


def allocate(size):
    pointer = ctypes.c_void_p()
    status = cuda.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))
    assert status == 0, status
    return pointer


def load_weights():
    return allocate(32 << 20)  # WEIGHTS-LINE


def remember(kept):
    kept.append(allocate(1 << 20))  # REMEMBER-LINE


def child_work(kept):
    kept.append(allocate(2 << 20))  # CHILD-LINE


weights = load_weights()
child = 0
if len(sys.argv) > 2 and sys.argv[2] == "fork":
    child = os.fork()
    if child == 0:
        mine = []
        for _ in range(40):
            child_work(mine)
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while not os.path.exists(sys.argv[1] + ".stop") and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(0)
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(f"{os.getpid()} {child}\n" if child else f"{os.getpid()}\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
kept = []
for _ in range(60):
    remember(kept)
    time.sleep(0.05)
if child:
    os.waitpid(child, 0)
print(f"live target: kept {len(kept)} blocks and the weights")
