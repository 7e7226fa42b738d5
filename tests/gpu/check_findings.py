"""Findings first, on a GPU with PyTorch in its default caching mode.

    python3 tests/gpu/check_findings.py --build build [--out DIR]

tests/gpu/default_mode.py training_mix (a training loop with one leak)
under the tracer: its exit summary on stderr is at most 60 lines and its
findings name a LEAK line growing within the summary's first 15 lines; the
JSON's findings start with that growing site. (A torch.compile'd loop:
tests/gpu/check_compiled.py.)

Prints PASS or FAIL per check and the files it wrote (text, JSON, HTML)
under --out; exits 1 on any FAIL. The HTML page's top is what
tools/html-screenshot.sh pictures (the last line printed says how).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    failures += 0 if ok else 1


def leak_lines(script):
    with open(script) as handle:
        return {n for n, text in enumerate(handle, 1) if "# LEAK-" in text}


def traced(build, out, name, argv):
    """Run argv under the tracer; (the summary's lines, the exit report)."""
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
               CUMEMTRACE_OUTPUT=os.path.join(out, name), CUMEMTRACE_FORMAT="text,json,html",
               CUMEMTRACE_QUIET="0",
               # training_mix's loop lasts about 4 s: at the default 1 s it
               # gets 4 growth samples, too few to call a site growing (as
               # check_default_mode.py, which runs it too, samples 10 a second;
               # check_compiled.py's 16-second loop runs with the defaults)
               CUMEMTRACE_SAMPLE_MS="100")
    done = subprocess.run([sys.executable] + argv, env=env, capture_output=True, text=True)
    with open(os.path.join(out, name + ".stderr"), "w") as handle:
        handle.write(done.stderr)
    lines = done.stderr.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("==== cumemtrace exit report")]
    ends = [i for i, l in enumerate(lines) if l.startswith("==== end of cumemtrace report")]
    summary = lines[starts[-1]:ends[-1] + 1] if starts and ends else []
    report = None
    if os.path.exists(os.path.join(out, name + ".json")):
        with open(os.path.join(out, name + ".json")) as handle:
            report = json.load(handle)
    check(done.returncode == 0 and report is not None,
          f"{name}: ran (rc {done.returncode}) and wrote {name}.json {done.stderr[-300:] if done.returncode else ''}")
    return summary, report


def growing_at(summary, script, lines):
    """Index in the summary of its first findings line naming one of `lines`."""
    for i, text in enumerate(summary):
        if text.startswith("   - growing at ") and any(f"{script}:{n} in " in text for n in lines):
            return i
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="/tmp/cumemtrace-findings")
    args = parser.parse_args()
    build, out = os.path.abspath(args.build), os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    script = os.path.join(ROOT, "tests", "gpu", "default_mode.py")
    summary, report = traced(build, out, "findings-train", [script, "training_mix"])
    print(f"     summary: {len(summary)} lines", flush=True)
    check(0 < len(summary) <= 60, f"training_mix: the summary is at most 60 lines ({len(summary)})")
    at = growing_at(summary, script, leak_lines(script))
    check(at is not None and at < 15, f"training_mix: a LEAK line growing in the first 15 lines (line {at})")
    first = (report or {}).get("findings", [{}])[0]
    check(first.get("verdict") == "growing" and script in (first.get("site") or ""),
          f"training_mix: the JSON's first finding is that growing site: {first}")
    print("\n".join("     | " + l for l in summary[:20]), flush=True)

    print(f"files: {out}", flush=True)
    print(f"screenshot (here or after copying {out} back): tools/html-screenshot.sh "
          f"{out}/findings-train.json docs/html-report-findings.png '' 760 '{ROOT}/'", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
