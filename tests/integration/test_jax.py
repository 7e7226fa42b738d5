"""JAX's arrays in its preallocated region, by the stand-in package
(tests/sim/python, stand_ins.py): verdicts, the region's figures, sweeps of
jax.live_arrays() and their cost."""

import time

from stand_ins import (MiB, marked_lines, cache, cache_device, lines_of, check_held_by_line,
                       check_verdicts, python_scenario, JAX)
from support import check, device_counters


REGION = 256 * MiB      # the JAX stand-in's preallocated region (SIMJAX_PREALLOCATE)


def regions(report):
    """The JAX stand-in's preallocated regions live in a report."""
    return [b for b in report["blocks"]["items"] if b["kind"] == "device" and b["size"] == REGION]


def test_jax_arrays_mix(traced):
    """An array kept per step beside a larger temporary, in one region the
    driver sees once: the growing line is the kept array's."""
    _, err, reports, figures = python_scenario(traced, JAX, "training_mix")
    report = reports["exit"][0]
    check_verdicts(report, "training_mix", JAX)
    view = cache(report, "jax_array")
    check(view and view["view"] == "blocks", f"JAX's arrays traced one by one: {view}")
    check(not err.strip(), f"nothing said: {err[-300:]!r}")
    held = lines_of(report, report["held_at_end"], JAX)
    expected = marked_lines("HELD", "training_mix", JAX) | marked_lines("LEAK", "training_mix", JAX)
    check(expected <= held, f"held at the end: {sorted(expected)} in {sorted(held - {None})}")
    arrays = [g for g in report["live"] if g["kind"] == "jax_array"]
    check(all(g["held_at_end"] for g in arrays),
          f"the arrays live at exit (as the last sweep saw them) held at the end: {arrays}")
    segments = [s for s in report["stacks"] if s["cache_segment"] == "jax_array"]
    check(len(segments) == 1 and len(regions(report)) == 1 and figures["clients_made"] == 1,
          f"one region, JAX's segment: {segments} {regions(report)} {figures}")


def test_jax_arrays_held(traced):
    """Arrays held by a module global: held at the end, not leaked; the
    cache's figures are the stand-in's own."""
    _, _, reports, figures = python_scenario(traced, JAX, "held_at_end", ["{dir}/at-end"])
    report, snapshot = reports["exit"][0], reports["snapshot"][0]
    check_held_by_line(report, "jax_array", "held_at_end", 24 * MiB, 3, JAX)
    check(not report["growth"]["growing"], "nothing growing")
    now = cache_device(snapshot, "jax_array")
    check(now.get("block_bytes") == figures["bytes"] and now.get("blocks") == figures["buffers"]
          and now.get("reserved_bytes") == REGION,
          f"arrays and region as the stand-in has them: {now} vs {figures}")


def test_jax_arrays_marks(traced):
    """A cumemtrace_mark() per step: JAX's arrays are swept for each mark's
    sample, and the kept array's line is growing per mark."""
    _, _, reports, _ = python_scenario(traced, JAX, "marks")
    report = reports["exit"][0]
    check(report["growth"]["mode"] == "marks", f"samples at marks: {report['growth']['mode']}")
    check_verdicts(report, "marks", JAX)


def test_jax_arrays_shared_sharded(traced):
    """Two arrays on one buffer count once; an array split over two devices
    is left out; arrays on device 1 are device 1's."""
    _, err, reports, figures = python_scenario(traced, JAX, "shared_and_sharded", ["{dir}/at-end"])
    snapshot = reports["snapshot"][0]
    first, second = cache_device(snapshot, "jax_array", 0), cache_device(snapshot, "jax_array", 1)
    check(first.get("blocks") == 1 and first.get("block_bytes") == 4 * MiB,
          f"device 0: the shared buffer once, the sharded array left out: {first}")
    check(second.get("blocks") == 3 and second.get("block_bytes") == 6 * MiB and
          second.get("reserved_bytes") == REGION, f"device 1: its three arrays: {second}")
    check(figures["buffers"] == 4, f"the stand-in agrees: {figures}")


