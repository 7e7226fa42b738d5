#!/usr/bin/env python3
"""Microbenchmarks of the tracer on the CUDA simulator, traced vs untraced.

    python3 bench/run.py [--build build] [--quick] [--only TABLES] [--repeat N]

Each row runs bench_alloc (bench/alloc.c) without and with the tracer, one
after the other in this run, on the simulator's O(1) benchmark mode
(SIMCUDA_BUMP=1), and prints the time per allocate+free pair, the time the
tracer adds, and the ratio. Then: throughput with N threads against 1
(--threads, default 2 and 8; the untraced column is the simulator's own
ceiling), the cost of the Python frames (bench/python_alloc.py), CuPy's
blocks and JAX's sweeps on the stand-in packages (bench/frameworks.py), PyTorch's
tensors through the stand-in caching allocator (bench/torch_tensors.py), the report
time and bytes per block with 1k/100k/1M live blocks, a
run of 10M allocations (first and last tenth, to show no slow-down), and the
crash dump time with 100k live blocks, and what a report at each OOM costs
(bench/oom.c). Targets are those of
docs/PERFORMANCE.md. On a busy machine, --repeat N keeps the best of N runs.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def simulator_env(args, tracer_env):
    """The environment of a run on the simulator; tracer_env None: untraced."""
    env = dict(os.environ, SIMCUDA_BUMP="1", LD_LIBRARY_PATH=os.path.join(args.build, "sim"),
               CUMEMTRACE_QUIET="1", CUMEMTRACE_FORMAT="json",
               CUMEMTRACE_OUTPUT=os.path.join(args.tmp, "exit-%p"))
    env.pop("LD_PRELOAD", None)
    env.pop("BENCH_SITE_PER_THREAD", None)
    if tracer_env is not None:
        env.update(tracer_env, LD_PRELOAD=os.path.join(args.build, "libcumemtrace.so"))
    return env


def best_of(args, command, env):
    """The figures (JSON lines on stdout) of the fastest of --repeat runs of `command`."""
    runs = []
    for _ in range(args.repeat):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            sys.exit(f"{os.path.basename(command[0])} failed: {' '.join(command)}\n"
                     f"{done.stderr[-2000:]}")
        figures = {}
        for line in done.stdout.splitlines():
            figures.update(json.loads(line))
        runs.append(figures)
    return min(runs, key=lambda figures: figures["ns_per_pair"])


def bench(args, threads, depth, live, pairs, traced, extra=(), site_per_thread=False):
    """The best (fastest) of --repeat runs of bench_alloc."""
    env = simulator_env(args, {} if traced else None)
    if site_per_thread:
        env["BENCH_SITE_PER_THREAD"] = "1"
    command = [os.path.join(args.build, "bench", "bench_alloc"), str(threads), str(depth),
               str(live), str(pairs), *extra]
    return best_of(args, command, env)


def python_pairs(args, frames, pairs, tracer_env):
    """ns per pair of bench/python_alloc.py, best of --repeat; tracer_env None: untraced."""
    if tracer_env is not None:
        tracer_env = dict(tracer_env, CUMEMTRACE_FORMAT="none")
    command = [sys.executable, os.path.join(ROOT, "bench", "python_alloc.py"), str(frames),
               str(pairs)]
    return best_of(args, command, simulator_env(args, tracer_env))["ns_per_pair"]


def python_table(args, pairs):
    """The cost of the Python frames: pairs made through ctypes from nested Python
    functions, untraced, traced with CUMEMTRACE_PYTHON=0, and traced."""
    print(f"Python frames: pairs from Python through ctypes ({sys.version.split()[0]}), "
          "native depth 32")
    rows = []
    for frames in (5, 20, 50):
        off = python_pairs(args, frames, pairs, None)
        native = python_pairs(args, frames, pairs, {"CUMEMTRACE_PYTHON": "0"})
        python = python_pairs(args, frames, pairs, {})
        rows.append((frames, f"{off / 1000:.3f}", f"{native / 1000:.3f}", f"{python / 1000:.3f}",
                     f"{(python - native) / 1000:.3f}", f"{(python - off) / 1000:.3f}"))
    table(("Python frames", "untraced us/pair", "traced, CUMEMTRACE_PYTHON=0",
           "traced", "added by the Python frames, us", "added in all, us"), rows)


def frameworks_run(args, mode, count, tracer_env):
    """bench/frameworks.py's figures, and its stderr; tracer_env None: untraced."""
    env = simulator_env(args, tracer_env)
    env["PYTHONPATH"] = os.path.join(ROOT, "tests", "sim", "python")
    env["BENCH_DIR"] = args.tmp
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [sys.executable, os.path.join(ROOT, "bench", "frameworks.py"), mode, str(count)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"bench/frameworks.py failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def frameworks_table(args, pairs):
    """CuPy: a block made and dropped through the pool, untraced, with the
    driver view only (CUMEMTRACE_FRAMEWORKS=0: no CUDA call, nothing to
    record) and with our allocator in. JAX: a sweep of N live arrays, the
    first (every array new) and the next (every array known)."""
    print(f"CuPy's blocks (stand-in pool, {sys.version.split()[0]}): a 1 KiB array made and "
          "dropped")
    off = min(frameworks_run(args, "cupy", pairs, None)[0]["ns_per_pair"]
              for _ in range(args.repeat))
    driver = min(frameworks_run(args, "cupy", pairs, {"CUMEMTRACE_FRAMEWORKS": "0"})[0]
                 ["ns_per_pair"] for _ in range(args.repeat))
    on = min(frameworks_run(args, "cupy", pairs, {})[0]["ns_per_pair"]
             for _ in range(args.repeat))
    table(("untraced us/pair", "driver view only", "blocks traced", "added by the blocks, us"),
          [(f"{off / 1000:.3f}", f"{driver / 1000:.3f}", f"{on / 1000:.3f}",
            f"{(on - driver) / 1000:.3f}")])
    print("JAX's sweeps (stand-in arrays: their methods are Python, jaxlib's are C++)")
    rows = []
    for count in (1000, 10000):
        best = None
        for _ in range(args.repeat):
            figures, err = frameworks_run(args, "jax", count, {"CUMEMTRACE_DEBUG": "1",
                                                               "CUMEMTRACE_QUIET": "0"})
            costs = [float(l.split(" swept in ")[1].split(" ms")[0]) for l in err.splitlines()
                     if f"JAX: {count} live arrays swept" in l]
            if len(costs) >= 2 and (best is None or costs[1] < best[1]):
                best = (costs[0], costs[1], figures["python_ns_per_array"])
        first, again, python = best
        rows.append((count, f"{first:.2f}", f"{again:.2f}", f"{python * count / 1e6:.2f}",
                     f"{(again - python * count / 1e6) * 1e6 / count:.0f}"))
    table(("live arrays", "first sweep, ms", "next sweep, ms",
           "the same calls from Python, ms", "ours per known array, ns"), rows)


def torch_run(args, frames, steps, tracer_env, extra=()):
    """bench/torch_tensors.py's ns per tensor (`extra`: its options), best of --repeat,
    and the tracer's own ns per tensor between its marks (CUMEMTRACE_SELF_TIME=1);
    tracer_env None: untraced."""
    sim = os.path.join(args.build, "sim")
    best = None
    for attempt in range(args.repeat):
        env = simulator_env(args, None if tracer_env is None else
                            dict(tracer_env, CUMEMTRACE_SELF_TIME="1",
                                 CUMEMTRACE_TORCH_TRACKER=os.path.join(
                                     sim, "torch", "libcumemtrace_torch.so")))
        env["LD_LIBRARY_PATH"] = f"{sim}:{os.path.join(sim, 'torch', 'lib')}"
        # A name of its own each run: the tracer writes beside a report it
        # finds there rather than over it, and the marks read would be another run's.
        output = os.path.join(args.tmp, f"torch-{frames}{''.join(extra)}-{attempt}")
        env["CUMEMTRACE_OUTPUT"] = output
        command = [sys.executable, os.path.join(ROOT, "bench", "torch_tensors.py"), str(frames),
                   str(steps), *extra]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            sys.exit(f"bench/torch_tensors.py failed: {done.stderr[-2000:]}")
        figures = json.loads(done.stdout.splitlines()[-1])
        own = None
        if tracer_env is not None:
            marks = json.load(open(output + ".json"))["marks"]["recent"]
            times = {m["label"]: m["self_time_ns"] for m in marks}
            own = (times["tensors: end"] - times["tensors: start"]) / figures["tensors"]
        if best is None or figures["ns_per_tensor"] < best[0]:
            best = (figures["ns_per_tensor"], own)
    return best


def callgrind_events(out, less=None):
    """A callgrind output file's totals by event (Ir, D1mr, ...), less the inclusive
    cost of the function whose name starts with `less` (callgrind_annotate)."""
    with open(out) as handle:
        lines = handle.read().splitlines()
    names = next(line.split()[1:] for line in lines if line.startswith("events:"))
    totals = dict(zip(names, (int(v) for v in next(
        line.split()[1:] for line in lines if line.startswith(("summary:", "totals:"))))))
    if less:
        annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--show-percs=no",
                                    "--threshold=100", out], capture_output=True, text=True).stdout
        for line in annotated.splitlines():
            fields = line.split()
            if len(fields) > len(names) and f":{less}" in fields[len(names)]:
                for name, value in zip(names, fields):
                    totals[name] -= 0 if value == "." else int(value.replace(",", ""))
                break
    return totals


