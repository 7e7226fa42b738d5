"""Run tests/gpu/default_mode.py's scenarios under the tracer, in the
frameworks' default modes, and check each verdict against the markers.

    python3 tests/gpu/check_default_mode.py --build build [--out DIR] [--repeat N]
                                            [SCENARIO ...]

For each scenario: the report must name every LEAK line among the growing
sites and no TEMP or HELD line there, no TEMP line among the sites that grew,
then were freed near the end; HELD lines are held at the end, not
leaked; an OOM scenario's report must carry the expected verdict and name
its OOM line. A scenario that runs backward (training_mix, retain_graph,
dataset_on_gpu) must hold at its end tensors made by the autograd engine's
threads (the gradients), each named by its backward node's apply() alone,
none by unwound frames; the row counts both.
CuPy's and JAX's scenarios must have their blocks traced one
by one (the cache's view "blocks"), and their kept arrays (LEAK, returned
into a module global) held at the end, not leaked. Prints one table row per
scenario, with the framework's own figures (printed by the program) beside
the tracer's; exits 1 on any miss. --repeat N runs the whole set N times in
a row (the growth verdict must not depend on the run) and ends with each
scenario's count of runs without a miss.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import report_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "default_mode.py")
OOM_VERDICT = {"fragmentation_oom": "cache_fragmented", "exhaustion_oom": "tensors_exhausted"}
CACHE_KIND = {"cupy_mix": "cupy_block", "jax_kept": "jax_array"}
BACKWARD = {"training_mix", "retain_graph", "dataset_on_gpu"}   # they run backward


def markers():
    found = {}
    with open(SCRIPT) as handle:
        for number, text in enumerate(handle, 1):
            for tag in ("LEAK", "HELD", "TEMP", "OOM"):
                key = f"# {tag}-"
                if key in text:
                    scenario = text.split(key)[1].split()[0]
                    found.setdefault((tag, scenario), set()).add(number)
    return found


def script_lines(report, stack_id):
    return {f["line"] for f in report_frames.script_frames(report, stack_id, "default_mode.py")}


def site_line(report, stack_id):
    return report_frames.site_line(report, stack_id, "default_mode.py")


def engine_stacks(report):
    """Stacks of the live tensors made by the autograd engine's threads (they
    borrow the main thread's frames, after a marker frame): (named by their
    backward node alone, unwound). The driver allocations those threads make
    (cuBLAS's workspaces, cache segments) are not tensors: always unwound."""
    frames = {f["id"]: f for f in report["frames"]}
    tensors = {g["stack"] for g in report["live"] if g["kind"] == "torch_tensor"}
    named = unwound = 0
    for stack in report["stacks"]:
        if stack["id"] not in tensors:
            continue
        chain = [frames[i] for i in stack["frames"]]
        marker = [i for i, f in enumerate(chain)
                  if f.get("python") and f.get("function") == "[main thread, at that moment]"]
        if not marker:
            continue
        native = chain[:marker[0]]
        if len(native) == 1 and "::apply" in (native[0].get("function") or ""):
            named += 1
        else:
            unwound += 1
    return named, unwound


def run(scenario, build, out):
    base = os.path.join(out, scenario)
    for name in glob.glob(base + ".*") + glob.glob(base + "-oom*"):
        os.unlink(name)
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
               CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json", CUMEMTRACE_QUIET="1",
               CUMEMTRACE_OOM="every", PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, SCRIPT, scenario], env=env, capture_output=True,
                          text=True, timeout=400)
    printed = {}
    for line in done.stdout.splitlines():
        for prefix in ("torch: ", "cupy: ", "jax: "):
            if line.startswith(prefix):
                printed = json.loads(line[len(prefix):])
    return done, base, printed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-default-mode")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    marks = markers()
    scenarios = args.scenarios or sorted({s for _, s in marks})
    right = {scenario: 0 for scenario in scenarios}
    for _ in range(args.repeat):
        for scenario, ok in check_all(args, marks, scenarios).items():
            right[scenario] += ok
    if args.repeat > 1:
        print("runs without a miss, of " + str(args.repeat) + ": " +
              ", ".join(f"{scenario} {count}" for scenario, count in right.items()))
    return 0 if all(count == args.repeat for count in right.values()) else 1


