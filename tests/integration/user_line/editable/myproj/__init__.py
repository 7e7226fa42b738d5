"""The user's own package, installed editable (pip install -e): its files
stay in the user's checkout, a .pth file in site-packages puts the folder
on the path (test_user_line writes it)."""
import ctypes

_runtime = ctypes.CDLL("libcudart.so.13")


def make(size):
    pointer = ctypes.c_void_p()
    status = _runtime.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # EDITABLE-LINE
    assert status == 0, status
    return pointer
