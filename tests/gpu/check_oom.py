"""Check the OOM report of tests/gpu/torch_oom.py: python3 check_oom.py REPORT.json

The failing request's stack must name OOM-LINE of torch_oom.py; the two
stacks holding the most live bytes (a cache's segments aside: its tensors are
recorded) must name OOM-LINE and MODEL-LINE; the failed calls must count as
one OOM (failures.ooms, recent[].oom_number). Prints
what it found; exits 1 if any of that is missing.
"""
import json
import os
import sys

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_oom.py")
lines = {}
with open(script) as handle:
    for number, text in enumerate(handle, 1):
        for marker in ("OOM-LINE", "MODEL-LINE"):
            if marker in text:
                lines[marker] = number

report = json.load(open(sys.argv[1]))
frames = {f["id"]: f for f in report["frames"]}
stacks = {s["id"]: s for s in report["stacks"]}


def first_line_in_script(stack_id):
    for frame_id in stacks[stack_id]["frames"]:
        f = frames[frame_id]
        if f.get("python") and f.get("file", "").endswith("torch_oom.py"):
            return f["line"], f["function"]
    return None, None


failures = 0
event = report["event"]
line, function = first_line_in_script(event["stack"])
print(f"failing request: {event['size'] >> 20} MiB, verdict {event['verdict']}, "
      f"retry {event['retry']}, at torch_oom.py:{line} in {function}")
if line != lines["OOM-LINE"]:
    print(f"  expected line {lines['OOM-LINE']} (OOM-LINE)")
    failures += 1
# Where the cache's tensors are recorded, its segments are the cache's view,
# charged to whichever line first needed one: the holders are the tensors.
segments = {s["id"] for s in report["stacks"] if s.get("cache_segment")}
top = sorted((g for g in report["live"] if g["stack"] not in segments),
             key=lambda g: -g["bytes"])[:2]
named = set()
for group in top:
    line, function = first_line_in_script(group["stack"])
    named.add(line)
    print(f"holding {group['bytes'] / 2**30:.1f} GiB in {group['blocks']} blocks: "
          f"torch_oom.py:{line} in {function}")
if named != {lines["OOM-LINE"], lines["MODEL-LINE"]}:
    print(f"  expected lines {lines['OOM-LINE']} and {lines['MODEL-LINE']}")
    failures += 1
# One OOM, however many failed calls made it (the driver's refusal, its
# retry, PyTorch giving up): the tracer numbers them as one.
calls = [(f["kind"], f.get("oom_number")) for f in report["failures"]["recent"] if f["oom"]]
print(f"OOMs counted: {report['failures'].get('ooms')}, its failed calls: {calls}")
if report["failures"].get("ooms") != 1 or {n for _, n in calls} != {1}:
    print("  expected one OOM, every failed call numbered 1")
    failures += 1
print("check_oom:", "ok" if not failures else "FAILED")
sys.exit(1 if failures else 0)
