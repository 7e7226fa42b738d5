"""A stand-in for JAX, for cumemtrace's tests on the CUDA simulator.

It has what cumemtrace relies on, as JAX 0.11 has it: backends started at
the first array (jax._src.xla_bridge.backends_are_initialized()), a client
per platform that takes one region of device memory at once (JAX's default
preallocation) and carves arrays out of it; jax.live_arrays() listing every
live array with unsafe_buffer_pointer(), on_device_size_in_bytes(),
devices() and the traceback of the Python stack that made it (code objects
and instruction offsets, innermost first: raw_frames()); and JAX's own exit
hook, registered at import, that drops the backends. A call that needs a
backend after that starts a new client, which takes a new region: what
cumemtrace must never cause.

SIMJAX_PREALLOCATE (bytes, default 256 MiB) is the region's size;
SIMJAX_TRACEBACKS=0 turns tracebacks off (the arrays' traceback is None);
SIMJAX_SLOW_LIST_MS makes live_arrays() take that long.
"""
from jax._src.api import live_arrays, devices  # noqa: F401
from jax import numpy  # noqa: F401
