"""The growth verdict, run after run: the shapes a clock once decided, on the
CUDA simulator and the PyTorch stand-in (tests/integration/torch_blocks.py),
each run RUNS times at full length, optionally beside a busy CPU.

    python3 bench/growth_repeat.py [--build build] [--runs 10] [--busy]
                                   [--step-s 0.02]

Shapes (tests/integration/torch_blocks.py): short_leak (78 steps, 1.5 s,
1 MiB kept a step on an 8 MiB temporary's line), small_beside_big (150 steps,
3 s, 512 bytes kept on a 4 MiB temporary's line), steady_serving (150 steps,
3 s, a server holding steady with eviction), leak_beside_temporaries_unmarked.
Prints, per shape, how many runs called its LEAK lines growing and nothing
else, and the verdict's figures (rises of observations) seen across runs.
--busy starts one CPU-bound process per core for the duration.
"""
import argparse
import glob
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "integration", "torch_blocks.py")
SHAPES = ("short_leak", "small_beside_big", "steady_serving", "leak_beside_temporaries_unmarked")


def marked(tag, shape):
    with open(SCRIPT) as handle:
        return {n for n, text in enumerate(handle, 1) if f"# {tag}-{shape}" in text}


def site_line(report, stack_id):
    frames = {f["id"]: f for f in report["frames"]}
    stack = next(s for s in report["stacks"] if s["id"] == stack_id)
    for i in stack["frames"]:
        f = frames[i]
        if f.get("python") and (f.get("file") or "").endswith("torch_blocks.py") and \
                not (f.get("function") or "").endswith("__init__"):
            return f["line"]
    return None


def run_once(build, shape, step_s):
    sim = os.path.join(build, "sim")
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
                   LD_LIBRARY_PATH=f"{sim}:{sim}/torch/lib",
                   CUMEMTRACE_TORCH_TRACKER=f"{sim}/torch/libcumemtrace_torch.so",
                   CUMEMTRACE_QUIET="1", CUMEMTRACE_OUTPUT=os.path.join(out, "report"),
                   CUMEMTRACE_TEST_STEP_S=str(step_s))
        subprocess.run([sys.executable, SCRIPT, shape], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        report = json.load(open(glob.glob(os.path.join(out, "report*.json"))[0]))
    growing = sorted(site_line(report, g["stack"]) for g in report["growth"]["growing"])
    rises = sorted(f'{g["rises"]}/{g["samples_since_first"]}' for g in report["growth"]["growing"])
    return growing, rises


def busy():
    while True:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--step-s", type=float, default=0.02)
    args = parser.parse_args()
    hogs = [multiprocessing.Process(target=busy, daemon=True) for _ in range(os.cpu_count() or 1)] \
        if args.busy else []
    for hog in hogs:
        hog.start()
    try:
        for shape in SHAPES:
            name = "leak_beside_temporaries" if shape.endswith("_unmarked") else shape
            leaks = sorted(marked("LEAK", name))
            right, figures = 0, set()
            for _ in range(args.runs):
                growing, rises = run_once(args.build, shape, args.step_s)
                right += sorted(set(growing)) == leaks
                figures.add(" ".join(rises) or "-")
            verdict = f"growing at line {leaks}" if leaks else "nothing growing"
            print(f"{shape:34} {verdict:28} right {right}/{args.runs}"
                  f"   rises/observations seen: {', '.join(sorted(figures))}", flush=True)
    finally:
        for hog in hogs:
            hog.terminate()


if __name__ == "__main__":
    main()
