"""PyTorch's own counters next to ours, with a stand-in for torch.

The tracer reads torch.cuda.memory_stats() through the program's main thread
(Py_AddPendingCall) and once more from an atexit hook. This script puts a
module named torch in sys.modules whose memory_stats() returns figures the
test knows, changes them as it goes, and keeps running Python code so the
main thread reaches safe points. Device 1's memory_stats() raises: that
device's figures must come out null and the program must never see the error.
test_python.py checks the signal snapshot and the exit report.
"""
import ctypes
import os
import signal
import sys
import time
import types

MIB = 1 << 20
state = {"allocated": 16 * MIB, "calls": 0}


class FakeCuda:
    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 2

    @staticmethod
    def memory_stats(device):
        state["calls"] += 1
        if device == 1:
            raise RuntimeError("device 1 has no allocator")
        a = state["allocated"]
        return {"allocated_bytes.all.current": a, "allocated_bytes.all.peak": 2 * a,
                "reserved_bytes.all.current": 4 * a, "reserved_bytes.all.peak": 4 * a,
                "active_bytes.all.current": a, "inactive_split_bytes.all.current": a, "inactive_split.all.current": 20,
                "num_alloc_retries": 3, "num_ooms": 1}


def busy(seconds):
    """Run bytecodes (not a sleep) so pending calls run promptly."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


torch = types.ModuleType("torch")
torch.cuda = FakeCuda
sys.modules["torch"] = torch

runtime = ctypes.CDLL("libcudart.so.13")
pointer = ctypes.c_void_p()
assert runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(MIB)) == 0
busy(0.3)                     # periodic readings (CUMEMTRACE_SAMPLE_MS=50)
state["allocated"] = 64 * MIB
os.kill(os.getpid(), signal.SIGUSR2)
busy(1.0)                     # the snapshot asks for a fresh reading and writes
state["allocated"] = 256 * MIB
try:
    raise ValueError("the program's own exception")
except ValueError as error:
    caught = str(error)
print("torch counters: done", caught, state["calls"] > 0)