def test_jax_not_initialized(traced):
    """JAX imported and never used: never called, nothing preallocated."""
    out, _, reports, figures = python_scenario(traced, JAX, "not_initialized")
    report = reports["exit"][0]
    check(figures.get("clients_made") == 0 and not regions(report),
          f"no backend started, no region: {figures} {regions(report)}")
    check(cache(report, "jax_array") is None, f"no JAX cache: {report['caches']}")


def test_jax_after_exit_hook(traced):
    """Our exit hook went in before JAX was imported, so JAX's own runs
    first and drops its backends: our last sweep must not start one again
    (a second preallocation). With samples (default) the bridge saw JAX
    imported and put a hook in after JAX's, which takes the last sweep
    first: the arrays are held at the end."""
    _, _, reports, _ = python_scenario(traced, JAX, "after_jax_exit_hook", CUMEMTRACE_SAMPLE_MS="600000")
    report = reports["exit"][0]
    check(len(regions(report)) == 1, f"one region, never a second: {regions(report)}")
    _, _, reports, _ = python_scenario(traced, JAX, "after_jax_exit_hook")
    report = reports["exit"][0]
    check(len(regions(report)) == 1, f"one region: {regions(report)}")
    held = lines_of(report, report["held_at_end"], JAX)
    check(marked_lines("HELD", "after_jax_exit_hook", JAX) <= held,
          f"swept before JAX's clean-up: held at the end {sorted(held - {None})}")


def test_jax_sweep_cost(traced):
    """Sweeps that take long (5000 arrays, a slow live_arrays()) are paid
    from a budget of 100 ms plus 1% of the time: a few, not one per 20 ms
    sample (about 60 in this run); the last one is always made."""
    start = time.time()
    _, err, reports, _ = python_scenario(traced, JAX, "many_arrays", CUMEMTRACE_SAMPLE_MS="20",
                                         CUMEMTRACE_QUIET="0", CUMEMTRACE_DEBUG="1",
                                         SIMJAX_SLOW_LIST_MS="30")
    elapsed_ms = (time.time() - start) * 1000
    sweeps = [l for l in err.splitlines() if "live arrays swept in" in l]
    costs = [float(l.split(" swept in ")[1].split(" ms")[0]) for l in sweeps]
    check(2 <= len(sweeps) <= 8, f"a few sweeps: {sweeps}")
    check(sum(costs[:-1]) <= 100 + elapsed_ms / 100 + max(costs, default=0),
          f"periodic sweeps within the budget: {costs} in {elapsed_ms:.0f} ms")
    check(sweeps and "5000 live arrays" in sweeps[-1], f"the last saw every array: {sweeps}")
    check(device_counters(reports["exit"][0], 0, "jax_array")["allocation"]["allocated"]
          == 5000, "every array recorded")


def test_jax_tracebacks_off(traced):
    """JAX keeping no tracebacks: the arrays are recorded, with no line."""
    _, _, reports, _ = python_scenario(traced, JAX, "held_at_end", SIMJAX_TRACEBACKS="0")
    report = reports["exit"][0]
    held = [g for g in report["held_at_end"] if g["kind"] == "jax_array"]
    check(sum(g["bytes"] for g in held) == 24 * MiB, f"held at the end, as arrays: {held}")


def test_jax_threads_fork(traced):
    start = time.time()
    out, _, reports, _ = python_scenario(traced, JAX, "threads_and_fork")
    check(out.startswith("children ") and int(out.split()[1]) > 0, f"children exited: {out!r}")
    check(time.time() - start < 60, "done in time")
    check(reports["exit"][0]["tracer"]["lost"]["unknown_free"] == 0, "no free lost")


def test_jax_frameworks_off(traced):
    _, err, reports, _ = python_scenario(traced, JAX, "held_at_end", CUMEMTRACE_FRAMEWORKS="0")
    report = reports["exit"][0]
    view = cache(report, "jax_array")
    check(view and view["view"] == "segments" and view["why"] == "CUMEMTRACE_FRAMEWORKS=0",
          f"the segment view, and why: {view}")
    check(device_counters(report, 0, "jax_array")["allocation"]["allocated"] == 0,
          "no array recorded")