def check_all(args, marks, scenarios):
    """One run of every scenario, its table printed: {scenario: no miss}."""
    answers = {}
    print("| scenario | verdict | growing lines (LEAK expected) | held at end | OOM verdict | "
          "tracer: blocks / reserved / holes | engine threads' stacks: by node / unwound | "
          "framework's own figures |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario in scenarios:
        done, base, printed = run(scenario, os.path.abspath(args.build), args.out)
        misses = []
        try:
            report = json.load(open(base + ".json"))
        except OSError:
            print(f"| {scenario} | no report (exit {done.returncode}) | {done.stderr[-300:]!r} |")
            answers[scenario] = False
            continue
        leak = marks.get(("LEAK", scenario), set())
        temp = marks.get(("TEMP", scenario), set())
        held = marks.get(("HELD", scenario), set())
        growing = report["growth"]["growing"]
        grown_lines = set()
        for g in growing:
            grown_lines |= {site_line(report, g["stack"])}
        for line in leak - grown_lines:
            misses.append(f"LEAK line {line} not growing")
        for line in (temp | held) & grown_lines:
            misses.append(f"line {line} (TEMP/HELD) called growing")
        released_lines = {site_line(report, g["stack"]) for g in report["growth"].get("released", [])}
        for line in temp & released_lines:
            misses.append(f"line {line} (TEMP) called grown, then freed near the end")
        held_lines = {site_line(report, g["stack"]) for g in report.get("held_at_end", [])}
        segments = {s["id"] for s in report["stacks"] if s.get("cache_segment")}
        leaked_lines = {site_line(report, g["stack"]) for g in report["live"]
                        if g["stack"] not in segments and not g.get("held_at_end")}
        if held - (held_lines | leaked_lines) and scenario not in OOM_VERDICT:
            misses.append(f"HELD lines {sorted(held - held_lines)} not held at the end")
        for line in held & leaked_lines:
            misses.append(f"HELD line {line} called leaked")
        oom_cell = "-"
        if scenario in OOM_VERDICT:
            oom = None
            for name in sorted(glob.glob(base + "-oom*.json")):
                candidate = json.load(open(name))
                if candidate["event"]["kind"] == "torch_tensor" and site_line(
                        candidate, candidate["event"]["stack"]) in marks.get(("OOM", scenario), ()):
                    oom = candidate
            try:
                if oom is None:
                    raise OSError
                event = oom["event"]
                oom_cell = f"{event.get('verdict')} at line {site_line(oom, event['stack'])}"
                if event.get("verdict") != OOM_VERDICT[scenario]:
                    misses.append(f"OOM verdict {event.get('verdict')}, expected {OOM_VERDICT[scenario]}")
                if site_line(oom, event["stack"]) not in marks.get(("OOM", scenario), set()):
                    misses.append("OOM line not named")
                if "cache" not in event and not oom.get("torch"):
                    misses.append("PyTorch's figures missing from the OOM report")
            except OSError:
                misses.append("no OOM report")
        if scenario in CACHE_KIND:
            views = [c for c in report.get("caches", []) if c["kind"] == CACHE_KIND[scenario]]
            if not views or views[0]["view"] != "blocks":
                misses.append(f"{CACHE_KIND[scenario]}s not traced one by one: "
                              f"{views[0]['why'] if views else 'the framework was not seen'}")
            for line in leak - held_lines:
                misses.append(f"LEAK line {line} (kept to the end) not held at the end")
            for line in leak & leaked_lines:
                misses.append(f"LEAK line {line} (kept to the end) called leaked")
        named, unwound = engine_stacks(report)
        if scenario in BACKWARD and (unwound or not named):
            misses.append(f"tensors of the autograd engine: {named} named by their backward "
                          f"node, {unwound} unwound")
        view = "-"
        for cache in report.get("caches", []):
            if cache["kind"] == CACHE_KIND.get(scenario, "torch_tensor"):
                view = cache["view"]
                for d in cache.get("devices", []):
                    view = (f"{cache['view']}: {d['block_bytes'] >> 20} MiB / "
                            f"{d['reserved_bytes'] >> 20} MiB / {d['hole_bytes'] >> 20} MiB "
                            f"in {d['holes']}")
        own = ", ".join(f"{k.split('.')[0]} {v >> 20 if isinstance(v, int) else v} MiB"
                        for k, v in printed.items() if k != "num_ooms" and v is not None) or "-"
        verdict = "ok" if not misses else "MISS: " + "; ".join(misses)
        answers[scenario] = not misses
        print(f"| {scenario} | {verdict} | {sorted(l for l in grown_lines if l)} ({sorted(leak)}) | "
              f"{sorted(l for l in held_lines if l)} | {oom_cell} | {view} | {named} / {unwound} | "
              f"{own} |", flush=True)
    return answers


if __name__ == "__main__":
    sys.exit(main())
