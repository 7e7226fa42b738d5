from cupy.cuda import runtime, memory
from cupy.cuda.memory import (MemoryPool, MemoryPointer, OutOfMemoryError, alloc,  # noqa: F401
                              get_allocator, set_allocator, using_allocator)


class Device:
    def __init__(self, device=None):
        self.id = runtime.getDevice() if device is None else device

    def __enter__(self):
        self._previous = runtime.getDevice()
        runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc):
        runtime.setDevice(self._previous)

    def synchronize(self):
        pass
