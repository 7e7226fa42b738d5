"""The field's memory patterns, mixed as real programs mix them, in each
framework's DEFAULT mode (PyTorch's caching allocator on, CuPy's pool on).

    LD_PRELOAD=build/libcumemtrace.so python3 tests/gpu/default_mode.py SCENARIO

Every scenario keeps real leaks next to innocent traffic, so a verdict made
from cache segments (which are charged to whichever line first needed one)
would name the wrong line. Lines carry markers:
  LEAK-<scenario>   a real leak: must be reported growing, this line named
  HELD-<scenario>   held on purpose to the end: not growing, not a leak
  TEMP-<scenario>   an innocent temporary or in-place accumulation: never
                    named growing
tests/gpu/check_default_mode.py runs them and checks the report against
these markers and against the framework's own figures printed at the end
(torch.cuda.memory_stats(), CuPy's pool, JAX's live arrays and
memory_stats()).
"""
import json
import sys
import time

PAUSE = 0.01


def torch_figures():
    import torch
    s = torch.cuda.memory_stats()
    return {k: s.get(k) for k in ("allocated_bytes.all.current", "reserved_bytes.all.current",
                                  "inactive_split_bytes.all.current", "num_ooms")}


def training_mix(steps=160):
    """Kept activations and stored losses next to a 48 MiB temporary per step
    and gradient accumulation over 4 micro-batches."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()  # HELD-training_mix
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device="cuda")
    kept, losses = [], []
    for step in range(steps):
        scratch = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")  # TEMP-training_mix
        scratch.fill_(1)
        h = model[0](x)  # backward frees what the graph saved of it: not kept
        kept.append(h[:64].clone())  # LEAK-training_mix
        loss = model[2](model[1](h)).square().mean() / 4  # LEAK-training_mix (its graph)
        loss.backward()  # TEMP-training_mix (gradients accumulate in place)
        losses.append(loss)  # the graph stays alive with it
        if step % 4 == 3:
            opt.step()  # TEMP-training_mix
            opt.zero_grad(set_to_none=True)
        del scratch
        time.sleep(PAUSE)
    return kept, losses


def retain_graph(steps=120):
    """A hidden state carried across steps without detach(), backward with
    retain_graph=True, beside a temporary per step."""
    import torch
    cell = torch.nn.Linear(1024, 1024).cuda()
    hidden = torch.zeros(256, 1024, device="cuda")
    for _ in range(steps):
        tmp = torch.randn(8 << 20, device="cuda")  # TEMP-retain_graph
        tmp.mul_(2)
        hidden = torch.tanh(cell(hidden))  # LEAK-retain_graph
        hidden.sum().backward(retain_graph=True)  # TEMP-retain_graph
        del tmp
        time.sleep(PAUSE)
    return hidden


def dataset_on_gpu(steps=120):
    """The whole data set copied to the device once, then a steady loop."""
    import torch
    data = torch.randn(32, 1 << 20, device="cuda")  # HELD-dataset_on_gpu
    model = torch.nn.Linear(512, 512).cuda()
    for step in range(steps):
        batch = data[step % 32].view(2048, 512)
        model(batch).sum().backward()  # TEMP-dataset_on_gpu
        time.sleep(PAUSE)
    return data


def cache_idle(steps=100):
    """A 2 GiB temporary freed by the program and kept by the cache."""
    import torch
    model = torch.nn.Linear(512, 512).cuda()
    x = torch.randn(256, 512, device="cuda")
    for step in range(steps):
        if step == 2:
            big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")  # TEMP-cache_idle
            del big
        model(x).sum().backward()
        time.sleep(PAUSE)
    return model


def fragmentation_oom():
    """The device filled with 6 MiB tensors, two of every three freed, then a
    request larger than any hole but smaller than the free bytes in them."""
    import torch
    kept, all_ = [], []
    try:
        while True:
            all_.append(torch.empty(6 << 20, dtype=torch.uint8, device="cuda"))  # HELD-fragmentation_oom
    except torch.cuda.OutOfMemoryError:
        pass
    kept = all_[::3]
    del all_
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    allocated = torch.cuda.memory_allocated()
    request = min((reserved - allocated) // 2, 16 << 30)
    print(json.dumps({"request": request, "driver_free": free, "reserved": reserved,
                      "allocated": allocated}), flush=True)
    try:
        big = torch.empty(request, dtype=torch.uint8, device="cuda")  # OOM-fragmentation_oom
        del big
    except torch.cuda.OutOfMemoryError:
        print("fragmentation_oom: OutOfMemoryError raised", flush=True)
    return kept


def exhaustion_oom():
    """Tensors kept until the device is full."""
    import torch
    kept = []
    try:
        while True:
            kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))  # OOM-exhaustion_oom
    except torch.cuda.OutOfMemoryError:
        print(f"exhaustion_oom: OutOfMemoryError after {len(kept)} GiB", flush=True)
    return kept


def cupy_mix(steps=150):
    """CuPy's default pool: a list keeps one array per step next to a larger
    temporary."""
    import cupy
    kept = []
    for _ in range(steps):
        tmp = cupy.ones(16 << 20, dtype=cupy.float32)  # TEMP-cupy_mix
        kept.append(cupy.arange(1 << 18, dtype=cupy.float32))  # LEAK-cupy_mix
        tmp *= 2
        del tmp
        time.sleep(PAUSE)
    cupy.cuda.Device().synchronize()
    return kept


def jax_kept(steps=100):
    """JAX with its defaults (a preallocated pool): an array kept per step."""
    import jax.numpy as jnp
    kept = []
    for i in range(steps):
        tmp = jnp.ones((4 << 20,), dtype=jnp.float32) * i  # TEMP-jax_kept
        kept.append(jnp.arange(1 << 18, dtype=jnp.float32) + i)  # LEAK-jax_kept
        del tmp
        time.sleep(PAUSE)
    kept[-1].block_until_ready()
    return kept


SCENARIOS = {f.__name__: f for f in (training_mix, retain_graph, dataset_on_gpu, cache_idle,
                                      fragmentation_oom, exhaustion_oom, cupy_mix, jax_kept)}
HELD = None   # module global: what a scenario returns lives until interpreter teardown

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: default_mode.py {'|'.join(SCENARIOS)}")
    HELD = SCENARIOS[sys.argv[1]]()
    if sys.argv[1] == "cupy_mix":
        import cupy
        pool = cupy.get_default_memory_pool()
        print("cupy:", json.dumps({"used_bytes": pool.used_bytes(),
                                   "total_bytes": pool.total_bytes()}), flush=True)
    elif sys.argv[1] == "jax_kept":
        import jax
        stats = jax.local_devices()[0].memory_stats() or {}
        live = {a.unsafe_buffer_pointer(): a.on_device_size_in_bytes() for a in jax.live_arrays()}
        print("jax:", json.dumps({"live_array_bytes": sum(live.values()),
                                  "bytes_in_use": stats.get("bytes_in_use"),
                                  "pool_bytes": stats.get("pool_bytes")}), flush=True)
    else:
        import torch
        torch.cuda.synchronize()
        print("torch:", json.dumps(torch_figures()), flush=True)