def callgrind_tensors(args, env, options, name, arguments):
    """bench/torch_tensors.py `arguments` on the simulator under callgrind
    --cache-sim=yes with `options`, in environment `env`, its output kept in
    args.tmp as `name`: the tensors it made and callgrind's totals by event,
    less the queue's entering (enter_pending, torch_instructions says why)."""
    sim = os.path.join(args.build, "sim")
    env["LD_LIBRARY_PATH"] = f"{sim}:{os.path.join(sim, 'torch', 'lib')}"
    out = os.path.join(args.tmp, name)
    command = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *options,
               f"--callgrind-out-file={out}", sys.executable,
               os.path.join(ROOT, "bench", "torch_tensors.py"), *arguments]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"callgrind failed: {done.stderr[-2000:]}")
    return (json.loads(done.stdout.splitlines()[-1])["tensors"],
            callgrind_events(out, "enter_pending"))


def torch_instructions(args, frames, functions, extra=()):
    """Per tensor inside `functions` and what they call (callgrind --cache-sim, with
    --toggle-collect), from the difference between runs of 1 and 3 timed steps (the
    warm-up and the start-up drop out): {"Ir": instructions, "D1": first-level data
    misses, reads and writes, "LL": last-level ones, "I1": lines of code fetched into a
    4 KiB first-level instruction cache}, less the queue's entering where
    the program's thread did it (enter_pending): under callgrind, which runs one
    thread at a time, it finds the queue long far more often than with a core of
    its own. None without valgrind."""
    if not shutil.which("valgrind"):
        return None
    sim = os.path.join(args.build, "sim")
    totals = []
    for steps in (1, 3):
        env = simulator_env(args, {"CUMEMTRACE_FORMAT": "none", "CUMEMTRACE_TORCH_TRACKER":
                                   os.path.join(sim, "torch", "libcumemtrace_torch.so")})
        # A first-level instruction cache of 4 KiB, where the callback's loops
        # stay but nothing else does: its misses count the lines of code a
        # tensor runs, each of which PyTorch and the interpreter evict
        # between two tensors on a real core.
        tensors, events = callgrind_tensors(
            args, env, ["--I1=4096,4,64", *(f"--toggle-collect={f}" for f in functions)],
            f"callgrind-{frames}{''.join(extra)}-{functions[0]}-{steps}",
            [str(frames), str(steps), *extra])
        totals.append((tensors, {"Ir": events["Ir"], "D1": events["D1mr"] + events["D1mw"],
                                 "LL": events["DLmr"] + events["DLmw"], "I1": events["I1mr"]}))
    tensors = totals[1][0] - totals[0][0]
    return {name: (totals[1][1][name] - totals[0][1][name]) / tensors for name in totals[0][1]}


