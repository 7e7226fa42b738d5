"""PyTorch's tracker library (stand_ins.py's stand-in allocator): attached
when it may be, refused in one line when not (another backend, another
version, none built), and the program's output unchanged either way."""

import os
import shutil
import sys

import support
from stand_ins import (script, torch_env, scenario, cache, check_verdicts, IMPORT_TORCH_BLOCKS,
                       CUDA_CALL, run_program)
from support import check, device_counters


def test_torch_tracker_refused(traced):
    """An allocator that refuses trackers (the cudaMallocAsync backend): one
    line, the segment view, the program's output unchanged."""
    out, err, reports, _ = scenario(traced, "held_at_end", C10SIM_BACKEND="cudaMallocAsync")
    lines = [l for l in err.splitlines() if "not traced one by one" in l]
    check(len(lines) == 1 and "trace trackers" in lines[0], f"one line: {err[-400:]!r}")
    view = cache(reports["exit"][0])
    check(view and view["view"] == "segments", f"the segment view: {view}")
    untraced, _, _, _ = traced.run(sys.executable, [script(), "held_at_end"], env=torch_env(),
                                   preload=False)
    check(out == untraced, f"output unchanged: {out!r} vs {untraced!r}")


def test_torch_tracker_missing(traced):
    _, err, reports, _ = scenario(traced, "held_at_end", CUMEMTRACE_TORCH_TRACKER="/nonexistent.so")
    check(sum("was not built" in l for l in err.splitlines()) == 1, f"one line: {err[-300:]!r}")
    check(cache(reports["exit"][0])["view"] == "segments", "the segment view")


def test_torch_tracker_other_version(traced):
    """A tracker built for another PyTorch is never attached."""
    torch_dir = os.path.join(support.BUILD, "sim", "torch")
    other = os.path.join(os.path.dirname(torch_dir), "torch-other")
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(torch_dir, other)
    with open(os.path.join(other, "version.py"), "w") as handle:
        handle.write("__version__ = '9.9.9'\n")
    sim = os.path.join(support.BUILD, "sim")
    _, err, reports, _ = scenario(traced, "held_at_end", LD_LIBRARY_PATH=f"{sim}:{other}/lib")
    lines = [l for l in err.splitlines() if "built for PyTorch 0.0.0+sim, this is 9.9.9" in l]
    check(len(lines) == 1, f"one line naming both versions: {err[-300:]!r}")
    check(cache(reports["exit"][0])["view"] == "segments", "the segment view")
    check(device_counters(reports["exit"][0], 0, "torch_tensor")["allocation"]["allocated"]
          == 0, "no tensor recorded")
    shutil.rmtree(other, ignore_errors=True)


def test_torch_version_not_regular(traced):
    """torch/version.py that is not a regular file (here a FIFO holding the
    right version, its writer open) is never read: the tracker is not
    attached, with one line, and the program runs as ever."""
    torch_dir = os.path.join(support.BUILD, "sim", "torch")
    fifo_dir = os.path.join(os.path.dirname(torch_dir), "torch-fifo")
    shutil.rmtree(fifo_dir, ignore_errors=True)
    shutil.copytree(torch_dir, fifo_dir)
    version = os.path.join(fifo_dir, "version.py")
    os.unlink(version)
    os.mkfifo(version)
    writer = os.open(version, os.O_RDWR | os.O_NONBLOCK)
    os.write(writer, b"__version__ = '0.0.0+sim'\n")
    sim = os.path.join(support.BUILD, "sim")
    try:
        _, err, reports, _ = scenario(traced, "held_at_end", LD_LIBRARY_PATH=f"{sim}:{fifo_dir}/lib")
    finally:
        os.close(writer)
        shutil.rmtree(fifo_dir, ignore_errors=True)
    lines = [l for l in err.splitlines() if "whose version.py cannot be read" in l]
    check(len(lines) == 1, f"one line: {err[-300:]!r}")
    check(cache(reports["exit"][0])["view"] == "segments", "the segment view")


def test_frameworks_off(traced):
    _, err, reports, _ = scenario(traced, "held_at_end", CUMEMTRACE_FRAMEWORKS="0")
    check("not traced one by one" not in err, f"asked for: no warning {err[-300:]!r}")
    report = reports["exit"][0]
    check(cache(report)["view"] == "segments" and cache(report)["why"] == "CUMEMTRACE_FRAMEWORKS=0",
          f"the segment view, and why: {cache(report)}")


def test_torch_blocks_after_cuda(traced):
    """CUDA initialised, and the tracer started, by the program's own calls
    before the framework's first tensor: its tensors are still traced one by
    one, with the same verdicts."""
    program = ("import ctypes, os, sys\n"
               "cudart = ctypes.CDLL('libcudart.so.13')\n" + CUDA_CALL + IMPORT_TORCH_BLOCKS +
               "t.HELD = t.training_mix()\n")
    _, err, reports, _ = run_program(traced, "torch_blocks_after_cuda.py", program)
    report = reports[-1] if reports else {}
    check(report.get("reason") == "exit", f"an exit report: {[r['reason'] for r in reports]}")
    view = cache(report) if report else None
    check(view and view["view"] == "blocks", f"tensors traced one by one: {view}, {err[-300:]!r}")
    if report:
        check_verdicts(report, "training_mix")


def test_torch_tracker_bench_switch(traced):
    """The tracker library's bench build (tools/build-torch-tracker.sh
    --bench, for bench/gpu_cost.py's in-process comparison): a tensor made
    while its switch is on is not traced; those before and after are."""
    bench = os.path.join(support.BUILD, "sim", "torch", "libcumemtrace_torch_bench.so")
    program = ("import ctypes, os, sys\n" + IMPORT_TORCH_BLOCKS +
               "off = ctypes.c_int.in_dll(ctypes.CDLL(os.environ['CUMEMTRACE_TORCH_TRACKER']),\n"
               "                          'torch_tracker_bench_off')\n"
               "t.HELD = [t.Tensor(1 << 20)]\n"
               "off.value = 1\n"
               "t.HELD.append(t.Tensor(2 << 20))\n"
               "off.value = 0\n"
               "t.HELD.append(t.Tensor(4 << 20))\n")
    _, err, reports, _ = run_program(traced, "torch_bench_switch.py", program,
                                     CUMEMTRACE_TORCH_TRACKER=bench)
    counters = device_counters(reports[-1], 0, "torch_tensor") if reports else None
    check(counters and counters["allocation"]["allocated"] == 2 and
          counters["allocated_bytes"]["allocated"] == 5 << 20,
          f"the tensors before and after the switch, not the one in between: {counters} "
          f"{err[-300:]!r}")
