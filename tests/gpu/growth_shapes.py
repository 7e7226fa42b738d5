"""The growth verdict's hard shapes on a real GPU, in the frameworks' default
modes, unmarked (no cumemtrace.mark): a short run, a small leak beside big
temporaries, JAX with its preallocated pool, and long steady loops.

    LD_PRELOAD=build/libcumemtrace.so python3 tests/gpu/growth_shapes.py SHAPE

Lines carry markers, as in default_mode.py:
  LEAK-<shape>   kept every step: growing, this line named
  HELD-<shape>   held on purpose: never growing
  TEMP-<shape>   a temporary, or a cache that holds steady: never growing
tests/gpu/check_growth.py runs them and checks the reports.
"""
import sys
import time


def amp_losses(seconds=3.0):
    """An AMP training loop of 3 s that keeps every step's loss (a scalar
    tensor, its graph node with it) beside the step's activations."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()  # HELD-amp_losses
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(256, 1024, device="cuda")
    losses = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()  # LEAK-amp_losses
        scaler.scale(loss).backward()  # TEMP-amp_losses
        scaler.step(opt)  # TEMP-amp_losses
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(loss)
    torch.cuda.synchronize()
    print("steps:", len(losses), flush=True)
    return losses


def jax_kept(seconds=5.0):
    """JAX with its defaults: a 4 MiB array kept each step for 5 s, beside a
    16 MiB temporary."""
    import jax.numpy as jnp
    kept = []
    end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < end:
        tmp = jnp.ones((4 << 20,), dtype=jnp.float32) * step  # TEMP-jax_kept
        kept.append(jnp.arange(1 << 20, dtype=jnp.float32) + step)  # LEAK-jax_kept
        kept[-1].block_until_ready()
        del tmp
        step += 1
        time.sleep(0.04)
    print("steps:", step, flush=True)
    return kept


def steady_training(seconds=40.0):
    """40 s of a training loop that holds steady: model, optimizer state,
    activations and a 48 MiB temporary each step."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()  # HELD-steady_training
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(512, 1024, device="cuda")
    end = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < end:
        scratch = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")  # TEMP-steady_training
        scratch.fill_(1)
        loss = model(x).square().mean()  # TEMP-steady_training
        loss.backward()  # TEMP-steady_training
        opt.step()  # TEMP-steady_training
        opt.zero_grad(set_to_none=True)
        del scratch, loss
        steps += 1
        time.sleep(0.005)
    torch.cuda.synchronize()
    print("steps:", steps, flush=True)
    return model, opt


def steady_serving(seconds=40.0):
    """40 s of an inference server: requests of varying length, each
    session's KV cache kept while the session lives, the oldest of 16
    sessions evicted."""
    import torch
    torch.manual_seed(0)
    weights = torch.randn(4096, 4096, device="cuda")  # HELD-steady_serving
    sessions = []
    end = time.monotonic() + seconds
    requests = 0
    while time.monotonic() < end:
        length = 64 + (requests * 7919) % 1024
        cache = torch.empty(length, 8192, device="cuda")  # TEMP-steady_serving
        out = (torch.randn(length, 4096, device="cuda") @ weights).relu()  # TEMP-steady_serving
        cache[:, :4096] = out
        sessions.append(cache)
        if len(sessions) > 16:
            sessions.pop(0)
        del out
        requests += 1
        time.sleep(0.005)
    torch.cuda.synchronize()
    print("requests:", requests, flush=True)
    return weights


SHAPES = {f.__name__: f for f in (amp_losses, jax_kept, steady_training, steady_serving)}
HELD = None   # module global: what a shape returns lives until interpreter teardown

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SHAPES:
        sys.exit(f"usage: growth_shapes.py {'|'.join(SHAPES)}")
    HELD = SHAPES[sys.argv[1]]()