def torch_whole_program(args, frames):
    """What tracing adds to the whole program per tensor, the model's own work
    between tensors included (bench/torch_tensors.py --between 24): callgrind over
    everything the program's threads run, traced less untraced, from the difference
    between runs of 1 and 5 timed steps, with a core's first-level caches (32 KiB of
    code, 48 KiB of data) and 2 MiB behind them. {"Ir": instructions, "I1": the
    first-level instruction misses}: those of the tracer's code, and those of the
    program's code that the tracer's evicted. The queue's entering is left out, as in
    torch_instructions: the tracer's thread, which does it on a core of its own, and the
    program's when it found the queue long (callgrind runs one thread at a time,
    through one cache). None without valgrind."""
    if not shutil.which("valgrind"):
        return None
    sim = os.path.join(args.build, "sim")
    figures = {}
    for traced in (False, True):
        totals = []
        for steps in (1, 5):
            # No growth samples: one every second of a run that callgrind makes
            # fifty times longer would land on the tensors' count.
            env = simulator_env(args, {"CUMEMTRACE_FORMAT": "none", "CUMEMTRACE_SAMPLE_MS": "0",
                                       "CUMEMTRACE_TORCH_TRACKER":
                                       os.path.join(sim, "torch", "libcumemtrace_torch.so")}
                                if traced else None)
            env["PYTHONHASHSEED"] = "0"     # the interpreter's own work the same run to run
            tensors, events = callgrind_tensors(
                args, env, ["--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64"],
                f"callgrind-whole-{frames}-{int(traced)}-{steps}",
                [str(frames), str(steps), "--between", "24"])
            totals.append((tensors, events["Ir"], events["I1mr"]))
        tensors = totals[1][0] - totals[0][0]
        figures[traced] = [(totals[1][i] - totals[0][i]) / tensors for i in (1, 2)]
    return {"Ir": figures[True][0] - figures[False][0], "I1": figures[True][1] - figures[False][1]}


