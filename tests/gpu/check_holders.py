"""Who holds the memory, on a GPU: the Python object named for each leak.

    python3 tests/gpu/check_holders.py --build build [--out DIR] [CHECK ...]

Runs one traced process per check; each keeps a growing group of GPU
arrays in a Python object, and the exit report's findings must name that
object on the growing line ("— held by model.outs, a list of 200 tensors"):

  lightning     a Lightning-like nn.Module whose training_step appends each
                step's output to self.outs (real Lightning's Trainer when
                `lightning` is importable, a plain loop otherwise):
                "held by model.outs";
  transformers  a tiny GPT-2 (GPT2Config, 2 layers) serving 80 sessions
                whose past_key_values are kept in a dict: "held by kept[*]";
  cupy          a list of CuPy arrays: "held by arrays, a list of 200 arrays";
  jax           a dict of JAX arrays: "held by kept, a dict of 200 arrays";
  graph         losses kept with their autograd graphs (no backward): the
                activations only the graphs keep (Linear's saved input,
                relu's saved output) "held by the graph of losses[*]";
  checkpoint    the same through torch.utils.checkpoint (non-reentrant): its
                saved tensors are behind an unpack hook that runs the
                forward pass again; the walk must never run it (the forward
                runs once per step, counted at the snapshot and after the
                exit report's walk), and still names what the graphs keep
                outside the hook (the checkpoint's output h, the leaf x);
  heap          a 1 M-object heap beside a leaking list: the walk's time and
                objects at the default budget (CUMEMTRACE_HOLDERS_MS=1000)
                and with a budget it fits in, printed for the notes.

Prints PASS or FAIL per check with the growing lines; exits 1 on any FAIL
(a check whose library is not installed is SKIP).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- the traced programs (run as: check_holders.py --child CHECK) ------------

def lightning_child():
    import torch
    from torch import nn

    class LitModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(1024, 1024)
            self.outs = []

        def training_step(self, batch, index=0):
            y = self.net(batch)
            self.outs.append(y.detach())  # LEAK-lightning
            return y.square().mean()

    global model
    try:
        import lightning
    except ImportError:
        lightning = None
    if lightning is not None:
        class Real(lightning.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(1024, 1024)
                self.outs = []

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

            def train_dataloader(self):
                data = torch.randn(200, 64, 1024)
                return torch.utils.data.DataLoader(data, batch_size=None)

            def training_step(self, batch, index):
                y = self.net(batch)
                self.outs.append(y.detach())  # LEAK-lightning
                time.sleep(0.005)
                return y.square().mean()
        model = Real()
        lightning.Trainer(max_steps=200, accelerator="gpu", devices=1, logger=False,
                          enable_checkpointing=False, enable_progress_bar=False).fit(model)
        return "lightning " + lightning.__version__
    model = LitModel().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(200):
        loss = model.training_step(torch.randn(64, 1024, device="cuda"))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        time.sleep(0.005)
    return "a plain loop (lightning not installed)"


def transformers_child():
    import torch
    import transformers
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000)
    server = transformers.GPT2LMHeadModel(config).cuda().eval()
    global kept
    kept = {}
    with torch.no_grad():
        for session in range(80):
            tokens = torch.randint(0, 1000, (1, 256), device="cuda")
            out = server(tokens, use_cache=True)
            kept[f"session-{session}"] = out.past_key_values  # LEAK-transformers
            time.sleep(0.01)
    return "transformers " + transformers.__version__


def cupy_child():
    import cupy
    global arrays
    arrays = []
    for _ in range(200):
        arrays.append(cupy.ones(1 << 18, dtype=cupy.float32))  # LEAK-cupy
        time.sleep(0.005)
    return "cupy " + cupy.__version__


def jax_child():
    import jax
    import jax.numpy as jnp
    global kept
    kept = {}
    for step in range(200):
        kept[f"step-{step}"] = jnp.ones(1 << 18) * step  # LEAK-jax
        time.sleep(0.005)
    return "jax " + jax.__version__


def graph_child():
    import torch
    from torch import nn
    global net, losses
    net = nn.Linear(1024, 1024).cuda()
    losses = []
    for _ in range(200):
        x = torch.randn(64, 1024, device="cuda")  # LEAK-graph (Linear saves it)
        h = torch.relu(net(x))                    # relu saves its output
        losses.append((h * h).mean())             # the graph, never backward
        del x, h
        time.sleep(0.005)
    return "torch " + torch.__version__


CHECKPOINT_CALLS = [0]


def checkpoint_child():
    import atexit
    # Registered before the first CUDA call, so after the tracer's exit hook:
    # runs once the exit report's walk is done.
    atexit.register(lambda: print("forward calls at exit:", CHECKPOINT_CALLS[0], flush=True))
    import ctypes
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint
    global net, losses
    net = nn.Linear(1024, 1024).cuda()

    def block(x):
        CHECKPOINT_CALLS[0] += 1
        return torch.relu(net(x))
    losses = []
    for _ in range(100):
        x = torch.randn(64, 1024, device="cuda", requires_grad=True)
        h = checkpoint(block, x, use_reentrant=False)
        losses.append((h * h).mean())  # the graph keeps h (and x, a leaf)
        del x, h
        time.sleep(0.005)
    ctypes.CDLL(None).cumemtrace_snapshot(None)
    return f"forward calls at the snapshot: {CHECKPOINT_CALLS[0]} for 100 steps"


class Record:
    def __init__(self, i):
        self.i = i
        self.name = str(i)
        self.items = [i]


def heap_child():
    import torch
    global heap, outs
    heap = [Record(i) for i in range(330_000)]     # with their dicts, lists, strs: ~1 M
    outs = []
    for _ in range(100):
        outs.append(torch.ones(1 << 18, device="cuda"))  # LEAK-heap
        time.sleep(0.005)
    import gc
    return f"{len(gc.get_objects())} objects the collector tracks"


CHILDREN = {"lightning": lightning_child, "transformers": transformers_child,
            "cupy": cupy_child, "jax": jax_child, "graph": graph_child,
            "checkpoint": checkpoint_child, "heap": heap_child}
# CuPy's and JAX's first array can come before the tracer sees the framework
# (CuPy's pool is ours from the bridge's first reading on): 199 of the 200 on
# the H200.
EXPECTED = {"lightning": r"held by model\.outs, a list of 200 tensors",
            "transformers": r"held by kept\[\*\]", "cupy": r"held by arrays, a list of (199|200) arrays",
            "jax": r"held by kept, a dict of (199|200) arrays",
            "graph": r"held by the graph of losses\[\*\] \(\d+ tensors\)",
            "checkpoint": r"held by the graph of losses\[\*\] \(\d+ tensors\)",
            "heap": r"held by outs, a list of 100 tensors"}
LIBRARY = {"lightning": "torch", "transformers": "transformers", "cupy": "cupy", "jax": "jax",
           "graph": "torch", "checkpoint": "torch", "heap": "torch"}


# ---- the checks ---------------------------------------------------------------

def run_child(check, build, out, **env):
    base = os.path.join(out, check + "".join(f"-{v}" for v in env.values()))
    environment = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
                       CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json",
                       CUMEMTRACE_QUIET="1", PYTHONUNBUFFERED="1", **env)
    started = time.time()
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", check],
                          env=environment, capture_output=True, text=True, timeout=500)
    try:
        report = json.load(open(base + ".json"))
    except (OSError, ValueError):
        report = None
    return done, report, time.time() - started


def run_check(check, build, out):
    try:
        __import__(LIBRARY[check])
    except ImportError:
        return None, f"{LIBRARY[check]} is not installed"
    done, report, seconds = run_child(check, build, out)
    ran = [line for line in done.stdout.splitlines() if line.startswith("ran: ")]
    if report is None or not ran:
        return [f"no report: exit {done.returncode}, {done.stderr[-800:]!r}"], ""
    walk = report.get("holders") or {}
    growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
    misses = []
    # The findings block names the holder on the growing line, or on the
    # held-at-the-end line where the leak stopped before the program did (a
    # Trainer's teardown after its last step).
    named = [f["text"] for f in report["findings"]]
    if not any(re.search(EXPECTED[check], g) for g in named):
        misses.append(f"no line of the findings says {EXPECTED[check]!r}")
    figures = (f"{ran[0][5:]}; walk: {walk.get('objects')} objects in {walk.get('ms')} ms, "
               f"cut short: {walk.get('cut_short')}, why not: {walk.get('why')}; "
               f"growing: {growing}")
    if check == "checkpoint":
        calls = [line for line in done.stdout.splitlines()
                 if line.startswith("forward calls at exit: ")]
        figures += f"; {ran[0][5:]}; {calls}"
        if "forward calls at the snapshot: 100 for" not in ran[0] or \
                calls != ["forward calls at exit: 100"]:
            misses.append("an unpack hook ran: the forward ran more than once a step")
    if check == "heap":
        _, fitted, _ = run_child(check, build, out, CUMEMTRACE_HOLDERS_MS="20000")
        whole = (fitted or {}).get("holders") or {}
        figures += (f"; with a 20 s budget: {whole.get('objects')} objects in "
                    f"{whole.get('ms')} ms, cut short: {whole.get('cut_short')}")
        if not walk.get("cut_short") and walk.get("ms", 0) > 1500:
            misses.append("the walk ran past its budget without saying so")
    return misses, figures


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print("ran:", CHILDREN[sys.argv[2]](), flush=True)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-holders")
    parser.add_argument("checks", nargs="*")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for check in args.checks or list(CHILDREN):
        started = time.time()
        misses, figures = run_check(check, os.path.abspath(args.build), args.out)
        if misses is None:
            print(f"SKIP {check}: {figures}")
            continue
        failures += bool(misses)
        print(f"{'PASS' if not misses else 'FAIL'} {check} ({time.time() - started:.0f} s): "
              f"{figures}")
        for miss in misses:
            print(f"  {miss}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
