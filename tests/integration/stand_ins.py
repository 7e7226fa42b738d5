"""What the tests of the frameworks' caches share (test_torch_*.py,
test_cupy.py, test_jax.py, test_holders.py, test_end_state.py): their
scenarios run on the simulator, and the marked lines read back from the
reports.

PyTorch is played by the stand-in libc10_cuda.so (tests/sim/c10): it carves
tensors out of cached segments, frees into its cache, and calls trace
trackers as PyTorch's caching allocator does. CuPy and JAX are played by
stand-in Python packages (tests/sim/python): CuPy's pool and allocator,
JAX's preallocated region and jax.live_arrays(). torch_blocks.py,
cupy_blocks.py and jax_blocks.py run the scenarios; their lines are marked
LEAK, FREED, HELD, TEMP and OOM, and every verdict is checked against those
marks: the growing sites must be the LEAK lines and no TEMP or HELD line, the
sites that grew, then were freed near the end the FREED lines; what
module globals held goes to held_at_end, not leaked; an OOM says why in the
cache's terms."""

import glob
import json
import os
import sys

import pytest

import support
from browser import find_browser
from support import check


MiB = 1 << 20


def script(name="torch_blocks.py"):
    return os.path.join(support.SOURCE, "tests", "integration", name)


def marked_lines(tag, scenario, name="torch_blocks.py"):
    """Line numbers of the script `name` carrying `# TAG-scenario`."""
    with open(script(name)) as handle:
        return {n for n, text in enumerate(handle, 1) if f"# {tag}-{scenario}" in text}


def torch_env(**extra):
    sim = os.path.join(support.BUILD, "sim")
    env = {"LD_LIBRARY_PATH": f"{sim}:{sim}/torch/lib",
           "CUMEMTRACE_TORCH_TRACKER": f"{sim}/torch/libcumemtrace_torch.so",
           "CUMEMTRACE_SAMPLE_MS": "40", "CUMEMTRACE_QUIET": "1"}
    env.update(extra)
    return env


def skip_without_torch():
    """Skips the test where the stand-in for PyTorch was not built."""
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib", "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")


def run_scenario(traced, file, name, args, env, expect_rc=0, preload=True, python=sys.executable):
    """Run one scenario of the script `file` under `python`: (stdout, stderr,
    {reason: [reports]}, the figures the framework or its stand-in printed)."""
    out, err, reports, _ = traced.run(python, [script(file), name, *args], env=env,
                                      expect_rc=expect_rc, preload=preload)
    by_reason = {}
    for report in reports:
        by_reason.setdefault(report["reason"], []).append(report)
    figures = {}
    for line in out.splitlines():
        if line.startswith("stats: "):
            figures = json.loads(line[len("stats: "):])
    return out, err, by_reason, figures


def scenario(traced, name, args=(), expect_rc=0, **env):
    """Run one scenario of torch_blocks.py (run_scenario's answer)."""
    skip_without_torch()
    return run_scenario(traced, "torch_blocks.py", name, args, torch_env(**env), expect_rc)


def format_bytes(count):
    """As the reports write bytes (src/report/output.c's format_bytes)."""
    value, unit = float(count), 0
    while value >= 1024 and unit < 4:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{count} B"
    return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f} {['B', 'KiB', 'MiB', 'GiB', 'TiB'][unit]}"


def site_line(report, stack_id, name="torch_blocks.py"):
    """The innermost line of the script `name` in a stack, skipping the
    Tensor class's own (the line a person would look at)."""
    frames = {f["id"]: f for f in report["frames"]}
    stack = next((s for s in report["stacks"] if s["id"] == stack_id), None)
    for i in (stack or {}).get("frames", []):
        f = frames[i]
        if f.get("python") and (f.get("file") or "").endswith(name) and \
                not (f.get("function") or "").endswith("__init__"):
            return f["line"]
    return None


def growing_lines(report, name="torch_blocks.py", verdict="growing"):
    """The lines of growth's `verdict` list: growing, or released."""
    return {site_line(report, g["stack"], name) for g in report["growth"][verdict]}