def torch_table(args, steps):
    """Tensors through the stand-in for PyTorch's caching allocator, from a model-like
    Python call depth: untraced, traced, and the tracer's own time per tensor."""
    print(f"PyTorch's tensors (stand-in allocator, {sys.version.split()[0]}): a tensor "
          "allocated and freed from Python, the outer frames the same from tensor to tensor")
    rows = []
    for frames, extra in ((8, ()), (24, ()), (24, ("--backward",))):
        off, _ = torch_run(args, frames, steps, None, extra)
        on, own = torch_run(args, frames, steps, {}, extra)
        every = torch_instructions(args, frames, ("torch_event",), extra)
        # The Python frames: read as a key (python_frames_key), and walked in
        # full (python_capture) for a key not seen lately, or by a library
        # from before the key.
        walk = torch_instructions(args, frames, ("python_frames_key", "python_capture"), extra)
        whole = torch_whole_program(args, frames) if frames == 24 and not extra else None
        rows.append((f"{frames}, backward nodes" if extra else frames,
                     f"{off:.0f}", f"{on:.0f}", f"{on - off:.0f}", f"{own:.0f}",
                     *(("no valgrind",) * 4 if every is None else
                       (f"{every['Ir']:.0f}", f"{every['I1']:.1f}", f"{every['D1']:.1f}",
                        f"{every['LL']:.1f}")),
                     "no valgrind" if walk is None else f"{walk['Ir']:.0f}",
                     *(("",) * 2 if whole is None else
                       (f"{whole['Ir']:.0f}", f"{whole['I1']:.1f}"))))
    table(("Python frames", "untraced ns/tensor", "traced ns/tensor", "added ns",
           "the tracer's own ns/tensor (CUMEMTRACE_SELF_TIME=1)",
           "instructions per tensor (callgrind)", "lines of code it runs",
           "its D1 misses", "its LL misses",
           "of the instructions, the Python frames",
           "whole program, model work between tensors: instructions added",
           "first-level instruction misses added (32 KiB)"), rows)
    print("(A tensor is its allocation and its free. Traced runs read the clock for "
          "CUMEMTRACE_SELF_TIME; callgrind runs do not. Misses: callgrind's cache model "
          "(--cache-sim=yes), reads and writes, on the program's thread in the tracer's "
          "callback, the queue's entering there left out. Lines of code: the misses of a 4 KiB "
          "first-level instruction cache, which keeps the callback's loops but not what it "
          "ran at the last tensor, as a core's 32 KiB keeps little of it once PyTorch and "
          "the interpreter ran between two tensors. Whole program (24 frames): callgrind "
          "over all the program runs but the tracer's thread, 24 objects of a megabyte's "
          "pool touched before each tensor, traced less untraced: the tracer's own misses "
          "and those of the program's code it evicted. Backward nodes: the same tensors made "
          "by nodes the stand-in's autograd engine runs on its own thread, whose stacks "
          "borrow the main thread's 24 frames (bench/torch_tensors.py --backward).)")
    print()


