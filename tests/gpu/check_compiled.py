"""Run tests/gpu/compiled_keep.py (a torch.compile'd loop that keeps its
outputs) under the tracer in PyTorch's default caching mode and check that the
growing site is the script's line that calls the compiled model (LEAK marker),
never a frame of Inductor's or Triton's generated code, FX's <eval_with_key>
modules or Dynamo, in the JSON and in the text summary.

    python3 tests/gpu/check_compiled.py --build build [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "compiled_keep.py")
GENERATED = ("torchinductor_", "<eval_with_key>", "/_dynamo/", "triton")


def marker(tag):
    with open(SCRIPT) as handle:
        return {n for n, text in enumerate(handle, 1) if f"# {tag}-compiled" in text}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-compiled")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, "compiled")
    env = dict(os.environ, LD_PRELOAD=os.path.join(os.path.abspath(args.build), "libcumemtrace.so"),
               CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json",
               CUMEMTRACE_SAMPLE_MS="100", PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True,
                          timeout=500)
    print(done.stdout[-500:])
    summary = done.stderr
    report = json.load(open(base + ".json"))
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: s for s in report["stacks"]}
    failures = 0

    def site(stack_id):
        stack = stacks[stack_id]
        if stack.get("site") is None:
            return None
        return frames[stack["frames"][stack["site"]]]

    leak, temp = marker("LEAK"), marker("TEMP")
    growing = report["growth"]["growing"] if report.get("growth") else []
    sites = [site(g["stack"]) for g in growing]
    named = [(s.get("file"), s.get("line")) for s in sites if s]
    print("growing sites:", named)
    on_leak = [s for s in sites if s and s.get("file", "").endswith("compiled_keep.py")
               and s.get("line") in leak]
    generated = [s for s in sites if s and any(g in (s.get("file") or "") for g in GENERATED)]
    on_temp = [s for s in sites if s and s.get("file", "").endswith("compiled_keep.py")
               and s.get("line") in temp]
    for ok, what in ((bool(on_leak), f"the LEAK line {sorted(leak)} is a growing site"),
                     (not generated, "no generated-code frame is a growing site"),
                     (not on_temp, "the TEMP line is not growing")):
        print(("PASS " if ok else "FAIL ") + what)
        failures += not ok
    views = [c for c in report.get("caches", []) if c["kind"] == "torch_tensor"]
    ok = bool(views) and views[0]["view"] == "blocks"
    print(("PASS " if ok else "FAIL ") + "PyTorch's tensors recorded one by one "
          f"(view {views[0]['view'] if views else 'absent'})")
    failures += not ok
    with open(base + ".stderr", "w") as handle:
        handle.write(summary)
    lines = summary.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("==== cumemtrace exit report")]
    ends = [i for i, l in enumerate(lines) if l.startswith("==== end of cumemtrace report")]
    first = lines[starts[-1]:ends[-1] + 1] if starts and ends else []
    hit = next((i for i, line in enumerate(first, 1) if "compiled_keep.py:" + str(min(leak)) in line), None)
    ok = hit is not None and hit <= 15 and 0 < len(first) <= 60
    print(("PASS " if ok else "FAIL ") + f"the summary names the LEAK line at its line {hit} "
          f"(of {len(first)}, at most 60)")
    failures += not ok
    # A generated frame may show among an entry's frames, as any framework
    # frame does; never as a site (an entry's "at ..." line, a finding).
    bad = [line for line in first if (line.lstrip().startswith(("at ", "- growing at ")))
           and any(g in line for g in GENERATED)]
    ok = not bad
    print(("PASS " if ok else "FAIL ") + "the summary names no generated-code frame as a site"
          + ("" if ok else f": {bad[:2]}"))
    failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
