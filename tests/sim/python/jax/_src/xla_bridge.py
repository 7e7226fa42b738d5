"""Backends, started lazily as JAX's are (jax/_src/xla_bridge.py)."""
import ctypes
import os
import threading

_backend_lock = threading.Lock()
_backends = {}
_default_backend = None
clients_made = 0        # for the tests: a second one means a second region
_cudart = ctypes.CDLL("libcudart.so.13")


class Device:
    def __init__(self, ordinal):
        self.id = ordinal
        self.local_hardware_id = ordinal
        self.platform = "gpu"

    def __repr__(self):
        return f"CudaDevice(id={self.id})"


class Client:
    """One region per device, taken from the driver when the client is made,
    arrays carved out of it first fit in 256-byte units."""

    def __init__(self):
        global clients_made
        clients_made += 1
        count = ctypes.c_int()
        _cudart.cudaGetDeviceCount(ctypes.byref(count))
        self.devices = [Device(d) for d in range(count.value)]
        self.region_size = int(os.environ.get("SIMJAX_PREALLOCATE", 256 << 20))
        self.regions = {}
        self.free = {}          # device -> sorted [(offset, size)]
        self.arrays = {}        # id -> weakref of every live array
        self.lock = threading.Lock()
        self._region(0)

    def _region(self, device):
        if device not in self.regions:
            previous = ctypes.c_int()
            _cudart.cudaGetDevice(ctypes.byref(previous))
            _cudart.cudaSetDevice(device)
            pointer = ctypes.c_void_p()
            status = _cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(self.region_size))
            _cudart.cudaSetDevice(previous.value)
            if status != 0:
                raise RuntimeError(f"RESOURCE_EXHAUSTED: preallocating {self.region_size} bytes")
            self.regions[device] = pointer.value
            self.free[device] = [(0, self.region_size)]
        return self.regions[device]

    def allocate(self, device, size):
        size = max(256, (size + 255) // 256 * 256)
        with self.lock:
            base = self._region(device)
            for i, (offset, room) in enumerate(self.free[device]):
                if room >= size:
                    if room == size:
                        del self.free[device][i]
                    else:
                        self.free[device][i] = (offset + size, room - size)
                    return base + offset, size
        raise RuntimeError(f"RESOURCE_EXHAUSTED: out of memory allocating {size} bytes")

    def release(self, device, pointer, size):
        with self.lock:
            spans = self.free[device]
            spans.append((pointer - self.regions[device], size))
            spans.sort()
            merged = [spans[0]]
            for offset, room in spans[1:]:
                last_offset, last_room = merged[-1]
                if last_offset + last_room == offset:
                    merged[-1] = (last_offset, last_room + room)
                else:
                    merged.append((offset, room))
            self.free[device] = merged

    def live_arrays(self):
        found = [ref() for ref in list(self.arrays.values())]
        delay = float(os.environ.get("SIMJAX_SLOW_LIST_MS", 0))
        if delay:
            import time
            time.sleep(delay / 1000)
        return [a for a in found if a is not None]


def backends_are_initialized():
    with _backend_lock:
        return len(_backends) != 0


def get_backend(platform=None):
    global _default_backend
    if platform not in (None, "gpu", "cuda"):
        raise RuntimeError(f"Unknown backend {platform}")
    with _backend_lock:
        if not _backends:
            _backends["cuda"] = Client()
            _default_backend = _backends["cuda"]
        return _backends["cuda"]


def _clear_backends():
    global _backends, _default_backend
    with _backend_lock:
        _backends = {}
        _default_backend = None
