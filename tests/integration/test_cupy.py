"""CuPy's blocks, carved out of its pool by the stand-in package
(tests/sim/python, stand_ins.py): verdicts, the pool's figures, a replaced
allocator, OOMs, threads and fork."""

import time

from stand_ins import (MiB, marked_lines, site_line, growing_lines, cache, cache_device, lines_of,
                       check_held_by_line, check_verdicts, oom_reports, python_scenario, CUPY)
from support import check, device_counters


def test_cupy_blocks_mix(traced):
    """A leak carved out of the chunk a larger temporary just gave back: the
    growing line is the leak's, the chunks are the pool's (known as such
    when they are taken, not only while they hold blocks), and the cache's
    figures are the pool's own."""
    _, err, reports, _ = python_scenario(traced, CUPY, "training_mix", WAIT_TRACED="1")
    exit_report = reports["exit"][0]
    check_verdicts(exit_report, "training_mix", CUPY)
    view = cache(exit_report, "cupy_block")
    check(view and view["view"] == "blocks", f"CuPy's blocks traced one by one: {view}")
    check("not traced" not in err, f"no warning: {err[-300:]!r}")
    segments = {s["id"] for s in exit_report["stacks"] if s["cache_segment"] == "cupy_block"}
    check(segments, "the chunks' stacks are marked CuPy's segments")
    check(not segments & {g["stack"] for g in exit_report["growth"]["growing"]},
          "no chunk's stack called growing")
    held = lines_of(exit_report, exit_report["held_at_end"], CUPY)
    expected = marked_lines("HELD", "training_mix", CUPY) | marked_lines("LEAK", "training_mix", CUPY)
    check(expected <= held, f"held at the end: {sorted(expected)} in {sorted(held - {None})}")
    check(not [g for g in exit_report["live"] if g["kind"] == "cupy_block"], "no block leaked")
    _, _, reports, figures = python_scenario(traced, CUPY, "training_mix", ["{dir}/at-end"],
                                             WAIT_TRACED="1")
    now = cache_device(reports["snapshot"][0], "cupy_block")
    check(now.get("block_bytes") == figures["used"] and
          now.get("reserved_bytes") == figures["total"],
          f"blocks and reserve as the pool counts them: {now} vs {figures}")


def test_cupy_chunk_before_traced(traced):
    """A chunk the pool took before CuPy's blocks were traced, reused by a
    temporary each step: at the end it is the pool's (reserved, unused),
    held by no line."""
    _, _, reports, figures = python_scenario(traced, CUPY, "chunk_before_traced")
    report = reports["exit"][0]
    device = cache_device(report, "cupy_block")
    check(device.get("reserved_bytes") == figures["total"] > 0 and
          device.get("block_bytes") == figures["used"] == 0,
          f"the chunk is the pool's: {device} vs {figures}")
    temps = marked_lines("TEMP", "chunk_before_traced", CUPY)
    held = lines_of(report, report["held_at_end"], CUPY)
    check(not held & temps, f"no temporary's line holds it: {sorted(held - {None})}")


def test_cupy_segments_only(traced):
    """The same program seen by the driver alone (CUMEMTRACE_FRAMEWORKS=0):
    the leak's line never asks the driver for anything, so that view cannot
    name it; the report says which view it shows, and why."""
    _, err, reports, _ = python_scenario(traced, CUPY, "training_mix", CUMEMTRACE_FRAMEWORKS="0")
    report = reports["exit"][0]
    view = cache(report, "cupy_block")
    check(view and view["view"] == "segments" and view["why"] == "CUMEMTRACE_FRAMEWORKS=0",
          f"the segment view, and why: {view}")
    check("not traced" not in err, f"asked for: no warning {err[-300:]!r}")
    grown = growing_lines(report, CUPY)
    check(not marked_lines("LEAK", "training_mix", CUPY) & grown and
          marked_lines("TEMP", "training_mix", CUPY) & grown,
          f"the driver's view blames the temporary, not the leak: {sorted(grown - {None})}")


def test_cupy_blocks_held(traced):
    _, _, reports, _ = python_scenario(traced, CUPY, "held_at_end", WAIT_TRACED="1")
    report = reports["exit"][0]
    check_held_by_line(report, "cupy_block", "held_at_end", 24 * MiB, 3, CUPY)
    check(not report["growth"]["growing"], "nothing growing")
    check(not [g for g in report["live"] if g["kind"] == "cupy_block"], "no block leaked")


