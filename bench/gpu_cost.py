#!/usr/bin/env python3
"""What the tracer costs a PyTorch training step on a real GPU, in one run.

    python3 bench/gpu_cost.py [--build build] [--rounds 5] [--steps 2000]

For each allocator mode (caching, expandable segments, every tensor a
cudaMalloc), runs tests/gpu/torch_step_time.py untraced and traced, rounds
alternating so drift hits both alike, and prints the median step time of each
and their ratio; then the same for a CuPy loop (bench/cupy_step.py) and for a
cudaMalloc-heavy C program (bench/alloc.c built against the real runtime as
build/gpu/gpu_bench_alloc). As the field's references, the same step under PyTorch's
memory history recorder and, with --sanitizer-steps N, under
compute-sanitizer --leak-check full (slow; it may not exit, hence a timeout). Targets: <= 1.01x caching, <= 1.05x per-tensor.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "torch_step_time.py")
CUPY_SCRIPT = os.path.join(ROOT, "bench", "cupy_step.py")


PIN = []   # ["taskset", "-c", LIST] with --pin


def step_ms(env, steps, prefix=(), extra=(), timeout=300, script=SCRIPT):
    prefix = (*PIN, *prefix)
    environment = dict(os.environ)
    environment.update(env)
    try:
        done = subprocess.run([*prefix, sys.executable, script, str(steps), *extra],
                              env=environment, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no exit within {timeout} s"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)["step_ms"], done.returncode
    return None, f"exit {done.returncode}: {done.stderr[-300:]!r}"


def pair_ns(build, env, pairs):
    """bench/alloc.c against the real driver: ns per cudaMalloc+cudaFree pair."""
    environment = dict(os.environ)
    environment.update(env)
    done = subprocess.run([*PIN, os.path.join(build, "gpu", "gpu_bench_alloc"), "1", "32", "1000",
                           str(pairs)], env=environment, capture_output=True, text=True,
                          timeout=300)
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            figures = json.loads(line)
            return figures.get("ns_per_pair")
    return None


def others(args, traced, emit):
    """A CuPy loop and a cudaMalloc-heavy C program, untraced and traced."""
    if shutil.which(sys.executable) and subprocess.run(
            [sys.executable, "-c", "import cupy"], capture_output=True).returncode == 0:
        plain, mine = [], []
        for _ in range(args.rounds):
            plain.append(step_ms({}, args.steps, script=CUPY_SCRIPT)[0])
            mine.append(step_ms(traced, args.steps, script=CUPY_SCRIPT)[0])
        plain, mine = [x for x in plain if x], [x for x in mine if x]
        if plain and mine:
            a, b = statistics.median(plain), statistics.median(mine)
            emit(("CuPy loop (memory pool)", f"{a:.3f}", f"{b:.3f}", f"{b / a:.3f}x", "", "",
                  f"{min(mine) / min(plain):.3f}x",
                  " ".join(f"{x:.3f}" for x in plain), " ".join(f"{x:.3f}" for x in mine)))
    program = os.path.join(args.build, "gpu", "gpu_bench_alloc")
    if os.path.exists(program):
        plain, mine = [], []
        for _ in range(args.rounds):
            plain.append(pair_ns(args.build, {}, 20000))
            mine.append(pair_ns(args.build, traced, 20000))
        plain, mine = [x for x in plain if x], [x for x in mine if x]
        if plain and mine:
            a, b = statistics.median(plain), statistics.median(mine)
            emit(("C program: cudaMalloc(512)+cudaFree pairs, 32-frame stack, 1000 live "
                  "(us per pair)", f"{a / 1000:.2f}", f"{b / 1000:.2f}", f"{b / a:.3f}x", "", "",
                  f"{min(mine) / min(plain):.3f}x",
                  " ".join(f"{x / 1000:.2f}" for x in plain),
                  " ".join(f"{x / 1000:.2f}" for x in mine)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sanitizer-steps", type=int, default=0,
                        help="also time compute-sanitizer --leak-check full (0: not)")
    parser.add_argument("--pin", default="",
                        help="run every process on these CPUs (taskset -c LIST): less noise")
    parser.add_argument("--skip-others", action="store_true",
                        help="only the PyTorch modes (no CuPy loop, no C program)")
    args = parser.parse_args()
    if args.pin:
        PIN.extend(["taskset", "-c", args.pin])
    traced = {"LD_PRELOAD": os.path.join(os.path.abspath(args.build), "libcumemtrace.so"),
              "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_FORMAT": "none"}
    modes = [("caching (default)", {}, 1.01),
             ("expandable_segments", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, 1.01),
             ("per-tensor (NO_CUDA_MEMORY_CACHING)", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, 1.05)]
    header = ("mode", "untraced ms/step (median)", "traced ms/step (median)", "ratio", "target",
              "", "ratio of the fastest rounds", "untraced rounds", "traced rounds")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header), flush=True)

    def emit(row):
        print("| " + " | ".join(row) + " |", flush=True)

    for name, env, target in modes:
        plain, mine = [], []
        for _ in range(args.rounds):
            plain.append(step_ms(env, args.steps)[0])
            mine.append(step_ms({**env, **traced}, args.steps)[0])
        plain, mine = [x for x in plain if x], [x for x in mine if x]
        if not plain or not mine:
            emit((name, "failed", "failed", "", "", "", "", "", ""))
            continue
        a, b = statistics.median(plain), statistics.median(mine)
        emit((name, f"{a:.3f}", f"{b:.3f}", f"{b / a:.3f}x", f"<= {target}x",
                     "met" if b / a <= target else "not met", f"{min(mine) / min(plain):.3f}x",
                     " ".join(f"{x:.3f}" for x in plain), " ".join(f"{x:.3f}" for x in mine)))
        if name.startswith("caching"):
            history = [step_ms(env, args.steps, extra=("--history",))[0]
                       for _ in range(max(1, args.rounds // 2))]
            history = [x for x in history if x] or [float("nan")]
            h = statistics.median(history)
            emit(("caching, torch memory history (reference)", f"{a:.3f}", f"{h:.3f}",
                         f"{h / a:.3f}x", "", "", f"{min(history) / min(plain):.3f}x", "",
                         " ".join(f"{x:.3f}" for x in history)))
    if not args.skip_others:
        others(args, traced, emit)
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if args.sanitizer_steps and os.path.exists(sanitizer):
        plain, _ = step_ms({}, args.sanitizer_steps)
        slow, status = step_ms({}, args.sanitizer_steps,
                               prefix=(sanitizer, "--leak-check", "full"), timeout=120)
        emit((f"caching, compute-sanitizer --leak-check full ({args.sanitizer_steps} steps, reference)",
                     f"{plain:.3f}" if plain else "-", f"{slow:.3f}" if slow else "-",
                     f"{slow / plain:.1f}x" if slow and plain else f"no figure ({status})",
                     "", "", "", "", ""))


if __name__ == "__main__":
    main()
