"""Ask cumemtrace (when preloaded) for a snapshot at the moment a script prints
its framework's own figures, so both describe the same instant.

The path comes from CUMEMTRACE_SNAPSHOT (set by tests/gpu/gpu_table.py); without
it, or without the tracer, this does nothing.
"""
import ctypes
import os


def snapshot():
    path = os.environ.get("CUMEMTRACE_SNAPSHOT")
    if not path:
        return
    try:
        function = ctypes.CDLL(None).cumemtrace_snapshot
    except (OSError, AttributeError):
        return
    function.argtypes = [ctypes.c_char_p]
    function(path.encode())
