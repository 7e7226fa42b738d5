"""Fork while another thread allocates from Python: run under the tracer on
the simulator.

A thread keeps making cudaMalloc+cudaFree pairs through ctypes.CDLL (the GIL
let go, as PyTorch does), so a fork often lands while the tracer walks its
Python frames. Each child then allocates once from Python and exits; it must
not hang on a lock the parent's thread held, and its report must name the
child's own Python line. test_python.py checks the children's reports.
"""
import ctypes
import os
import signal
import sys
import threading

runtime = ctypes.CDLL("libcudart.so.13")
stop = threading.Event()


def churn():
    pointer = ctypes.c_void_p()
    while not stop.is_set():
        runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(4096))
        runtime.cudaFree(pointer)


def in_child():
    pointer = ctypes.c_void_p()
    return runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(3 << 20))  # CHILD-LINE


children = int(sys.argv[1])
# The first call loads the driver (dlopen). A fork during another thread's
# dlopen hangs the child in glibc, traced or not: load it before forking.
in_child()
thread = threading.Thread(target=churn)
thread.start()
pids = []
for _ in range(children):
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)       # a hung child dies, and fails the test, in 30 s
        status = in_child()
        sys.exit(status)       # a normal exit: the child's report is written
    pids.append(pid)
stop.set()
thread.join()
failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
print(f"python fork: {len(pids) - len(failed)} of {len(pids)} children exited cleanly")