def tensors_run(args, steps, tracer_env, callgrind=()):
    """bench_tensors' figures (bench/tensors.c); tracer_env None: untraced. With
    `callgrind` (functions' names), under callgrind counting only inside them: the
    instructions, in "instructions"."""
    sim = os.path.join(args.build, "sim")
    env = simulator_env(args, None if tracer_env is None else dict(
        tracer_env, CUMEMTRACE_FORMAT="none", CUMEMTRACE_TORCH_TRACKER=os.path.join(
            sim, "torch", "libcumemtrace_torch.so")))
    env["LD_LIBRARY_PATH"] = f"{sim}:{os.path.join(sim, 'torch', 'lib')}"
    command = [os.path.join(args.build, "bench", "bench_tensors"), str(steps)]
    out = os.path.join(args.tmp, "callgrind-tensors")
    if callgrind:
        # Some fifty times slower under callgrind: as much less work between
        # events keeps their pace, so the tracer's thread sees batches as long.
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   *(f"--toggle-collect={function}" for function in callgrind), *command,
                   "460", "80"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"bench_tensors failed: {done.stderr[-2000:]}")
    figures = json.loads(done.stdout.splitlines()[-1])
    if callgrind:
        figures["instructions"] = callgrind_events(out)["Ir"]
    return figures


def tensors_instructions(args, *functions):
    """Instructions per event inside `functions` (callgrind, none of them calling
    another), from the difference between runs of 2 and 6 timed steps; None
    without valgrind."""
    if not shutil.which("valgrind"):
        return None
    runs = [tensors_run(args, steps, {"CUMEMTRACE_DEPTH": "12"}, callgrind=functions)
            for steps in (2, 6)]
    return ((runs[1]["instructions"] - runs[0]["instructions"]) /
            (runs[1]["events"] - runs[0]["events"]))


def tensors_table(args, steps):
    """PyTorch's tensor events driven from C (bench/tensors.c): the program thread's
    added CPU per event and the tracer thread's CPU per 1,000 events, best of --repeat
    (each the least of its runs), and instructions per event: all of the tracer's
    (the callback, the tracer's thread, the marks' entering of what is queued) and,
    of them, entering the queue, on whichever thread does it."""
    print("PyTorch's tensor events from C (stand-in allocator, bench/tensors.c, "
          "CUMEMTRACE_DEPTH=12): a step of 613 tensors, a third kept to its end")
    off = [tensors_run(args, steps, None) for _ in range(args.repeat)]
    on = [tensors_run(args, steps, {"CUMEMTRACE_DEPTH": "12"}) for _ in range(args.repeat)]
    untraced = min(f["program_cpu_ns_per_event"] for f in off)
    traced = min(f["program_cpu_ns_per_event"] for f in on)
    thread = min(f["tracer_cpu_ns_per_1000_events"] for f in on)
    wakeups = min(f["tracer_wakeups_per_1000_events"] for f in on)
    everything = tensors_instructions(args, "torch_event", "tracker_apply", "cumemtrace_mark")
    # The function that enters the queue, by its name before and after issue 29.
    entering = tensors_instructions(args, "apply_pending*", "enter_pending*")
    table(("program thread CPU ns/event untraced", "traced", "added",
           "tracer thread CPU us per 1,000 events", "its wake-ups per 1,000 events",
           "instructions per event, all of the tracer's", "of them entering the queue"),
          [(f"{untraced:.0f}", f"{traced:.0f}", f"{traced - untraced:.0f}", f"{thread / 1000:.1f}",
            f"{wakeups:.2f}",
            "no valgrind" if everything is None else f"{everything:.0f}",
            "no valgrind" if entering is None else f"{entering:.0f}")])
    print("(An event is a tensor's allocation or its free. CPU time per thread, so the "
          "machine's other work moves it less than the wall time. The queue is entered by "
          "the tracer's thread, a program thread that finds it long, or a mark: counted "
          "wherever it runs.)")
    print()


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    print()


def process_run(args, command, tracer_env, bump=True):
    """Wall and CPU (user + system) milliseconds of one whole run of `command`,
    its JSON figures if it printed any, and its peak resident size
    (max_rss_kib); tracer_env None: untraced. bump False: the simulator's
    allocator, which reuses addresses, rather than its bump range, which a
    long run of allocations would use up."""
    env = simulator_env(args, tracer_env)
    if not bump:
        env.pop("SIMCUDA_BUMP")
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    out, err = child.stdout.read(), child.stderr.read()
    child.stdout.close()
    child.stderr.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {err[-2000:]}")
    figures = json.loads(out.splitlines()[0]) if out.strip() else {}
    figures["max_rss_kib"] = usage.ru_maxrss
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, figures


def spread(values, unit):
    """min / median / max of values, as one cell."""
    values = sorted(values)
    return (f"{values[0]:.1f} / {values[len(values) // 2]:.1f} / {values[-1]:.1f}" +
            (f" {unit}" if unit else ""))


