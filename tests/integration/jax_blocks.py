"""JAX with its defaults (one preallocated region per device), played by the
stand-in package (tests/sim/python/jax), under the tracer on the simulator.

    jax_blocks.py SCENARIO [SNAPSHOT]

The driver sees one region; the arrays carved out of it are seen only by
sweeping jax.live_arrays(). Lines carry markers test_jax.py checks:
  LEAK-<scenario>  kept every step: growing, this line named
  HELD-<scenario>  held by a module global until the interpreter's teardown
  TEMP-<scenario>  a temporary: never growing, never held
"""
import ctypes
import json
import os
import sys
import threading
import time

MiB = 1 << 20
cudart = ctypes.CDLL("libcudart.so.13")


def step_pause():
    time.sleep(0.02)


def cuda_call():
    """A CUDA allocation of the program's own: the tracer starts (and its
    exit hook goes in) before JAX is imported."""
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(MiB)) == 0
    return pointer


def training_mix(steps=40):
    import jax.numpy as jnp
    params = [jnp.ones(MiB // 4) for _ in range(4)]  # HELD-training_mix
    kept = []
    for i in range(steps):
        tmp = jnp.ones(2 * MiB) * i  # TEMP-training_mix
        kept.append(jnp.ones(16 << 10))  # LEAK-training_mix
        del tmp
        step_pause()
    return params, kept


def marks(steps=40):
    """The same leak, with a cumemtrace_mark() per step: samples at marks."""
    import jax.numpy as jnp
    api = ctypes.CDLL(None)
    kept = []
    for i in range(steps):
        tmp = jnp.ones(2 * MiB)  # TEMP-marks
        kept.append(jnp.ones(16 << 10))  # LEAK-marks
        del tmp
        time.sleep(0.01)
        api.cumemtrace_mark(b"step")
    return kept


def held_at_end():
    import jax.numpy as jnp
    return [jnp.ones(2 * MiB) for _ in range(3)]  # HELD-held_at_end


def shared_and_sharded():
    """Two array objects on one buffer, an array split over two devices, and
    arrays on device 1."""
    import jax.numpy as jnp
    one = jnp.ones(MiB)
    other = one.alias()
    split = jnp.sharded_ones(MiB)
    second = [jnp.ones(MiB // 2, device=1) for _ in range(3)]
    time.sleep(0.3)
    return one, other, split, second


def not_initialized():
    """JAX imported, never used: it is never called."""
    pointer = cuda_call()
    import jax  # noqa: F401
    time.sleep(0.3)
    return pointer


def after_jax_exit_hook():
    """Our exit hook went in before JAX was imported: JAX's own exit hook
    runs first and drops its backends; no call of ours may start one."""
    pointer = cuda_call()
    import jax.numpy as jnp
    held = [jnp.ones(MiB) for _ in range(3)]  # HELD-after_jax_exit_hook
    time.sleep(0.3)
    return pointer, held


def many_arrays(count=5000, seconds=2.0):
    import jax.numpy as jnp
    arrays = [jnp.ones(64) for _ in range(count)]
    time.sleep(seconds)
    return arrays


def threads_and_fork(seconds=1.0):
    """Threads make and drop arrays while the main thread forks children
    that make a CUDA call and exit; the bridge sweeps meanwhile."""
    import jax.numpy as jnp
    # The first CUDA call (the tracer's start) before any fork: a fork during
    # it leaves the child's loader inconsistent, traced or not.
    first = jnp.ones(1024)
    stop = time.time() + seconds

    def churn():
        while time.time() < stop:
            arrays = [jnp.ones(1024) for _ in range(8)]
            del arrays

    workers = [threading.Thread(target=churn) for _ in range(3)]
    for w in workers:
        w.start()
    children = 0
    while time.time() < stop:
        pid = os.fork()
        if pid == 0:
            import signal
            signal.alarm(20)
            cudart.cudaFree(cuda_call())
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        children += 1
    for w in workers:
        w.join()
    print(f"children {children}", flush=True)
    return first


def stats():
    if "jax" not in sys.modules:
        return {}
    from jax._src import xla_bridge as xb
    if not xb.backends_are_initialized():
        return {"clients_made": xb.clients_made}
    buffers = {}
    for a in xb.get_backend().live_arrays():
        try:
            buffers[a.unsafe_buffer_pointer()] = a.on_device_size_in_bytes()
        except ValueError:
            pass
    return {"clients_made": xb.clients_made, "buffers": len(buffers),
            "bytes": sum(buffers.values())}


SCENARIOS = {f.__name__: f for f in (training_mix, marks, held_at_end, shared_and_sharded,
                                      not_initialized, after_jax_exit_hook, many_arrays,
                                      threads_and_fork)}
HELD = None   # module global: what a scenario returns lives until interpreter teardown

if __name__ == "__main__":
    HELD = SCENARIOS[sys.argv[1]]()
    if len(sys.argv) > 2:   # a snapshot now, and the stand-in's own figures of the same moment
        ctypes.CDLL(None).cumemtrace_snapshot(sys.argv[2].encode())
    print("stats:", json.dumps(stats()), flush=True)
