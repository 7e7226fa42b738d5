"""A stand-in for CuPy, for cumemtrace's tests on the CUDA simulator.

It has what cumemtrace relies on, laid out as in CuPy 14: the default
memory pool set as the process-wide allocator when `cupy` is imported
(cupy.cuda.set_allocator / get_allocator / using_allocator), blocks carved
out of chunks taken with cudaMalloc, handed out as MemoryPointer objects
(.ptr, .device_id, .mem) whose PooledMemory has a __dict__ and goes back to
the pool when its last user goes, a Memory of size 0 without one, and
OutOfMemoryError (a MemoryError) once the pool gives up. Arrays are bytes
on the device, nothing more.
"""
from cupy import cuda
from cupy._core import ndarray, empty, ones, arange, float32, uint8

_default_memory_pool = cuda.MemoryPool()
cuda.set_allocator(_default_memory_pool.malloc)


def get_default_memory_pool():
    return _default_memory_pool
