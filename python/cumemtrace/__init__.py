"""cumemtrace - find out who holds GPU memory.

Run a program under the tracer with the `cumemtrace` command, or from
Python:

    python -m cumemtrace run train.py --epochs 3     # this Python runs train.py
    python -m cumemtrace doctor                      # what a run here records

Inside a traced program, mark() and snapshot() reach the tracer through its
public C API (include/cumemtrace.h); in a program that is not traced they do
nothing, so they can stay in the code:

    import cumemtrace
    for epoch in range(3):
        train(epoch)
        cumemtrace.mark(f"epoch {epoch}")      # growth sampled per mark
    cumemtrace.snapshot("/tmp/after-%p")       # a report now
"""
import ctypes
import os

__all__ = ["traced", "mark", "snapshot"]

_library = None


def _tracer():
    """The preloaded libcumemtrace.so, or None when this process is not traced."""
    global _library
    if _library is None:
        process = ctypes.CDLL(None)
        if not hasattr(process, "cumemtrace_mark"):
            _library = False
        else:
            process.cumemtrace_mark.argtypes = [ctypes.c_char_p]
            process.cumemtrace_mark.restype = None
            process.cumemtrace_snapshot.argtypes = [ctypes.c_char_p]
            process.cumemtrace_snapshot.restype = ctypes.c_int
            _library = process
    return _library or None


def traced():
    """Whether this process runs under the tracer."""
    return _tracer() is not None


def mark(name):
    """Mark a point of the run (an epoch, a phase) with `name` (up to 63
    bytes of it): reports list the live bytes at each mark, and growth is
    sampled at marks once there are any. Nothing when not traced."""
    tracer = _tracer()
    if tracer is not None:
        tracer.cumemtrace_mark(str(name).encode(errors="replace"))


def snapshot(path=None):
    """Write a report of what is live now: to the template `path` (%p pid,
    %r rank, %h host; the formats of CUMEMTRACE_FORMAT are added as
    extensions), or by default CUMEMTRACE_OUTPUT with -snapshot-N. True when
    written; False when it could not be, or the process is not traced."""
    tracer = _tracer()
    if tracer is None:
        return False
    return tracer.cumemtrace_snapshot(None if path is None else os.fsencode(path)) == 0