def process_table(args):
    """Whole processes: a short one (start-up and exit only) and forked children
    that each allocate once beside four allocating threads, untraced and traced
    (JSON report), runs interleaved. Wall time moves with the machine's load;
    a short process's CPU time (its user + system) much less."""
    program = os.path.join(args.build, "bench", "bench_process")
    runs = max(args.repeat, 1) * 10
    print(f"A short process: one cudaMalloc+cudaFree, then exit ({runs} runs each, "
          "interleaved; min / median / max)")
    short = {"untraced": ([], []), "traced": ([], [])}
    for _ in range(runs):
        for name, tracer_env in (("untraced", None), ("traced", {})):
            wall, cpu, _ = process_run(args, [program, "short"], tracer_env)
            short[name][0].append(wall)
            short[name][1].append(cpu)
    table(("", "wall ms", "CPU ms (user + system)"),
          [(name, spread(walls, ""), spread(cpus, "")) for name, (walls, cpus) in short.items()])
    added = [t - u for t, u in zip(sorted(short["traced"][1]), sorted(short["untraced"][1]))]
    print(f"added by the tracer (target: <= 10 ms): wall {min(short['traced'][0]) - min(short['untraced'][0]):.1f} ms "
          f"between the fastest runs; CPU {sorted(added)[len(added) // 2]:.1f} ms, median")
    print()
    children, rounds = (10, 3) if args.quick else (50, max(args.repeat, 3))
    print(f"Forked children: {children} forked one after another beside four allocating "
          f"threads, each allocating once and exiting ({rounds} rounds each, interleaved)")
    per_child = {"untraced": ([], []), "traced": ([], [])}
    for _ in range(rounds):
        for name, tracer_env in (("untraced", None), ("traced", {})):
            _, _, figures = process_run(args, [program, "forks", str(children)], tracer_env,
                                        bump=False)
            per_child[name][0].append(figures["ms_per_child"])
            per_child[name][1].append(figures["cpu_ms_per_child"])
    table(("", "wall ms per child, fork to wait", "a child's CPU ms (user + system)"),
          [(name, spread(walls, ""), spread(cpus, ""))
           for name, (walls, cpus) in per_child.items()])
    traced, untraced = per_child["traced"], per_child["untraced"]
    print(f"a traced child's added cost (target: <= 20 ms): wall {min(traced[0]) - min(untraced[0]):.1f} ms "
          f"between the fastest rounds; CPU {min(traced[1]) - min(untraced[1]):.1f} ms")
    print()


def bytes_table(args):
    """Memory per live block: the peak resident size of bench_alloc holding a
    million blocks, traced minus untraced, over the blocks (the record, its
    slot, and whatever else the tracer keeps per block)."""
    live = 100_000 if args.quick else 1_000_000
    print(f"Bytes per live block at {live:,} live blocks (target: <= 48): peak resident size, "
          "traced - untraced")
    command = [os.path.join(args.build, "bench", "bench_alloc"), "1", "30", str(live), "1000"]
    rss = {"untraced": [], "traced": []}
    for _ in range(max(args.repeat, 3)):
        for name, tracer_env in (("untraced", None), ("traced", {"CUMEMTRACE_FORMAT": "none"})):
            rss[name].append(process_run(args, command, tracer_env)[2]["max_rss_kib"])
    per_block = [(t - u) * 1024 / live for t, u in zip(rss["traced"], rss["untraced"])]
    table(("untraced peak RSS, MiB", "traced peak RSS, MiB", "bytes per live block"),
          [(spread([k / 1024 for k in rss["untraced"]], ""),
            spread([k / 1024 for k in rss["traced"]], ""), spread(per_block, ""))])


def callgrind_instructions(args, command, env):
    """Instructions callgrind counts in a whole run of `command`."""
    out = os.path.join(args.tmp, "callgrind.out")
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                           *command], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"callgrind failed: {done.stderr[-2000:]}")
    return callgrind_events(out)["Ir"]


