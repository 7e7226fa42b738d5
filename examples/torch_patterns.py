"""The field's PyTorch memory patterns, each runnable on its own under the tracer.

    LD_PRELOAD=build/libcumemtrace.so CUMEMTRACE_SAMPLE_MS=100 \\
        python3 examples/torch_patterns.py PATTERN

Leaks (the report must list the site under "Growing (leak suspects)"):
  kept_in_list      tensors appended to a list every iteration
  loss_with_graph   the loss stored as is, keeping each iteration's graph alive
  retain_graph      a hidden state carried across iterations without detach(),
                    backward(retain_graph=True): the graph grows every step
  pinned_pileup     pinned host buffers kept every iteration
Not leaks (the report must NOT list them as growing):
  dataset_on_gpu    the whole data set copied to the device once: large, steady
  cache_holds_freed big temporaries freed by the program, kept by PyTorch's cache
  no_zero_grad      gradients accumulate in place without zero_grad()
  grad_accumulation gradient accumulation over 4 micro-batches
Fragmentation (not growing, but the fragmentation verdict must say so):
  alternating_sizes long-lived small tensors allocated between short-lived
                    larger ones: the freed space is left in holes between
                    them, too small for the next, larger request
Each line that allocates what the verdict is about carries a marker comment
(SITE-<pattern>); tests/gpu/check_patterns.py checks the report names it.
Every pattern runs about 3 seconds, with a short pause per iteration, so that
growth shows over the tracer's time samples.
"""
import sys
import time

import torch

ITERATIONS = 150
PAUSE = 0.02


def model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 512)).cuda()
    x = torch.randn(256, 512, device="cuda")
    return model, x


def kept_in_list():
    kept = []
    for _ in range(ITERATIONS):
        kept.append(torch.randn(1 << 20, device="cuda"))  # SITE-kept_in_list
        time.sleep(PAUSE)


def loss_with_graph():
    model, x = model_and_data()
    losses = []
    for _ in range(ITERATIONS):
        loss = model(x).square().mean()  # SITE-loss_with_graph
        losses.append(loss)              # the graph, and its activations, stay alive
        time.sleep(PAUSE)


def retain_graph():
    cell = torch.nn.Linear(1024, 1024).cuda()
    hidden = torch.zeros(512, 1024, device="cuda")
    for _ in range(ITERATIONS):
        hidden = torch.tanh(cell(hidden))  # SITE-retain_graph (its graph is never let go)
        hidden.sum().backward(retain_graph=True)  # and each backward keeps it alive
        time.sleep(PAUSE)


def pinned_pileup():
    kept = []
    for _ in range(ITERATIONS):
        kept.append(torch.empty(1 << 20, pin_memory=True))  # SITE-pinned_pileup
        time.sleep(PAUSE)


def dataset_on_gpu():
    data = torch.randn(64, 1 << 20, device="cuda")  # SITE-dataset_on_gpu
    model, _ = model_and_data()
    for step in range(ITERATIONS):
        batch = data[step % 64].view(2048, 512)
        model(batch).sum().backward()
        time.sleep(PAUSE)


def cache_holds_freed():
    model, x = model_and_data()
    for step in range(ITERATIONS):
        if step == 0:
            big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")  # SITE-cache_holds_freed
            del big           # freed by the program, kept by the caching allocator
        model(x).sum().backward()
        time.sleep(PAUSE)


def no_zero_grad():
    model, x = model_and_data()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    for _ in range(ITERATIONS):
        model(x).square().mean().backward()  # SITE-no_zero_grad (grads add up in place)
        optimizer.step()
        time.sleep(PAUSE)


def grad_accumulation():
    model, x = model_and_data()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(ITERATIONS):
        loss = model(x).square().mean() / 4  # SITE-grad_accumulation
        loss.backward()
        if step % 4 == 3:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        time.sleep(PAUSE)


def alternating_sizes():
    pairs = []
    for _ in range(48):
        scratch = torch.empty(6 << 20, dtype=torch.uint8, device="cuda")  # SITE-alternating_sizes
        kept = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")     # lands after it
        pairs.append((scratch, kept))
    kept = [k for _, k in pairs]
    del pairs, scratch   # 6 MiB holes between the kept tensors
    for _ in range(ITERATIONS):
        activation = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")  # fits no hole
        del activation
        time.sleep(PAUSE)
    return kept   # still alive at exit, so the holes are too


PATTERNS = {f.__name__: f for f in (kept_in_list, loss_with_graph, retain_graph, pinned_pileup,
                                     dataset_on_gpu, cache_holds_freed, no_zero_grad,
                                     grad_accumulation, alternating_sizes)}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in PATTERNS:
        sys.exit(f"usage: torch_patterns.py {'|'.join(PATTERNS)}")
    result = PATTERNS[sys.argv[1]]()   # what a pattern returns lives until exit
    torch.cuda.synchronize()
    print(f"{sys.argv[1]}: done, memory_allocated {torch.cuda.memory_allocated() >> 20} MiB, "
          f"memory_reserved {torch.cuda.memory_reserved() >> 20} MiB", flush=True)
