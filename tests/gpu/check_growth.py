"""Run tests/gpu/growth_shapes.py's shapes under the tracer, default settings,
and check the growth verdicts against the markers.

    python3 tests/gpu/check_growth.py --build build [--out DIR] [--repeat N] [SHAPE ...]

A shape with LEAK lines must have every one of them growing, and no TEMP or
HELD line growing; a shape without (the steady loops) must have nothing
growing at all. Prints one row per run (the growing lines, the findings'
basis, the observations) and, with --repeat, each shape's count of runs
without a miss; exits 1 on any miss.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import report_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "growth_shapes.py")


def markers():
    found = {}
    with open(SCRIPT) as handle:
        for number, text in enumerate(handle, 1):
            for tag in ("LEAK", "HELD", "TEMP"):
                key = f"# {tag}-"
                if key in text:
                    found.setdefault((tag, text.split(key)[1].split()[0]), set()).add(number)
    return found


def check(shape, build, out, marks):
    base = os.path.join(out, shape)
    for name in glob.glob(base + "*"):
        os.unlink(name)
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
               CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json", CUMEMTRACE_QUIET="1",
               PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, SCRIPT, shape], env=env, capture_output=True,
                          text=True, timeout=300)
    try:
        report = json.load(open(base + ".json"))
    except OSError:
        return [f"no report (exit {done.returncode}): {done.stderr[-300:]!r}"], "-", "-"
    leak = marks.get(("LEAK", shape), set())
    innocent = marks.get(("TEMP", shape), set()) | marks.get(("HELD", shape), set())
    growing = {report_frames.site_line(report, g["stack"], "growth_shapes.py")
               for g in report["growth"]["growing"]}
    misses = [f"LEAK line {line} not growing" for line in sorted(leak - growing)]
    misses += [f"line {line} (TEMP/HELD) growing" for line in sorted(innocent & growing)]
    if not leak and growing:
        misses.append(f"a steady loop with growing sites: {sorted(l or 0 for l in growing)}")
    basis = "; ".join(f["text"] for f in report.get("findings", []) if f["verdict"] == "growing")
    steps = " ".join(l for l in done.stdout.splitlines() if l.startswith(("steps:", "requests:")))
    growth = report["growth"]
    return misses, f"{sorted(l or 0 for l in growing)} {basis or '-'}", \
        f"{steps}; {growth['samples']} observations, every {growth.get('every')}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-growth")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("shapes", nargs="*")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    marks = markers()
    shapes = args.shapes or sorted({s for _, s in marks})
    right = {shape: 0 for shape in shapes}
    print("| shape | verdict | growing lines, findings' basis | run |")
    print("|---|---|---|---|")
    for _ in range(args.repeat):
        for shape in shapes:
            misses, growing, run = check(shape, os.path.abspath(args.build), args.out, marks)
            right[shape] += not misses
            print(f"| {shape} | {'ok' if not misses else 'MISS: ' + '; '.join(misses)} | "
                  f"{growing} | {run} |", flush=True)
    print("runs without a miss, of " + str(args.repeat) + ": " +
          ", ".join(f"{shape} {count}" for shape, count in right.items()))
    return 0 if all(count == args.repeat for count in right.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
