"""A stand-in for a third-party package (transformers): test_user_line
copies it into a virtual environment's site-packages. Its generate() keeps
a cache whose update() asks for the memory, on behalf of its caller; its
generate_cached() runs a model under PyTorch's Module call (the stand-in
torch package beside it), whose layer asks for its keys and its values on
two lines, as transformers' DynamicLayer.update does."""
import ctypes

from torch.nn.modules.module import Module

_runtime = ctypes.CDLL("libcudart.so.13")


class DynamicLayer:
    def update(self, size):
        pointer = ctypes.c_void_p()
        status = _runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # LIBRARY-LINE
        assert status == 0, status
        return pointer

    def update_kv(self, size):
        keys, values = ctypes.c_void_p(), ctypes.c_void_p()
        assert _runtime.cudaMalloc(ctypes.byref(keys), ctypes.c_size_t(size)) == 0  # KEYS-LINE
        assert _runtime.cudaMalloc(ctypes.byref(values), ctypes.c_size_t(2 * size)) == 0  # VALUES-LINE
        return keys, values


class Attention(Module):
    def __init__(self):
        self.layer = DynamicLayer()

    def forward(self, size):
        return self.layer.update_kv(size)


def generate(size):
    return DynamicLayer().update(size)


def generate_cached(size):
    return Attention()(size)
