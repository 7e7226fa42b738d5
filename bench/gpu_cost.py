#!/usr/bin/env python3
"""What the tracer costs a PyTorch training step on a real GPU, in one run.

    python3 bench/gpu_cost.py [--build build] [--rounds 8] [--steps 1000]
                              [--large-steps 100] [--only caching,large,...]

For each allocator mode (caching, expandable segments, every tensor a
cudaMalloc), runs tests/gpu/torch_step_time.py untraced and traced, in rounds
that alternate (so drift hits both alike), and prints the median step time of
each, the median of the rounds' ratios (traced / untraced of the same round)
and their spread. Then a GPU-bound step (--model large) in the caching mode,
a CuPy loop (bench/cupy_step.py) and a cudaMalloc-heavy C program (bench/alloc.c
built against the real runtime as build/gpu/gpu_bench_alloc). As the field's
references, the same step under PyTorch's memory history recorder and, with
--sanitizer-steps N, under compute-sanitizer --leak-check full (slow; it may
not exit, hence a timeout). Targets: <= 1.01x caching, <= 1.05x per-tensor.

Run to run, a small step's time varies by more than these targets. So for
each mode, below the table, two more traced runs (N and 2N steps) say what
the tracer did in the timed steps, from its own report: the allocations it
recorded, the CUDA calls it intercepted, and its own time in those calls
(CUMEMTRACE_SELF_TIME: clock stopped around the real call) per step and as a
share of the untraced step. What that time leaves out: the tracer's sampling
thread (which takes the GIL once per CUMEMTRACE_SAMPLE_MS) and the caches its
work evicts.

Every process runs with PYTHONHASHSEED=0 and, where setarch is found, without
address-space randomisation: two sources of difference between processes
that have nothing to do with the tracer.
"""
import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "torch_step_time.py")
CUPY_SCRIPT = os.path.join(ROOT, "bench", "cupy_step.py")
PER_TENSOR = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


PIN = []   # ["taskset", "-c", LIST] with --pin
DRY_RUN = False   # --dry-run: the processes are listed in RUNS, not run
RUNS = []
STEADY = {"PYTHONHASHSEED": "0"}
NO_ASLR = ["setarch", os.uname().machine, "-R"]
if not shutil.which("setarch") or subprocess.run([*NO_ASLR, "true"]).returncode != 0:
    NO_ASLR = []          # a container may refuse personality(2): then not