def record_table(args, pairs):
    """The record path: an allocate+free pair from 30 frames, one thread. Time
    (best of --repeat) and, steadier on a shared machine, the instructions
    the tracer adds per pair (callgrind, the difference between runs of two
    lengths, so start-up and exit drop out)."""
    print("The record path: a cudaMalloc+cudaFree pair at depth 30, 1 thread "
          "(target: <= 0.8 us added)")
    off = bench(args, 1, 30, 1000, pairs, False)
    on = bench(args, 1, 30, 1000, pairs, True)
    added = "no valgrind"
    if shutil.which("valgrind"):
        counts = {}
        for name, tracer_env in (("untraced", None), ("traced", {"CUMEMTRACE_FORMAT": "none"})):
            env = simulator_env(args, tracer_env)
            runs = [callgrind_instructions(args, [os.path.join(args.build, "bench", "bench_alloc"),
                                                  "1", "30", "1000", str(n)], env)
                    for n in (10_000, 30_000)]
            counts[name] = (runs[1] - runs[0]) / 20_000
        added = f"{counts['traced'] - counts['untraced']:.0f}"
    table(("untraced us/pair", "traced us/pair", "added us", "instructions added per pair"),
          [(f"{off['ns_per_pair'] / 1000:.3f}", f"{on['ns_per_pair'] / 1000:.3f}",
            f"{(on['ns_per_pair'] - off['ns_per_pair']) / 1000:.3f}", added)])


def sites_table(args, counts, pairs):
    """Threads that each allocate from a call site of their own (one of bench_alloc's
    eight cudaMalloc call sites, depth 32): no stack is shared between threads,
    unlike the main table, where every thread allocates from the same site."""
    print("Threads with a call site each (depth 32, call site = thread number % 8)")
    rows, single = [], None
    for threads in [1] + counts:
        off = bench(args, threads, 32, 1000, pairs, False, site_per_thread=True)
        on = bench(args, threads, 32, 1000, pairs, True, site_per_thread=True)
        if single is None:
            single = (off["pairs_per_s"], on["pairs_per_s"])
        rows.append((threads, f"{off['ns_per_pair'] / 1000:.3f}", f"{on['ns_per_pair'] / 1000:.3f}",
                     f"{off['pairs_per_s'] / 1e6:.2f}", f"{on['pairs_per_s'] / 1e6:.2f}",
                     f"{off['pairs_per_s'] / single[0]:.2f}x", f"{on['pairs_per_s'] / single[1]:.2f}x"))
    table(("threads", "untraced us/pair", "traced us/pair", "untraced M pairs/s",
           "traced M pairs/s", "untraced vs 1 thread", "traced vs 1 thread"), rows)
    print()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--quick", action="store_true", help="fewer pairs, no 1M/10M rows")
    parser.add_argument("--threads", default="2,8",
                        help="thread counts to compare with 1 (default: 2,8)")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs per figure")
    parser.add_argument("--only", default="process,record,bytes,sites,threads,python,frameworks,"
                        "torch,tensors,live,long,crash,oom",
                        help="which tables, comma-separated (default: all): process (a short "
                             "process, forked children), record (the record path at depth "
                             "30: time and instructions), bytes (resident bytes per live "
                             "block), sites (threads "
                             "with a call site each), threads (added time and scaling), "
                             "python (the Python frames' cost), frameworks (CuPy's "
                             "blocks, JAX's sweeps), torch (PyTorch's tensors, stand-in), tensors (the "
                             "same from C: the program's and the tracer's threads), live (report time and "
                             "bytes per block), long (10M allocations), crash (crash dump), "
                             "oom (a report at each OOM)")
    args = parser.parse_args()
    counts = [int(n) for n in args.threads.split(",") if n.strip()]
    only = set(args.only.split(","))
    args.build = os.path.abspath(args.build)
    with tempfile.TemporaryDirectory(prefix="cumemtrace-bench-") as args.tmp:
        tables(args, counts, only)


