"""A stand-in for a third-party package (transformers): test_user_line
copies it into a virtual environment's site-packages. Its generate() keeps
a cache whose update() asks for the memory, on behalf of its caller."""
import ctypes

_runtime = ctypes.CDLL("libcudart.so.13")


class DynamicLayer:
    def update(self, size):
        pointer = ctypes.c_void_p()
        status = _runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # LIBRARY-LINE
        assert status == 0, status
        return pointer


def generate(size):
    return DynamicLayer().update(size)