def cache(report, kind="torch_tensor"):
    found = [c for c in report.get("caches", []) if c["kind"] == kind]
    return found[0] if found else None


def cache_device(report, kind, device=0):
    view = cache(report, kind)
    found = [d for d in (view or {}).get("devices", []) if d["device"] == device]
    return found[0] if found else {}


def lines_of(report, groups, file):
    return {site_line(report, g["stack"], file) for g in groups}


def check_held_by_line(report, kind, scenario_name, size, blocks, name="torch_blocks.py"):
    """One group of `kind` held at the end: `size` bytes in `blocks` blocks,
    allocated at the HELD line of `scenario_name` in script `name`."""
    held = [g for g in report["held_at_end"] if g["kind"] == kind]
    check(len(held) == 1 and held[0]["bytes"] == size and held[0]["blocks"] == blocks and
          site_line(report, held[0]["stack"], name) in marked_lines("HELD", scenario_name, name),
          f"{blocks} block(s), {size} bytes held at the end by the HELD line: {held}")


def check_verdicts(report, name, file="torch_blocks.py"):
    """Growing: every LEAK line and no TEMP, HELD or FREED line; grew, then
    freed near the end (released): every FREED line and no other."""
    grown, released = growing_lines(report, file), growing_lines(report, file, "released")
    leaks, freed = marked_lines("LEAK", name, file), marked_lines("FREED", name, file)
    innocent = marked_lines("TEMP", name, file) | marked_lines("HELD", name, file)
    check(leaks <= grown, f"{name}: LEAK lines {sorted(leaks)} growing: {sorted(grown - {None})}")
    check(not ((innocent | freed) & grown), f"{name}: TEMP/HELD/FREED lines called growing: "
                                            f"{sorted((innocent | freed) & grown)}")
    check(freed <= released, f"{name}: FREED lines {sorted(freed)} released: "
                             f"{sorted(released - {None})}")
    check(not ((innocent | leaks) & released), f"{name}: TEMP/HELD/LEAK lines called released: "
                                               f"{sorted((innocent | leaks) & released)}")


def oom_reports(directory):
    found = []
    for name in sorted(glob.glob(os.path.join(directory, "report-*-oom*.json"))):
        with open(name) as handle:
            found.append(json.load(handle))
    return found


# Programs of a test's own that drive torch_blocks.py (its path in argv[1]):
# the stand-in imported and initialised; one CUDA call of the program's own.
IMPORT_TORCH_BLOCKS = ("sys.path.insert(0, os.path.dirname(sys.argv[1]))\n"
                       "sys.argv[1:] = ['training_mix']\n"
                       "import torch_blocks as t\n"
                       "t.c10.c10sim_init(1)\n")


CUDA_CALL = ("p = ctypes.c_void_p()\n"
             "assert cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0\n"
             "cudart.cudaFree(p)\n")


def run_program(traced, name, program, **env):
    """Write `program` to build/tests/NAME and run it traced, torch_blocks.py's
    path its argument, torch_env(**env) its environment: run's answer."""
    path = os.path.join(support.BUILD, "tests", name)
    with open(path, "w") as handle:
        handle.write(program)
    return traced.run(sys.executable, [path, script()], env=torch_env(**env))


CUPY, JAX = "cupy_blocks.py", "jax_blocks.py"


def python_scenario(traced, file, name, args=(), expect_rc=0, preload=True, **extra):
    """Run one scenario of cupy_blocks.py or jax_blocks.py, with the stand-in
    packages on PYTHONPATH (run_scenario's answer)."""
    env = {"LD_LIBRARY_PATH": os.path.join(support.BUILD, "sim"),
           "PYTHONPATH": os.path.join(support.SOURCE, "tests", "sim", "python"),
           "CUMEMTRACE_SAMPLE_MS": "40", "CUMEMTRACE_QUIET": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}     # nothing written into the source tree
    env.update(extra)
    return run_scenario(traced, file, name, args, env, expect_rc, preload)


def no_browser():
    """True where Chromium is not found, which fails the test unless
    CUMEMTRACE_TEST_NO_BROWSER=1 says to do without it."""
    if find_browser():
        return False
    check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
          "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
    return True
