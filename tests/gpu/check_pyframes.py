"""Python frames of GPU allocations made without the GIL, on a GPU: run
tests/gpu/pyframes.py under the tracer with CuPy and with PyTorch and check
that each kept block names its line.

    python3 tests/gpu/check_pyframes.py --build build [--out DIR]

cupy: the 40 MiB array names CUPY-LINE in keep_cupy, the script's innermost
line (CuPy's own frames come first); the 24 MiB
one, allocated by a Python thread, THREAD-LINE in keep_in_thread. torch: the
48 MiB tensor names TORCH-LINE in keep_torch; the 16 MiB gradient, made by
the autograd engine's thread, which runs no Python, names the main thread's
BACKWARD-LINE after the marker frame "[main thread, at that moment]". Prints
PASS or FAIL per check, with the interpreter's version; exits 1 on a FAIL.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "pyframes.py")
MiB = 1 << 20
MARKER = "[main thread, at that moment]"


def marked():
    with open(SCRIPT) as handle:
        return {text.split("# ")[-1].strip(): number for number, text in enumerate(handle, 1)
                if text.rstrip().endswith("-LINE")}


def python_frames(report, size):
    """The Python frames, innermost first, of each live group of `size` bytes."""
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: s for s in report["stacks"]}
    return [[frames[i] for i in stacks[g["stack"]]["frames"] if frames[i]["python"]]
            for g in report["live"] if g["bytes"] == size and g["stack"] in stacks]


def run(which, build, out):
    base = os.path.join(out, which)
    for suffix in (".json", ".txt"):
        if os.path.exists(base + suffix):
            os.unlink(base + suffix)
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libcumemtrace.so"),
               CUMEMTRACE_OUTPUT=base, CUMEMTRACE_FORMAT="text,json")
    done = subprocess.run([sys.executable, SCRIPT, which], env=env, capture_output=True,
                          text=True, timeout=300)
    try:
        with open(base + ".json") as handle:
            return done, json.load(handle)
    except (OSError, ValueError):
        return done, None


def verdict(name, passed, detail):
    print(f"{'PASS' if passed else 'FAIL'}: {name}: {detail}")
    return passed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--out", default="/tmp/cumemtrace-pyframes")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lines = marked()
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    ok = True
    expected = {"cupy": [(40 * MiB, "keep_cupy", "CUPY-LINE", False),
                         (24 * MiB, "keep_in_thread", "THREAD-LINE", False)],
                "torch": [(48 * MiB, "keep_torch", "TORCH-LINE", False),
                          (16 * MiB, "backward", "BACKWARD-LINE", True)]}
    for which, checks in expected.items():
        done, report = run(which, os.path.abspath(args.build), args.out)
        if not verdict(f"{which} ran under the tracer", done.returncode == 0 and report,
                       f"exit {done.returncode}; {done.stdout.strip()} {done.stderr[-400:]!r}"):
            ok = False
            continue
        said = [l for l in done.stderr.splitlines() if l.startswith("cumemtrace: CPython")]
        ok &= verdict(f"{which}: no word against the frame layout", not said, said)
        for size, function, mark, borrowed in checks:
            found = python_frames(report, size)
            # The frameworks' own Python frames (cupy.zeros, torch's
            # backward()) come first: the line to name is the script's
            # innermost, after the marker when the frames are borrowed.
            def own(f):
                return bool(f.get("file")) and os.path.exists(f["file"]) and \
                    os.path.samefile(f["file"], SCRIPT)
            seen = [([(MARKER, 0)] if chain and chain[0]["function"] == MARKER else []) +
                    [(f["function"].split(".")[-1], f["line"]) for f in chain if own(f)][:2]
                    for chain in found]
            want = (function, lines[mark])
            if borrowed:
                good = any(chain[:2] == [(MARKER, 0), want] for chain in seen)
            else:
                good = any(chain[:1] == [want] for chain in seen)
            ok &= verdict(f"{which}: {size // MiB} MiB names {function} at line {lines[mark]}"
                          + (" after the main-thread marker" if borrowed else ""), good, seen)
    print("all PASS" if ok else "some FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
