"""The CUDA runtime calls the stand-in needs, on the simulator's libcudart.
Through ctypes.CDLL, which lets go of the GIL around each call, as CuPy's
Cython does around cudaMalloc."""
import ctypes

_cudart = ctypes.CDLL("libcudart.so.13")
errorMemoryAllocation = 2


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        super().__init__(f"CUDA runtime error {status}")
        self.status = status


def _check(status):
    if status != 0:
        raise CUDARuntimeError(status)


def malloc(size):
    pointer = ctypes.c_void_p()
    _check(_cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)))
    return pointer.value


def free(pointer):
    _check(_cudart.cudaFree(ctypes.c_void_p(pointer)))


def getDevice():
    device = ctypes.c_int()
    _check(_cudart.cudaGetDevice(ctypes.byref(device)))
    return device.value


def setDevice(device):
    _check(_cudart.cudaSetDevice(device))
