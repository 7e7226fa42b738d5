"""Python frames in allocation stacks: run under the tracer on the simulator.

ctypes.PyDLL keeps the GIL held during the call, as PyTorch does while it
allocates; ctypes.CDLL releases it, and then only native frames are known.
"""
import ctypes

runtime = ctypes.PyDLL("libcudart.so.13")


def allocate(size):
    pointer = ctypes.c_void_p()
    status = runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # ALLOCATE-LINE
    assert status == 0, status
    return pointer


def leak_in_python():
    kept = []
    for _ in range(3):
        kept.append(allocate(1 << 20))
    return kept


kept = leak_in_python()
released = ctypes.CDLL("libcudart.so.13")
other = ctypes.c_void_p()
assert released.cudaMalloc(ctypes.byref(other), ctypes.c_size_t(5 << 20)) == 0
print("python frames: done")
