"""Arrays of the stand-in: `nbytes` bytes of device memory from the allocator."""
from cupy.cuda import memory

float32 = 4     # dtypes are their item sizes here
uint8 = 1


class ndarray:
    def __init__(self, count, dtype=float32, data=None):
        self.nbytes = count * dtype
        self.dtype = dtype
        self.data = data if data is not None else memory.alloc(self.nbytes)

    def view(self):
        """Another array on the same memory, as CuPy's views are."""
        return ndarray(self.nbytes // self.dtype, self.dtype, self.data)

    def __imul__(self, other):
        return self


def empty(count, dtype=float32):
    return ndarray(count, dtype)


ones = empty
arange = empty