def tables(args, counts, only):
    """The tables `only` names, their files in args.tmp."""
    pairs = 50_000 if args.quick else 200_000
    print(f"machine: {os.cpu_count()} CPUs; {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    print()

    if "process" in only:
        process_table(args)
    if "record" in only:
        record_table(args, pairs)
    if "bytes" in only:
        bytes_table(args)
    if "sites" in only:
        sites_table(args, counts, pairs)
    if "threads" in only:
        threads_table(args, counts, pairs)
    if "python" in only:
        python_table(args, pairs // 4)
    if "frameworks" in only:
        frameworks_table(args, pairs // 4)
    if "torch" in only:
        torch_table(args, 40 if args.quick else 200)
    if "tensors" in only:
        tensors_table(args, 8 if args.quick else 30)
    if "live" in only:
        live_table(args, pairs)
    if "long" in only and not args.quick:
        long_table(args)
    if "crash" in only:
        crash_table(args)
    if "oom" in only:
        oom_table(args)


def threads_table(args, counts, pairs):
    print("Added time per cudaMalloc+cudaFree pair (target: <= 1 us at depth 32, 1 thread)")
    rows, single = [], {}
    for threads in [1] + counts:
        for depth in (8, 32, 64):
            off = bench(args, threads, depth, 1000, pairs, False)
            on = bench(args, threads, depth, 1000, pairs, True)
            added = (on["ns_per_pair"] - off["ns_per_pair"]) / 1000
            rows.append((threads, depth, f"{off['ns_per_pair'] / 1000:.3f}",
                         f"{on['ns_per_pair'] / 1000:.3f}", f"{added:.3f}",
                         f"{on['ns_per_pair'] / off['ns_per_pair']:.1f}x",
                         f"{off['pairs_per_s'] / 1e6:.2f}", f"{on['pairs_per_s'] / 1e6:.2f}"))
            if threads == 1:
                single[depth] = (off["pairs_per_s"], on["pairs_per_s"])
            else:
                rows[-1] = rows[-1] + (f"{off['pairs_per_s'] / single[depth][0]:.2f}x",
                                       f"{on['pairs_per_s'] / single[depth][1]:.2f}x")
    rows = [r if len(r) == 10 else r + ("", "") for r in rows]
    table(("threads", "native depth", "untraced us/pair", "traced us/pair", "added us",
           "ratio", "untraced M pairs/s", "traced M pairs/s", "untraced vs 1 thread",
           "traced vs 1 thread (target at 8: >= 4x)"), rows)
    print(f"(us/pair is per thread; M pairs/s is all threads together. {os.cpu_count()} CPUs: "
          "a thread count above that cannot scale.)")
    print()


def live_table(args, pairs):
    print("Live blocks: report time (target: <= 1 s at 1M) and memory per block (target: <= 96 B)")
    rows = []
    for live in (1000, 100_000) + (() if args.quick else (1_000_000,)):
        path = os.path.join(args.tmp, f"snap-{live}")
        on = bench(args, 1, 32, live, pairs, True, ("snapshot", path))
        off = bench(args, 1, 32, live, pairs, False)
        report = json.load(open(path + ".json"))
        tracer = report["tracer"]
        per_block = tracer["registry_bytes"] / max(1, live)
        rows.append((f"{live:,}", f"{off['ns_per_pair'] / 1000:.3f}",
                     f"{on['ns_per_pair'] / 1000:.3f}", f"{on['snapshot_ms']:.0f} ms",
                     f"{per_block:.0f} B", f"{tracer['stack_table_bytes'] / 1024:.0f} KiB"))
    table(("live blocks", "untraced us/pair", "traced us/pair", "snapshot report",
           "registry bytes / live block", "stack table"), rows)



def long_table(args):
    print("A long run: 10M allocations (no slow-down: last tenth ~ first tenth)")
    on = bench(args, 1, 32, 1000, 10_000_000, True)
    table(("pairs", "traced us/pair", "first tenth", "last tenth"),
          [("10,000,000", f"{on['ns_per_pair'] / 1000:.3f}",
            f"{on['first_tenth_ms']:.0f} ms", f"{on['last_tenth_ms']:.0f} ms")])


def crash_table(args):
    print("Crash dump with 100k live blocks (target: <= 100 ms)")
    on = bench(args, 1, 32, 100_000, 1000, True, ("crash",))
    dumps = glob.glob(os.path.join(args.tmp, "*.dump"))
    size = os.path.getsize(dumps[0]) if dumps else 0
    table(("live blocks", "signal to program's handler, dump included", "dump size"),
          [("100,000", f"{on['crash_dump_ms']:.1f} ms", f"{size / 2**20:.1f} MiB")])


def oom_table(args):
    print("A report at every OOM (CUMEMTRACE_OOM=every, JSON; the one before rewritten too)")
    rows = []
    for name, tracer_env in (("untraced", None), ("traced", {"CUMEMTRACE_OOM": "every"})):
        env = simulator_env(args, tracer_env)
        env.pop("SIMCUDA_BUMP")         # OOMs come from the allocator, not the bump range
        runs = []
        for _ in range(args.repeat):
            done = subprocess.run([os.path.join(args.build, "bench", "bench_oom"), "200"],
                                  env=env, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                sys.exit(f"bench_oom failed: {done.stderr[-2000:]}")
            runs.append(json.loads(done.stdout)["ms_per_oom"])
        rows.append((name, "200", f"{min(runs):.3f} ms"))
    table(("", "OOMs", "per OOM"), rows)


if __name__ == "__main__":
    main()