def test_cupy_explicit_free(traced):
    """A block freed explicitly and handed out again while the first object
    lives on: the second block stays recorded until its own end."""
    _, _, reports, _ = python_scenario(traced, CUPY, "explicit_free", WAIT_TRACED="1")
    report = reports["exit"][0]
    check_held_by_line(report, "cupy_block", "explicit_free", 4 * MiB, 1, CUPY)


def test_cupy_allocator_replaced(traced):
    """The program puts its own allocator in: one line, the segment view,
    the program's output unchanged."""
    out, err, reports, _ = python_scenario(traced, CUPY, "replaced", WAIT_TRACED="1")
    lines = [l for l in err.splitlines() if "CuPy" in l]
    check(len(lines) == 1 and "cupy.cuda.set_allocator" in lines[0], f"one line: {err[-400:]!r}")
    view = cache(reports["exit"][0], "cupy_block")
    check(view and view["view"] == "segments" and "set_allocator" in view["why"],
          f"the segment view, and why: {view}")
    untraced, _, _, _ = python_scenario(traced, CUPY, "replaced", preload=False)
    check(out == untraced, f"output unchanged: {out!r} vs {untraced!r}")


def test_cupy_not_a_pool(traced):
    """No pool (set_allocator(None)): every array is a cudaMalloc of its
    own, which the driver view traces; ours never goes in, nothing is said."""
    _, err, reports, _ = python_scenario(traced, CUPY, "not_a_pool")
    report = reports["exit"][0]
    check(cache(report, "cupy_block") is None, f"no view of a CuPy cache: {report['caches']}")
    check(not err.strip(), f"nothing said: {err[-300:]!r}")
    check(device_counters(report, 0, "cupy_block")["allocation"]["allocated"] == 0,
          "no block recorded")
    check_verdicts(report, "not_a_pool", CUPY)


def test_cupy_blocks_oom(traced):
    """The pool gives up: the OOM report is in CuPy's cache's terms, at the
    line that asked."""
    out, _, _, _ = python_scenario(traced, CUPY, "exhaustion_oom", SIMCUDA_MEMORY="1G",
                                   CUMEMTRACE_OOM="every", WAIT_TRACED="1")
    check("OutOfMemoryError after" in out, f"the program saw its OOM: {out!r}")
    lines = marked_lines("OOM", "exhaustion_oom", CUPY)
    found = [r for r in oom_reports(traced.dir) if r["event"]["kind"] == "cupy_block" and
             site_line(r, r["event"]["stack"], CUPY) in lines]
    if not check(found, "an OOM report of CuPy's blocks names the OOM line"):
        return
    event = found[0]["event"]
    check(event["verdict"] == "tensors_exhausted" and event["retry"] == "failed",
          f"its arrays exhausted the device: {event}")
    check(event["cache"]["block_bytes"] >= 900 * MiB, f"the cache's blocks in it: {event}")


def test_cupy_blocks_threads(traced):
    start = time.time()
    out, _, reports, _ = python_scenario(traced, CUPY, "threads_and_snapshots", WAIT_TRACED="1")
    check(time.time() - start < 60, "done in time")
    check("snapshots" in out, f"finished: {out!r}")
    report = reports["exit"][0]
    counters = device_counters(report, 0, "cupy_block")
    check(counters["allocation"]["allocated"] > 0 and counters["allocation"]["current"] == 0 and
          counters["allocation"]["allocated"] == counters["allocation"]["freed"],
          f"every block freed and seen freed: {counters}")
    # (The stand-in returns a block from Python code, between which and its
    # token's end another thread may get the same block: the new record then
    # replaces the old, counted as a missed free, and the old token ends
    # nothing. So missed frees may be counted; unknown ones never.)
    check(report["tracer"]["lost"]["unknown_free"] == 0, f"no unknown free: {report['tracer']['lost']}")


def test_cupy_blocks_fork(traced):
    start = time.time()
    out, _, _, _ = python_scenario(traced, CUPY, "fork_while_allocating", WAIT_TRACED="1")
    check(out.startswith("children ") and int(out.split()[1]) > 0, f"children exited: {out!r}")
    check(time.time() - start < 60, "done in time")
