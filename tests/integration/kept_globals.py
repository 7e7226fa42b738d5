"""Buffers kept in a module global to the end of the program, which the
interpreter's teardown frees before the process exits: what merge, diff,
the exports, live and the pytest plugin must read at the program's end
(test_end_state.py), on the simulator.

    kept_globals.py MODE KEEP_MIB [PAUSE_S | crash]

MODE is "ctypes" (each buffer a cudaMalloc owned by a Python object, freed
by its __del__) or "torch" (a tensor of PyTorch's stand-in allocator,
tests/sim/c10, which frees it into its cache). Each of 20 steps makes a
scratch buffer it frees, and keeps KEEP_MIB / 20 MiB more in KEPT on the
line marked KEPT. Weights (8 MiB, line WEIGHTS) are held by every run.
With PAUSE_S, an exit hook that runs after the tracer's (registered before
the first CUDA call: exit hooks run last registered first) empties KEPT,
so the teardown has begun, and sleeps PAUSE_S seconds, for `cumemtrace
live` to look; with "crash", it empties KEPT and crashes (SIGSEGV), for the
crash dump of a program in its teardown.
"""
import atexit
import ctypes
import sys
import time

MiB = 1 << 20
STEPS = 20
KEPT = []
WEIGHTS = []


def pause_after_end(what):
    KEPT.clear()
    if what == "crash":
        ctypes.string_at(0)
    print("ended", flush=True)
    time.sleep(float(what))


def buffers(mode):
    """A buffer class freed when its last reference goes."""
    if mode == "torch":
        c10 = ctypes.CDLL("libc10_cuda.so")
        c10.c10sim_malloc.restype = ctypes.c_void_p
        c10.c10sim_malloc.argtypes = [ctypes.c_int, ctypes.c_size_t]
        c10.c10sim_free.argtypes = [ctypes.c_int, ctypes.c_void_p]
        c10.c10sim_init(1)

        class Tensor:
            def __init__(self, size):
                self.pointer = c10.c10sim_malloc(0, size)
                assert self.pointer

            def __del__(self):
                c10.c10sim_free(0, self.pointer)
        return Tensor
    cudart = ctypes.CDLL("libcudart.so.13")

    class Buffer:
        def __init__(self, size):
            self.pointer = ctypes.c_void_p()
            assert cudart.cudaMalloc(ctypes.byref(self.pointer), ctypes.c_size_t(size)) == 0

        def __del__(self):
            cudart.cudaFree(self.pointer)
    return Buffer


def main():
    mode, keep = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        atexit.register(pause_after_end, sys.argv[3])
    Buffer = buffers(mode)
    WEIGHTS.append(Buffer(8 * MiB))  # WEIGHTS
    for _ in range(STEPS):
        scratch = Buffer(16 * MiB)
        if keep:
            KEPT.append(Buffer(keep * MiB // STEPS))  # KEPT
        del scratch
        time.sleep(0.01)


if __name__ == "__main__":
    main()
