"""Python frames in allocation stacks: run under the tracer on the simulator.

ctypes.PyDLL keeps the GIL held during the call; ctypes.CDLL releases it, as
PyTorch, CuPy and JAX do before they allocate. Python frames must be found
either way, in the main thread, in other threads, in generators, and with
names that are not ASCII, from two lines of one function; and an allocation made by a thread that runs no
Python while the main thread waits for it (given the directory of
libnative_thread.so as argument), which gets the main thread's frames.
test_python.py checks the report against the lines marked below.
"""
import ctypes
import os
import sys
import threading

with_gil = ctypes.PyDLL("libcudart.so.13")
without_gil = ctypes.CDLL("libcudart.so.13")


def allocate(runtime, size):
    pointer = ctypes.c_void_p()
    status = runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # ALLOCATE-LINE
    assert status == 0, status
    return pointer


def leak_in_python():
    kept = []
    for _ in range(3):
        kept.append(allocate(with_gil, 1 << 20))
    return kept


def released():
    return allocate(without_gil, 5 << 20)


def in_thread(kept):
    kept.append(allocate(without_gil, 7 << 20))


def produce():
    for _ in range(2):
        yield allocate(without_gil, 11 << 20)


def größe():
    return allocate(without_gil, 13 << 20)


def two_lines():
    """One function allocating from two lines in turn: each block names its
    own line, also once the tracer has seen both."""
    blocks = []
    for _ in range(3):
        blocks.append(allocate(without_gil, 29 << 20))  # FIRST-OF-TWO
        blocks.append(allocate(without_gil, 31 << 20))  # SECOND-OF-TWO
    return blocks


def waits_for_native_thread():
    native = ctypes.CDLL(os.path.join(os.path.dirname(sys.argv[0]) or ".", "libnative_thread.so"))
    native.allocate_in_native_thread.restype = ctypes.c_void_p
    native.allocate_in_engine_thread.restype = ctypes.c_void_p
    return [native.allocate_in_native_thread(ctypes.c_size_t(17 << 20)),  # NATIVE-THREAD-LINE
            native.allocate_in_engine_thread(ctypes.c_size_t(19 << 20))]


kept = leak_in_python()
kept.append(released())
thread = threading.Thread(target=in_thread, args=(kept,))
thread.start()
thread.join()
kept.extend(produce())
kept.append(größe())
kept.extend(two_lines())
if len(sys.argv) > 1:
    sys.argv[0] = sys.argv[1]   # where libnative_thread.so is
    kept.extend(waits_for_native_thread())
print("python frames: done")
