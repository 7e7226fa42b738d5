"""CuPy's memory pool, as the stand-in has it (cupy/cuda/memory.pyx in CuPy).

A request is rounded up to 512 bytes. The pool keeps free chunks by size and
hands out the smallest that fits, split if larger (best fit); a miss takes a
chunk of exactly the rounded size from the runtime (cudaMalloc). A freed
block goes back to the pool and merges with free neighbours of the same
chunk. When cudaMalloc fails, every wholly free chunk is released, the
garbage collector run, and cudaMalloc asked once more before
OutOfMemoryError is raised.
"""
import bisect
import contextlib
import gc
import threading
import weakref

from cupy.cuda import runtime

ALLOCATION_UNIT = 512


class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes "
                         f"(allocated so far: {total:,} bytes).")


class Memory:
    """Memory of its own from cudaMalloc: no __dict__, as in CuPy."""
    __slots__ = ("ptr", "size", "device_id")

    def __init__(self, size):
        self.size = size
        self.device_id = runtime.getDevice()
        self.ptr = runtime.malloc(size) if size > 0 else 0

    def __del__(self):
        if self.ptr:
            runtime.free(self.ptr)
            self.ptr = 0


class _Chunk:
    __slots__ = ("mem", "offset", "size", "prev", "next", "in_use")

    def __init__(self, mem, offset, size):
        self.mem, self.offset, self.size = mem, offset, size
        self.prev = self.next = None
        self.in_use = False

    @property
    def ptr(self):
        return self.mem.ptr + self.offset


class PooledMemory:
    """A block of the pool. Has a __dict__ (CuPy's declares one). Goes back
    to the pool when the last reference goes; its __dict__ is cleared after
    that, as Cython's tp_dealloc does after __dealloc__."""

    def __init__(self, chunk, pool):
        self.ptr = chunk.ptr
        self.size = chunk.size
        self.device_id = chunk.mem.device_id
        self._chunk = chunk
        self._pool = weakref.ref(pool)

    def free(self):
        pool = self._pool()
        if self.ptr and pool is not None:
            pool._free(self._chunk)
        self.ptr = 0

    def __del__(self):
        self.free()


class MemoryPointer:
    __slots__ = ("mem", "ptr", "device_id")

    def __init__(self, mem, offset):
        self.mem = mem
        self.ptr = mem.ptr + offset
        self.device_id = mem.device_id


class SingleDeviceMemoryPool:
    def __init__(self):
        self._free_chunks = []          # sorted (size, id, chunk)
        self._chunks = 0
        self._total = 0
        self._in_use = 0
        self._lock = threading.RLock()

    def malloc(self, size):
        if size == 0:
            return MemoryPointer(Memory(0), 0)
        rounded = (size + ALLOCATION_UNIT - 1) // ALLOCATION_UNIT * ALLOCATION_UNIT
        with self._lock:
            chunk = self._take_free(rounded)
            if chunk is None:
                chunk = _Chunk(self._alloc(rounded), 0, rounded)
            chunk.in_use = True
            self._in_use += chunk.size
        return MemoryPointer(PooledMemory(chunk, self), 0)

    def _alloc(self, size):
        for attempt in range(2):
            try:
                memory = Memory(size)
                self._total += size
                return memory
            except runtime.CUDARuntimeError as error:
                if error.status != runtime.errorMemoryAllocation or attempt:
                    raise OutOfMemoryError(size, self._total) from None
                self.free_all_blocks()
                gc.collect()

    def _take_free(self, size):
        i = bisect.bisect_left(self._free_chunks, (size, -1))
        if i == len(self._free_chunks):
            return None
        _, _, chunk = self._free_chunks.pop(i)
        if chunk.size > size:           # split: the rest stays free
            rest = _Chunk(chunk.mem, chunk.offset + size, chunk.size - size)
            rest.prev, rest.next = chunk, chunk.next
            if chunk.next:
                chunk.next.prev = rest
            chunk.next = rest
            chunk.size = size
            self._insert(rest)
        return chunk

    def _insert(self, chunk):
        bisect.insort(self._free_chunks, (chunk.size, id(chunk), chunk))

    def _remove(self, chunk):
        self._free_chunks.remove((chunk.size, id(chunk), chunk))

    def _free(self, chunk):
        with self._lock:
            chunk.in_use = False
            self._in_use -= chunk.size
            if chunk.next and not chunk.next.in_use:
                after = chunk.next
                self._remove(after)
                chunk.size += after.size
                chunk.next = after.next
                if after.next:
                    after.next.prev = chunk
            if chunk.prev and not chunk.prev.in_use:
                before = chunk.prev
                self._remove(before)
                before.size += chunk.size
                before.next = chunk.next
                if chunk.next:
                    chunk.next.prev = before
                chunk = before
            self._insert(chunk)

    def free_all_blocks(self):
        with self._lock:
            for entry in list(self._free_chunks):
                chunk = entry[2]
                if chunk.prev is None and chunk.next is None:
                    self._free_chunks.remove(entry)
                    self._total -= chunk.size
                    chunk.mem = None

    def used_bytes(self):
        return self._in_use

    def total_bytes(self):
        return self._total


class MemoryPool:
    """One SingleDeviceMemoryPool per device; malloc uses the current one's."""

    def __init__(self):
        self._pools = {}

    def _pool(self):
        return self._pools.setdefault(runtime.getDevice(), SingleDeviceMemoryPool())

    def malloc(self, size):
        return self._pool().malloc(size)

    def free_all_blocks(self):
        self._pool().free_all_blocks()

    def used_bytes(self):
        return self._pool().used_bytes()

    def total_bytes(self):
        return self._pool().total_bytes()


def _malloc(size):
    return MemoryPointer(Memory(size), 0)


_current_allocator = _malloc
_thread_local = threading.local()


def set_allocator(allocator=None):
    global _current_allocator
    if getattr(_thread_local, "allocator", None) is not None:
        raise ValueError("Can't change the global allocator inside "
                         "``using_allocator`` context manager")
    _current_allocator = _malloc if allocator is None else allocator


def get_allocator():
    return getattr(_thread_local, "allocator", None) or _current_allocator


@contextlib.contextmanager
def using_allocator(allocator=None):
    previous = getattr(_thread_local, "allocator", None)
    _thread_local.allocator = _malloc if allocator is None else allocator
    try:
        yield
    finally:
        _thread_local.allocator = previous


def alloc(size):
    return get_allocator()(size)
