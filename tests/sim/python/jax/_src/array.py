"""Arrays (jaxlib's PyArray) and their tracebacks (jaxlib/traceback.cc)."""
import os
import sys
import weakref

from jax._src import xla_bridge as xb

TRACEBACKS = os.environ.get("SIMJAX_TRACEBACKS", "1") != "0"


class Traceback:
    """The Python stack at an array's creation: (code, lasti) pairs,
    innermost first, lasti in bytes as f_lasti. Hashable, compared by
    frames."""

    def __init__(self, frames):
        self._frames = tuple(frames)

    @staticmethod
    def get_traceback():
        if not TRACEBACKS:
            return None
        frames, frame = [], sys._getframe(1)
        while frame is not None:
            frames.append((frame.f_code, frame.f_lasti))
            frame = frame.f_back
        return Traceback(frames)

    def raw_frames(self):
        return [code for code, _ in self._frames], [lasti for _, lasti in self._frames]

    def __hash__(self):
        return hash(self._frames)

    def __eq__(self, other):
        return isinstance(other, Traceback) and self._frames == other._frames


class ArrayImpl:
    def __init__(self, nbytes, device=0, shards=1):
        self._client = xb.get_backend()
        self._device = device
        self._shards = shards
        self.nbytes = nbytes
        self.traceback = Traceback.get_traceback()
        self._buffers = [self._client.allocate(device + i, nbytes // shards)
                         for i in range(shards)]
        self._client.arrays[id(self)] = weakref.ref(self)

    def unsafe_buffer_pointer(self):
        if self._shards != 1:
            raise ValueError("unsafe_buffer_pointer() is supported only for unsharded arrays.")
        return self._buffers[0][0]

    def on_device_size_in_bytes(self):
        return sum(size for _, size in self._buffers)

    def devices(self):
        return {self._client.devices[self._device + i] for i in range(self._shards)}

    def alias(self):
        """Another array object on the same buffer (jaxlib's header warns
        that live_arrays() may list several for one buffer)."""
        other = object.__new__(ArrayImpl)
        other.__dict__.update(self.__dict__)
        other._owner = self
        other.traceback = Traceback.get_traceback()
        self._client.arrays[id(other)] = weakref.ref(other)
        return other

    def __mul__(self, other):
        return ArrayImpl(self.nbytes, self._device)

    def __del__(self):
        client = getattr(self, "_client", None)
        if client is None:
            return
        client.arrays.pop(id(self), None)
        if getattr(self, "_owner", None) is None:
            for i, (pointer, size) in enumerate(self._buffers):
                client.release(self._device + i, pointer, size)