def step_ms(env, steps, prefix=(), extra=(), timeout=300, script=SCRIPT, key="step_ms"):
    prefix = (*PIN, *NO_ASLR, *prefix)
    if DRY_RUN:
        RUNS.append([*(f"{k}={v}" for k, v in sorted(env.items())), *prefix, "python3",
                     os.path.relpath(script, ROOT), str(steps), *extra])
        return None, "dry run"
    environment = dict(os.environ)
    environment.update(STEADY)
    environment.update(env)
    try:
        done = subprocess.run([*prefix, sys.executable, script, str(steps), *extra],
                              env=environment, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no exit within {timeout} s"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            figures = json.loads(line)
            return (figures[key] if key else figures), done.returncode
    return None, f"exit {done.returncode}: {done.stderr[-300:]!r}"


def pair_ns(build, env, pairs):
    """bench/alloc.c against the real driver: ns per cudaMalloc+cudaFree pair."""
    environment = dict(os.environ)
    environment.update(env)
    done = subprocess.run([*PIN, *NO_ASLR, os.path.join(build, "gpu", "gpu_bench_alloc"), "1",
                           "32", "1000", str(pairs)], env=environment, capture_output=True,
                          text=True, timeout=300)
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            figures = json.loads(line)
            return figures.get("ns_per_pair")
    return None


def pair_self_ns(build, traced, pairs):
    """The tracer's own time per pair of the C program (CUMEMTRACE_SELF_TIME)."""
    report = self_timed_report(traced, lambda env: pair_ns(build, env, pairs))
    own = report["tracer"]["self_time_ns"] if report else None
    return own / pairs if own is not None else None


def rounds_of(measure, rounds):
    """`measure(traced)` in alternating rounds, untraced first in even rounds and
    traced first in odd ones (so an effect of going first or second falls on
    both alike): the figures of each side, and the ratio traced / untraced of
    every round where both gave one."""
    plain, mine, ratios = [], [], []
    for number in range(rounds):
        if number % 2 == 0:
            a, b = measure(False), measure(True)
        else:
            b, a = measure(True), measure(False)
        if a:
            plain.append(a)
        if b:
            mine.append(b)
        if a and b:
            ratios.append(b / a)
    return plain, mine, ratios


def row(name, plain, mine, ratios, target=None, unit=1.0, digits=3):
    """One table row: medians, the median of the rounds' ratios and its spread,
    the verdict, and every round's figure."""
    if not plain or not mine or not ratios:
        return (name, "failed", "failed", "", "", "", "", "", "")
    ratio = statistics.median(ratios)
    spread = f"{min(ratios):.3f}-{max(ratios):.3f}x"
    verdict = ""
    if target:
        verdict = "met" if ratio <= target else "not met"
    noise = max(plain) / min(plain)
    return (name, f"{statistics.median(plain) / unit:.{digits}f}",
            f"{statistics.median(mine) / unit:.{digits}f}", f"{ratio:.3f}x", spread,
            f"<= {target}x" if target else "", verdict, f"{noise:.2f}x",
            " ".join(f"{x / unit:.{digits}f}" for x in plain) + " / " +
            " ".join(f"{x / unit:.{digits}f}" for x in mine))


def self_timed_report(traced, run):
    """`run(env)` once, traced, timing the tracer's own work (CUMEMTRACE_SELF_TIME)
    and writing its JSON report; the report, or None."""
    with tempfile.TemporaryDirectory(prefix="cumemtrace-cost-") as out:
        run({**traced, "CUMEMTRACE_FORMAT": "json", "CUMEMTRACE_SELF_TIME": "1",
             "CUMEMTRACE_OUTPUT": os.path.join(out, "run-%p")})
        for name in os.listdir(out):
            if name.endswith(".json"):
                with open(os.path.join(out, name)) as handle:
                    return json.load(handle)
    return None


def timed_steps(traced, env, steps, extra=()):
    """A traced run's report and its marks around the timed steps, or a reason."""
    report = self_timed_report(traced, lambda tracer: step_ms({**env, **tracer}, steps,
                                                              extra=extra))
    if not report:
        return None, None, None, "no report"
    marks = {m["label"]: m for m in report["marks"]["recent"]}
    start, end = marks.get("timed steps: start"), marks.get("timed steps: end")
    if not start or not end:
        return None, None, None, "no marks in the report"
    return report, start, end, None


def activity(traced, env, label, timed, extra, untraced_ms):
    """What the tracer did during the timed steps, from its own reports: the
    allocations it recorded between the marks around them, its own time in
    CUDA calls there (CUMEMTRACE_SELF_TIME) per step and as a share of the
    untraced step, and its calls (every intercepted CUDA call) in a run of N
    steps against one of 2N."""
    counts, own = [], []
    for steps in (timed, 2 * timed):
        report, start, end, failure = timed_steps(traced, env, steps, extra)
        if failure:
            return f"{label}: {failure}"
        calls = sum(e["calls"] for e in report["entry_points"])
        counts.append((steps, end["sequence"] - start["sequence"], calls))
        own.append((end["self_time_ns"] - start["self_time_ns"]) / steps / 1000)
    share = f" = {min(own) / 1000 / untraced_ms:.2%}-{max(own) / 1000 / untraced_ms:.2%} " \
            f"of the untraced step ({untraced_ms:.3f} ms)" if untraced_ms else ""
    per_event = [o * steps / max(1, n) for (steps, n, _), o in zip(counts, own)]
    return (f"{label}: the tracer's own time in CUDA calls and allocator events during the "
            f"timed steps: {own[0]:.2f} and {own[1]:.2f} us per step{share}, "
            f"{per_event[0]:.2f} and {per_event[1]:.2f} us per recorded allocation and its "
            f"free; "
            f"allocations the tracer recorded during the timed steps: "
            f"{counts[0][1]} in {counts[0][0]} steps, {counts[1][1]} in {counts[1][0]}; "
            f"intercepted CUDA calls in the whole run: {counts[0][2]} with {counts[0][0]} "
            f"timed steps, {counts[1][2]} with {counts[1][0]}")


def median_interval(processes, draws=2000):
    """The 95% interval of the median of processes' medians, each process a
    list of pair ratios: a bootstrap that draws processes, then pairs within
    each, so that both the spread between processes and within one count.
    Seeded: the same pairs give the same interval. `processes` is not empty."""
    pick = random.Random(29)
    figures = sorted(
        statistics.median(statistics.median(pick.choices(pairs, k=len(pairs)))
                          for pairs in pick.choices(processes, k=len(processes)))
        for _ in range(draws))
    return figures[int(0.025 * draws)], figures[int(0.975 * draws) - 1]


def pair_ratios(figures):
    """A --switch process's pairs' ratios, recorded / dropped, from its figures."""
    return [a / b for a, b in zip(figures["on_ms"], figures["off_ms"])]


def pooled(paths):
    """--pool: the in-process rows of several calls (their --raw files) read
    as one: per step and row, the median of all the processes' medians and
    its interval, drawn over all their processes, beside each call's own
    median of processes. A call's three processes give an interval about as
    wide as their own spread; the processes of several calls, on one machine
    or more, tell the tracer's cost from that spread. Runs nothing."""
    rows = {}
    for number, path in enumerate(paths, 1):
        try:
            with open(path, encoding="utf-8") as raw:
                lines = raw.read().splitlines()
        except (OSError, ValueError) as e:
            sys.exit(f"{path}: cannot read it ({getattr(e, 'strerror', None) or e})")
        for line_number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                figures = json.loads(line)
                ratios = pair_ratios(figures)
                key = (str(figures["model"]), str(figures["row"]))
                if not all(math.isfinite(r) and r > 0 for r in ratios):
                    raise ValueError
            except (ValueError, KeyError, TypeError, ZeroDivisionError):
                sys.exit(f"{path}:{line_number}: not a line of gpu_cost.py --raw")
            if not ratios:
                sys.exit(f"{path}:{line_number}: a process with no pairs")
            rows.setdefault(key, {}).setdefault(number, []).append(ratios)
    if not rows:
        sys.exit("--pool: the files hold no process")
    print(f"The in-process rows of {len(paths)} calls pooled: " +
          ", ".join(f"{n} {os.path.basename(p)}" for n, p in enumerate(paths, 1)))
    print("| step | row | processes | median of processes | its 95% interval (bootstrap: "
          "processes, then pairs) | each call's median of processes |")
    print("|---|---|---|---|---|---|")
    for (model, label), calls in rows.items():
        processes = [ratios for call in calls.values() for ratios in call]
        low, high = median_interval(processes)
        each = " ".join(f"{statistics.median(statistics.median(r) for r in call):.3f} ({n})"
                        for n, call in calls.items())
        print(f"| {model} | {label} | {len(processes)} | "
              f"{statistics.median(statistics.median(r) for r in processes):.3f}x | "
              f"{low:.3f}-{high:.3f}x | {each} |")


def switched_rows(args, traced, notes, model, steps):
    """A step (`model`) in one process, windows of `steps` steps with the tracker's events
    recorded and dropped in turn (torch_step_time.py --switch): per process,
    the median of its pairs' ratios, and the tracer's own time on the
    program's threads (two more processes, whose clock reads would count
    in the ratio) and the CPU time of its own thread (cumemtrace-rec) per
    step in the recorded windows. Then the same untraced, where the two
    windows of a pair differ by nothing."""
    library = os.path.join(os.path.abspath(args.build), "libcumemtrace_torch_bench.so")
    if not os.path.exists(library):
        if DRY_RUN:
            RUNS.append(["tools/build-torch-tracker.sh", "--bench", args.build])
        else:
            subprocess.run([os.path.join(ROOT, "tools", "build-torch-tracker.sh"), "--bench",
                            args.build], capture_output=True)
    if not os.path.exists(library) and not DRY_RUN:
        notes.append("in-process rows: tools/build-torch-tracker.sh --bench failed")
        return
    extra = ("--model", model, "--switch", "--pairs", str(args.pairs))
    print()
    print(f"| {model} step, one process: windows of {steps} steps, the tracker's events "
          "recorded / dropped | median of processes | its 95% interval (bootstrap: processes, "
          f"then pairs) | each process's median of {args.pairs} pairs | own time per step "
          "(program's threads; two more processes, CUMEMTRACE_SELF_TIME=1) | the tracer's thread per step | the program's threads' CPU "
          "per step, recorded minus dropped (median of processes) | their wait for a CPU per "
          "step, recorded minus dropped | a dropped window's step (median) |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = [("tensors traced", {}),
            ("tensors traced, no stacks (CUMEMTRACE_DEPTH=0 CUMEMTRACE_PYTHON=0)",
             {"CUMEMTRACE_DEPTH": "0", "CUMEMTRACE_PYTHON": "0"}),
            ("untraced: nothing switched (how alike two windows are)", None)]
    if "transformer-parts" not in args.only:
        del rows[1]
    started = time.monotonic()
    tensors = []
    for label, env in rows:
        ratios, pairs, own, thread, added, waited, step = [], [], [], [], [], [], []
        collected = {"on": [0, 0, 0], "off": [0, 0, 0]}
        for _ in range(args.rounds):
            tracer = {} if env is None else {**traced, **env, "CUMEMTRACE_TORCH_TRACKER": library}
            figures, _ = step_ms(tracer, steps, extra=extra, key=None)
            if figures and (env is None or figures.get("switched")):
                ratios.append(figures["ratio"])
                pairs.append(pair_ratios(figures))
                program = figures["program_threads_us_per_step"]
                added.append(program["on"] - program["off"])
                queued = figures.get("program_threads_waited_us_per_step")
                if queued:
                    waited.append(queued["on"] - queued["off"])
                step.append(statistics.median(figures["off_ms"]))
                if env is not None:
                    thread.append(figures["tracer_thread_us_per_step"])
                for side in ("on", "off"):
                    collected[side] = [a + b for a, b in
                                       zip(collected[side], figures["collections"][side])]
                if args.raw:
                    with open(args.raw, "a") as raw:
                        raw.write(json.dumps({"model": model, "row": label, **figures}) + "\n")
        # The own time takes two clock reads an event: apart, so the ratios
        # above are the tracer's as it is used.
        for _ in range(2 if env is not None else 0):
            result = {}

            def run(tracer):
                figures, _ = step_ms({**env, **tracer, "CUMEMTRACE_TORCH_TRACKER": library},
                                     steps, extra=extra, key=None)
                result.update(figures or {})
            report = self_timed_report(traced, run)
            if not report or not result.get("switched"):
                continue
            marks = report["marks"]["recent"]
            spent = sum(b["self_time_ns"] - a["self_time_ns"] for a, b in zip(marks, marks[1:])
                        if a["label"] == "switch on: start" and b["label"] == "switch on: end")
            own.append(spent / 1000 / (len(result["on_ms"]) * steps))
            windows = [b["sequence"] - a["sequence"] for a, b in zip(marks, marks[1:])
                       if a["label"] == "switch on: start" and b["label"] == "switch on: end"]
            if windows:
                tensors.append(sum(windows) / (len(windows) * steps))
        if not ratios:
            print(f"| {label} | failed | | | | | | | |")
            continue
        low, high = median_interval(pairs)
        print(f"| {label} | {statistics.median(ratios):.3f}x | {low:.3f}-{high:.3f}x | "
              + " ".join(f"{r:.3f}" for r in ratios) + " | "
              + (" ".join(f"{o:.0f}" for o in own) + " us" if own else "") + " | "
              + (" ".join(f"{t:.0f}" for t in thread) + " us" if thread else "") + " | "
              + f"{statistics.median(added):.0f} us | "
              + (f"{statistics.median(waited):.0f} us" if waited else "") + " | "
              + f"{statistics.median(step):.2f} ms |", flush=True)
        notes.append(f"{model} step, {label}: garbage collections (generations 0/1/2) "
                     f"started in the recorded windows "
                     + "/".join(map(str, collected["on"])) + ", in the dropped ones "
                     + "/".join(map(str, collected["off"])))
    if tensors:
        notes.append(f"{model} step: " + " and ".join(f"{t:.0f}" for t in tensors) +
                     " tensors a step (allocations recorded between the marks of the "
                     "recorded windows)")
    notes.append(f"{model} step, one process: the rows took {time.monotonic() - started:.0f} s")


def others(args, traced, emit, notes):
    """A CuPy loop and a cudaMalloc-heavy C program, untraced and traced."""
    if "cupy" in args.only and subprocess.run(
            [sys.executable, "-c", "import cupy"], capture_output=True).returncode == 0:
        figures = rounds_of(lambda on: step_ms(traced if on else {}, args.steps,
                                               script=CUPY_SCRIPT)[0], args.rounds)
        emit(row("CuPy loop (memory pool)", *figures))
    program = os.path.join(args.build, "gpu", "gpu_bench_alloc")
    if "c" in args.only and os.path.exists(program):
        figures = rounds_of(lambda on: pair_ns(args.build, traced if on else {}, 20000),
                            args.rounds)
        emit(row("C program: cudaMalloc(512)+cudaFree pairs, 32-frame stack, 1000 live "
                 "(us per pair)", *figures, unit=1000, digits=2))
        own = pair_self_ns(args.build, traced, 20000)
        if own is not None:
            notes.append(f"C program: the tracer's own time per pair (CUMEMTRACE_SELF_TIME): "
                         f"{own / 1000:.2f} us")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=60,
                        help="the in-process rows: pairs of windows per process (more: a "
                             "process's median moves less, the row takes longer)")
    parser.add_argument("--raw", default="",
                        help="the in-process rows: append each process's figures (every "
                             "window's time) to this file, one JSON line each")
    parser.add_argument("--pool", nargs="+", metavar="RAW",
                        help="run nothing: read these --raw files of earlier calls and "
                             "print their in-process rows pooled")
    parser.add_argument("--large-steps", type=int, default=100)
    parser.add_argument("--only",
                        default="caching,transformer,transformer-segments,expandable,"
                                "per-tensor,large,history,cupy,c",
                        help="which rows, comma-separated (default: all but parts: the "
                             "tracer's time per per-tensor step without stacks or Python "
                             "frames, and transformer-switch: the transformer step in one "
                             "process, its windows recorded and not in turn; with "
                             "transformer-parts, also with no stacks; transformer12-switch: "
                             "the same for a 12-layer encoder, about twice the tensors a "
                             "step; small-switch: the same for the small step)")
    parser.add_argument("--sanitizer-steps", type=int, default=0,
                        help="also time compute-sanitizer --leak-check full (0: not)")
    parser.add_argument("--pin", default="",
                        help="run every process on these CPUs (taskset -c LIST)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run nothing: list the processes the rows would run, one a line "
                             "(their figures then read 'failed'), and their count")
    args = parser.parse_args()
    if args.pool:
        pooled(args.pool)
        return
    global DRY_RUN
    DRY_RUN = args.dry_run
    args.only = set(args.only.split(","))
    if args.pin:
        PIN.extend(["taskset", "-c", args.pin])
    traced = {"LD_PRELOAD": os.path.join(os.path.abspath(args.build), "libcumemtrace.so"),
              "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_FORMAT": "none"}
    modes = [("caching", "caching (default), small step, tensors traced", {}, 1.05, ()),
             ("transformer", "caching (default), transformer step, tensors traced", {}, 1.05,
              ("--model", "transformer")),
             ("transformer-segments", "caching (default), transformer step, segments only "
              "(CUMEMTRACE_FRAMEWORKS=0)", {"CUMEMTRACE_FRAMEWORKS": "0"}, 1.01,
              ("--model", "transformer")),
             ("expandable", "expandable_segments, small step",
              {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, 1.01, ()),
             ("per-tensor", "per-tensor (NO_CUDA_MEMORY_CACHING), small step", PER_TENSOR,
              1.05, ()),
             ("large", "caching (default), large GPU-bound step", {}, 1.01, ("--model", "large"))]
    header = ("mode", "untraced ms/step (median)", "traced ms/step (median)",
              "ratio (median of rounds)", "rounds' ratios", "target", "",
              "untraced noise (slowest / fastest round)", "rounds: untraced / traced")
    print(f"NO_ASLR={' '.join(NO_ASLR) or 'no setarch'} PIN={' '.join(PIN) or 'none'} "
          f"rounds={args.rounds} steps={args.steps} large-steps={args.large_steps}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header), flush=True)

    def emit(cells):
        print("| " + " | ".join(cells) + " |", flush=True)

    notes = []
    for key, name, env, target, extra in modes:
        if key not in args.only:
            continue
        steps = args.large_steps if key in ("large", "transformer",
                                            "transformer-segments") else args.steps
        figures = rounds_of(lambda on: step_ms({**env, **traced} if on else env, steps,
                                               extra=extra)[0], args.rounds)
        emit(row(name, *figures, target=target))
        notes.append(activity(traced, env, name, steps, extra,
                              statistics.median(figures[0]) if figures[0] else None))
    # What the tracer's time per step is made of: per-tensor mode (small
    # step), and tensors traced in caching mode (transformer step).
    parts = [("per-tensor", "parts", PER_TENSOR, args.steps, ()),
             ("transformer, tensors traced", "transformer-parts", {}, args.large_steps,
              ("--model", "transformer"))]
    for name, key, env, steps, extra in parts:
        if key not in args.only:
            continue
        for label, switches in (("native stack and Python frames", {}),
                                ("16 native frames (CUMEMTRACE_DEPTH=16)", {"CUMEMTRACE_DEPTH": "16"}),
                                ("no Python frames (CUMEMTRACE_PYTHON=0)", {"CUMEMTRACE_PYTHON": "0"}),
                                ("no stacks at all (CUMEMTRACE_DEPTH=0)", {"CUMEMTRACE_DEPTH": "0"})):
            _, start, end, failure = timed_steps(traced, {**env, **switches}, steps, extra)
            if failure:
                notes.append(f"{name}, {label}: {failure}")
                continue
            own = (end['self_time_ns'] - start['self_time_ns']) / steps / 1000
            allocations = (end['sequence'] - start['sequence']) / steps
            notes.append(f"{name}, {label}: the tracer's own time {own:.2f} us per step, "
                         f"{allocations:.0f} allocations per step, "
                         f"{own / max(1, allocations):.3f} us per allocation and its free")
    # The reference: PyTorch's own recorder, same rounds ("history" for all three).
    for how, words in (("default", "its defaults"),
                       ("python", 'context="alloc", stacks="python"'),
                       ("none", "context=None")):
        if "history" in args.only or f"history-{how}" in args.only:
            figures = rounds_of(lambda on: step_ms({}, args.large_steps, extra=(
                "--model", "transformer", *(("--history", how) if on else ())))[0],
                                max(2, args.rounds // 2))
            emit(row(f"transformer step, torch memory history with {words} (reference; "
                     "'traced' = recording)", *figures))
    if "transformer-switch" in args.only:
        switched_rows(args, traced, notes, "transformer", max(1, args.large_steps // 20))
    if "transformer12-switch" in args.only:
        # Its step takes about twice the 6-layer one's: windows of as long.
        switched_rows(args, traced, notes, "transformer12", max(1, args.large_steps // 40))
    if "small-switch" in args.only:
        switched_rows(args, traced, notes, "small", max(1, args.steps // 20))
    others(args, traced, emit, notes)
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if args.sanitizer_steps and os.path.exists(sanitizer):
        plain, _ = step_ms({}, args.sanitizer_steps)
        slow, status = step_ms({}, args.sanitizer_steps,
                               prefix=(sanitizer, "--leak-check", "full"), timeout=120)
        emit((f"caching, compute-sanitizer --leak-check full ({args.sanitizer_steps} steps, "
              "reference)", f"{plain:.3f}" if plain else "-", f"{slow:.3f}" if slow else "-",
              f"{slow / plain:.1f}x" if slow and plain else f"no figure ({status})",
              "", "", "", "", ""))
    print()
    for note in notes:
        print(note)
    if DRY_RUN:
        print(f"dry run: {len(RUNS)} processes")
        for command in RUNS:
            print("  " + " ".join(command))


if __name__ == "__main__":
    main()
