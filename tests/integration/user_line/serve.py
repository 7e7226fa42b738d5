"""The line a user can act on (src/report/frames.h), on the simulator: run
by test_python.py's test_user_line with a virtual environment's Python.

An installed package (stand_in_lib, in the environment's site-packages)
allocates on behalf of the SERVE line; the user's own package, installed
editable (myproj, outside site-packages), on its EDITABLE-LINE; and one
helper class, Buf, allocates for two callers (HOARD, SCRATCH). With the
argument library-path, instead of those three: the installed package,
through PyTorch's Module call (the stand-in torch package beside it),
allocates on two lines of its own for the CACHE line, and the standard
library (contextlib) on behalf of the STDLIB line. All of it grows over the
run and is kept to its end.
"""
import contextlib
import ctypes
import sys
import time

import myproj
import stand_in_lib

runtime = ctypes.CDLL("libcudart.so.13")
MiB = 1 << 20


class Buf:
    def __init__(self, size):
        self.pointer = ctypes.c_void_p()
        status = runtime.cudaMalloc(ctypes.byref(self.pointer), ctypes.c_size_t(size))  # BUF-LINE
        assert status == 0, status


def hoard_buffers(kept):
    kept.append(Buf(1 * MiB))  # HOARD-LINE


def keep_scratch(kept):
    kept.append(Buf(2 * MiB))  # SCRATCH-LINE


def serve(kept):
    kept.append(stand_in_lib.generate(3 * MiB))  # SERVE-LINE


def serve_cached(kept):
    kept.append(stand_in_lib.generate_cached(4 * MiB))  # CACHE-LINE


def allocate_on_exit(kept):
    pointer = ctypes.c_void_p()
    kept.append(pointer)
    with contextlib.ExitStack() as stack:  # STDLIB-LINE
        stack.callback(runtime.cudaMalloc, ctypes.byref(pointer), ctypes.c_size_t(7 * MiB))


def main():
    kept = [myproj.make(5 * MiB)]
    steps = ((serve_cached, allocate_on_exit) if sys.argv[1:] == ["library-path"] else
             (hoard_buffers, keep_scratch, serve))
    for _ in range(12):
        for step in steps:
            step(kept)
        time.sleep(0.03)
    print("user line: done", flush=True)


main()
