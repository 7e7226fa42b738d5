"""The blocks frameworks carve out of their caches, and
of the end of a Python program, on the simulator.

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
import itertools
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import support
from browser import find_browser, drive
from support import check, validate, device_counters, symbolize, traced_environment, line_of, tool


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
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                       "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
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


def test_torch_blocks_mix(traced):
    """Kept tensors next to a 48 MiB temporary per step, in caching mode."""
    _, err, reports, figures = scenario(traced, "training_mix", ["{dir}/at-end"],
                                        CUMEMTRACE_FORMAT="json,folded,memviz")
    exit_report, snapshot = reports["exit"][0], reports["snapshot"][0]
    # The folded stacks count the device's memory once: tensors by their
    # stacks, the cache's unused rest as one entry, no segment twice.
    with open(os.path.join(traced.dir, "at-end.folded")) as handle:
        folded = sum(int(line.rsplit(" ", 1)[1]) for line in handle if line.strip())
    live = device_counters(snapshot, 0, "device_memory")["allocated_bytes"]["current"]
    check(folded == live, f"folded stacks sum to the device's live memory: {folded} vs {live}")
    # PyTorch's memory_viz page gets segments laid out as PyTorch's own
    # snapshot would: the tensors at their addresses, the free ranges between.
    with open(os.path.join(traced.dir, "at-end.pickle"), "rb") as handle:
        snapshot_pickle = pickle.load(handle)
    segments = snapshot_pickle["segments"]
    active = [b for seg in segments for b in seg["blocks"] if b["state"] == "active_allocated"]
    check(sum(seg["total_size"] for seg in segments) == figures["reserved"] and
          sum(b["requested_size"] for b in active) == figures["requested"] and
          all(sum(b["size"] for b in seg["blocks"]) == seg["total_size"] for seg in segments),
          f"memviz segments hold the tensors: {len(segments)} segments, {len(active)} tensors")
    check_verdicts(exit_report, "training_mix")
    view = cache(exit_report)
    check(view and view["view"] == "blocks", f"tensors traced one by one: {view}")
    check("not traced one by one" not in err, f"no warning: {err[-300:]!r}")
    # The cache's figures against the stand-in's own, at one moment.
    now = cache(snapshot)
    device = now["devices"][0] if now and now["devices"] else {}
    check(device.get("block_bytes") == figures["requested"] and
          device.get("reserved_bytes") == figures["reserved"],
          f"tensors and reserve as the allocator counts them: {device} vs {figures}")
    check(figures["inactive_split"] <= device.get("hole_bytes", -1) <=
          figures["inactive_split"] + figures["allocated"] - figures["requested"],
          f"holes between live tensors as its inactive split blocks: {device} vs {figures}")
    # The segments are the cache's: not leaked, not growing, listed as such.
    segments = [s for s in exit_report["stacks"] if s["cache_segment"] == "torch_tensor"]
    check(segments, "the segments' stacks are marked")
    grown = {g["stack"] for g in exit_report["growth"]["growing"]}
    check(not grown & {s["id"] for s in segments}, "no segment stack called growing")
    # Held at the end (weights, the kept list): freed by the teardown, not leaked.
    held = {site_line(exit_report, g["stack"]) for g in exit_report["held_at_end"]}
    expected = marked_lines("HELD", "training_mix") | marked_lines("LEAK", "training_mix")
    check(expected <= held, f"held at the end: {sorted(expected)} in {sorted(held - {None})}")
    check(exit_report["program_end"] is not None, "the program's end was seen")
    tensors = [g for g in exit_report["live"] if g["kind"] == "torch_tensor"]
    check(not tensors, f"no tensor leaked: {tensors}")


def test_torch_blocks_leak_beside_temporaries(traced):
    """A line that keeps 512 bytes a step and makes 8 MiB of temporaries it
    frees within the step: growing, the line named. The program marks its
    steps, so every sample falls between steps, as the verdict needs on any
    machine load."""
    _, _, reports, _ = scenario(traced, "leak_beside_temporaries")
    report = reports["exit"][0]
    growth = report["growth"]
    check(growth["mode"] == "marks" and growth["samples"] >= 61,
          f"sampled at the 61 marks: {growth['mode']}, {growth['samples']} samples")
    check_verdicts(report, "leak_beside_temporaries")


def test_torch_blocks_leak_beside_temporaries_unmarked(traced):
    """leak_beside_temporaries' unmarked twin: observed over the program's
    events, wherever they fall against its steps, the same verdicts."""
    _, _, reports, _ = scenario(traced, "leak_beside_temporaries_unmarked")
    report = reports["exit"][0]
    check(report["growth"]["mode"] == "work", f"observed over the work: {report['growth']['mode']}")
    check_verdicts(report, "leak_beside_temporaries")


def test_growth_same_every_run(traced):
    """The shapes a clock once decided, 10 runs each: a 78-step leak of 1 MiB
    made on an 8 MiB temporary's line, 512 bytes kept on a 4 MiB temporary's
    line, and a steady server with eviction. Growing 10 of 10, 10 of 10, and
    nothing 10 of 10, each run on the same observations (the verdict's
    figures equal). The steps' pauses are short here: the clock is the
    program's work, so they change nothing (bench/growth_repeat.py runs the
    shapes at their full 1.5 s and 3 s, beside a busy CPU)."""
    for name in ("short_leak", "small_beside_big", "steady_serving"):
        answers = []
        for run in range(10):
            _, _, reports, _ = scenario(traced, name, CUMEMTRACE_TEST_STEP_S="0.002")
            report = reports["exit"][0]
            check_verdicts(report, name)
            answers.append(sorted((site_line(report, g["stack"]), g["rises"],
                                   g["samples_since_first"]) for g in report["growth"]["growing"]))
        leaks = marked_lines("LEAK", name)
        check(all(sorted(line for line, _, _ in a) == sorted(leaks) for a in answers),
              f"{name}: the LEAK lines growing at every run, nothing else: {answers}")
        check(all(a == answers[0] for a in answers), f"{name}: the same figures each run: {answers}")


def test_verdicts_without_native_frames(traced):
    """CUMEMTRACE_NATIVE=0 (as on a machine where no native stack can be
    walked): every verdict of the stand-in's mixes of leaks and innocent
    temporaries the same as with native frames. Without them a segment the
    cache took at a tensor's line has that line's Python frames alone; it
    once shared the tensor's stack, whose verdicts then went with the
    segment's (training_mix's leak not growing)."""
    def verdicts(report):
        return {v: sorted(site_line(report, g["stack"]) for g in report["growth"][v])
                for v in ("growing", "released")}
    for name in ("training_mix", "leak_beside_temporaries_unmarked", "kept_then_freed",
                 "short_leak", "steady_serving", "remade_larger"):
        with_native = scenario(traced, name, CUMEMTRACE_TEST_STEP_S="0.002")[2]["exit"][0]
        without = scenario(traced, name, CUMEMTRACE_TEST_STEP_S="0.002",
                           CUMEMTRACE_NATIVE="0")[2]["exit"][0]
        segments = [s for s in without["stacks"] if s.get("cache_segment")]
        check(segments and all(site_line(without, s["id"]) for s in segments),
              f"{name}: without native frames the segments' stacks are Python lines: {segments}")
        check(verdicts(with_native) == verdicts(without),
              f"{name}: the same verdicts: {verdicts(with_native)} vs {verdicts(without)}")
        check(verdicts(without)["growing"] or verdicts(without)["released"] or
              name == "steady_serving", f"{name}: a verdict to compare: {verdicts(without)}")


def test_torch_blocks_temporaries_at_samples(traced):
    """The same shape unmarked, with about every other observation falling
    while the line's 8 MiB temporary is alive (as on a GPU, where
    training_mix's loss line was missed in 3 runs of 8 when samples were
    taken by the clock): the leak is growing, judged on what it kept; the
    temporary alone and the cache that filled, then stayed, are not."""
    _, _, reports, _ = scenario(traced, "temporaries_at_samples", CUMEMTRACE_SAMPLE_MS="20")
    report = reports["exit"][0]
    growth = report["growth"]
    check(growth["mode"] == "work" and growth["samples"] >= 30,
          f"observed over the work: {growth['mode']}, {growth['samples']} observations")
    # The shape is there: at many observations the tensors held the line's
    # 8 MiB temporary (and the scratch beside it), gone at the next one.
    track = next(t for t in report["series"]["tracks"] if t["kind"] == "torch_tensor")
    values = [v for _, v in track["points"]]
    drops = sum(1 for a, b in zip(values, values[1:]) if a - b >= 8 * MiB)
    check(drops >= 10, f"samples while the temporaries lived, then not: {drops} in {values}")
    check_verdicts(report, "temporaries_at_samples")


def test_torch_blocks_remade_larger(traced):
    """A buffer freed, then made again larger each step: its low point
    between samples is 0, its bytes at the samples rise; growing, read on
    those, the line named, the temporary beside it not."""
    _, _, reports, _ = scenario(traced, "remade_larger")
    report = reports["exit"][0]
    check_verdicts(report, "remade_larger")


def test_torch_blocks_kept_then_freed(traced):
    """A list of outputs kept by a function that returns before the program
    ends: not growing at the end, but named as grown, then freed near the end,
    with its peak; the per-step temporary beside it in neither list; the text
    report and one read back from the JSON say the same."""
    _, _, reports, _ = scenario(traced, "kept_then_freed", CUMEMTRACE_FORMAT="text,json,html")
    report = reports["exit"][0]
    check_verdicts(report, "kept_then_freed")
    released = report["growth"]["released"]
    check(len(released) == 1 and released[0]["peak_bytes"] >= 40 * MiB and
          released[0]["live_bytes"] == 0 and released[0]["rate"] > 0,
          f"one site, its peak and rate while it grew, nothing held now: {released}")
    def section(text):
        heading = "Grew, then freed near the end"
        return heading + text.split(heading, 1)[1].split("\n\n", 1)[0] if heading in text else ""
    text = open(glob.glob(os.path.join(traced.dir, "report-*.txt"))[0]).read()
    line = min(marked_lines("FREED", "kept_then_freed"))
    check(f"torch_blocks.py:{line}" in section(text),
          f"the text names the line under its own heading:\n{text}")
    again = tool("report", glob.glob(os.path.join(traced.dir, "report-*.json"))[0])
    check(again.returncode == 0 and section(again.stdout) == section(text),
          f"read back from the JSON, the same:\n{section(again.stdout)}\nvs\n{section(text)}")
    if not find_browser():
        check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
              "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
        return
    result, _ = drive(glob.glob(os.path.join(traced.dir, "report-*.html"))[0], """
    result.rows = [].map.call(document.querySelectorAll('#released-table tbody tr'), function (r) {
      return [].map.call(r.cells, function (c) { return c.textContent; }); });""")
    rows = result.get("rows", [])
    check(len(rows) == 1 and rows[0][1] == format_bytes(released[0]["peak_bytes"]) and
          f"torch_blocks.py:{line}" in rows[0][-1],
          f"the page's table beside the growing one: {rows}")


def test_torch_blocks_never_freed(traced):
    """Tensors nobody frees, not even the teardown (as PyTorch leaves model
    weights): held at the end with their line, still live at exit, and not
    called leaked."""
    _, _, reports, _ = scenario(traced, "never_freed", CUMEMTRACE_FORMAT="text,json")
    report = reports["exit"][0]
    held = [g for g in report["held_at_end"] if g["kind"] == "torch_tensor"]
    check(len(held) == 1 and held[0]["bytes"] == 8 * MiB and
          held[0]["freed_at_teardown_bytes"] == 0 and
          site_line(report, held[0]["stack"]) in marked_lines("HELD", "never_freed"),
          f"4 x 2 MiB held at the end, none freed by the teardown: {held}")
    live = [g for g in report["live"] if g["kind"] == "torch_tensor"]
    check(live and all(g["held_at_end"] for g in live), f"live at exit, held at the end: {live}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*.txt"))[0]).read()
    # Nothing leaked: no Leaked section at all (an empty one is not printed).
    check("Leaked" not in text and "nothing leaked" in text and "held at the end" in text,
          f"the text calls none of it leaked: {text[:1500]}")
    # A report from before live groups said whether they were held at the
    # end (held_at_end then listed only what the teardown freed) reads the same.
    older = json.loads(json.dumps(report))
    for group in older["live"]:
        del group["held_at_end"]
    older["held_at_end"] = []
    path = os.path.join(traced.dir, "older.json")
    with open(path, "w") as handle:
        json.dump(older, handle)
    again = tool("report", path, "--format", "json")
    again = json.loads(again.stdout) if again.returncode == 0 else {}
    check([(g["stack"], g["bytes"], g["freed_at_teardown_bytes"]) for g in again.get("held_at_end", [])]
          == [(g["stack"], g["bytes"], 0) for g in held] and
          all(g["held_at_end"] for g in again.get("live", []) if g["kind"] == "torch_tensor"),
          f"an older report: held at the end, not leaked: {again.get('held_at_end')}")


def test_torch_blocks_held(traced):
    _, _, reports, _ = scenario(traced, "held_at_end")
    report = reports["exit"][0]
    check_held_by_line(report, "torch_tensor", "held_at_end", 24 * MiB, 3)
    check(not report["growth"]["growing"], "nothing growing")


def test_torch_blocks_compare(traced):
    """diff and merge count a cache's memory once: its tensors by their
    lines, never the segments that hold them as well."""
    _, _, reports, _ = scenario(traced, "held_at_end", ["{dir}/held"])
    exit_path = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    held_path = os.path.join(traced.dir, "held.json")
    snapshot = reports["snapshot"][0]
    tensors = sum(g["bytes"] for g in snapshot["live"] if g["kind"] == "torch_tensor")
    check(tensors == 24 * MiB, f"3 x 8 MiB of tensors live at the snapshot: {tensors}")
    merged = tool("merge", held_path, held_path, "--format", "json")
    stacks = json.loads(merged.stdout)["stacks"] if merged.returncode == 0 else []
    check([s["total_bytes"] for s in stacks] == [2 * tensors],
          f"merge: the tensors' line, no segment: {[(s['total_bytes'], s['frames'][:1]) for s in stacks]}")
    diff = tool("diff", exit_path, held_path, "--format", "json")
    compared = json.loads(diff.stdout) if diff.returncode == 0 else {}
    check([(s["status"], s["b_bytes"]) for s in compared.get("stacks", [])] == [("new", tensors)] and
          compared.get("stacks_unchanged") == 0,
          f"diff: the tensors are new, the segments (the same in both) not a stack: {compared}")


def test_torch_blocks_live(traced):
    """cumemtrace live on a process holding tensors: its sites are the
    tensors' lines, not the cache's segments, and a line gives the cache's
    figures; where tensors are not traced, the segments are the sites and a
    line says why."""
    for frameworks in ("1", "0"):
        directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-live-")
        ready = os.path.join(directory, "ready")
        settings = torch_env(TORCH_BLOCKS_READY=ready, CUMEMTRACE_FRAMEWORKS=frameworks)
        libraries = settings.pop("LD_LIBRARY_PATH")
        environment = traced_environment(directory, **settings)
        environment["LD_LIBRARY_PATH"] = libraries
        process = subprocess.Popen([sys.executable, script(), "watched"], cwd=directory,
                                   env=environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        for _ in range(500):
            if os.path.exists(ready) or process.poll() is not None:
                break
            time.sleep(0.02)
        pid = int(open(ready).read()) if os.path.exists(ready) else 0
        view = tool("live", str(pid), "--once") if pid else None
        if pid:
            os.unlink(ready)
        out, err = process.communicate(timeout=60)
        if not check(view and view.returncode == 0, f"live --once: {view and view.stderr} {err[-500:]}"):
            continue
        held = min(marked_lines("HELD", "watched"))
        sites = view.stdout.split("Top sites", 1)[-1]
        if frameworks == "1":
            check(f"< watched:{held}" in sites and "torch_tensor" in sites and
                  "cudaMalloc" not in sites,
                  f"the tensors' line, no segment:\n{view.stdout}")
            # All its device memory is the cache's: what its segments reserve.
            device = __import__("re").search(r"device 0 +(\S+ \S+)", view.stdout)
            check(device and f"PyTorch's cache: {device.group(1)} reserved, 16.0 MiB in tensors"
                  in view.stdout, f"the cache's figures:\n{view.stdout}")
        else:
            check("via cudaMalloc" in sites and "torch_tensor" not in sites and
                  "PyTorch's tensors are not traced one by one (CUMEMTRACE_FRAMEWORKS=0"
                  in view.stdout, f"the segments, and why:\n{view.stdout}")


def test_torch_blocks_pytest(traced):
    """The pytest plugin on the stand-in allocator: a test that fills the
    cache passes (the cache keeps its segment, the tensor is gone), one that
    keeps a tensor fails, naming its line and the list that holds it."""
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_tensors")
    command = ["run", "--quiet", "--format=none", "--", sys.executable, "-m", "pytest",
               "-p", "no:cacheprovider", "-p", "cumemtrace_pytest", "-q", "--cuda-leaks", suite]
    out, err, _, _ = traced.run(os.path.join(support.BUILD, "cumemtrace"), command, preload=False,
                                expect_rc=None, env=torch_env())
    text = out + err
    test_file = os.path.join(suite, "test_tensors.py")
    keep = line_of(test_file, "KEEP-LINE")
    check("1 failed, 1 passed" in text and "test_fills_the_cache" not in text.split("FAILURES")[-1],
          f"the cache filled once passes, the kept tensor fails:\n{text}")
    check("test_keeps_a_tensor left 4.00 MiB of GPU memory held:" in text and
          f"< test_keeps_a_tensor:{keep} (torch_tensor via torch_caching_allocator) — held by "
          "test_tensors.kept, a list of 1 tensor\n" in text,
          f"the kept tensor's line, and its holder:\n{text}")


def test_torch_blocks_html(traced):
    """The HTML page of a program on the stand-in allocator: a cache's memory
    counted once, in the icicle, its highest point and the tables; the
    caches per device; what the program held at its end, neutral."""
    if not find_browser():
        check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
              "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
        return
    _, _, reports, _ = scenario(traced, "training_mix", ["{dir}/at-end"], CUMEMTRACE_FORMAT="json,html")
    snapshot, exit_report = reports["snapshot"][0], reports["exit"][0]
    segments = {s["id"] for s in snapshot["stacks"] if s["cache_segment"] == "torch_tensor"}
    device = device_counters(snapshot, 0, "device_memory")["allocated_bytes"]
    figures = cache(snapshot)["devices"][0]
    tensors = sum(g["bytes"] for g in snapshot["live"] if g["stack"] not in segments)
    check(segments and tensors == figures["block_bytes"], f"tensors live: {tensors} vs {figures}")
    result, _ = drive(os.path.join(traced.dir, "at-end.html"), """
    function press(m) { document.querySelector('button[data-moment="' + m + '"]').click(); }
    press('end'); result.now = icicle();
    toggle(document.querySelector('#kind-toggles input[data-kind="unused in caches"]'));
    result.nowUnused = icicle();
    press('peak'); result.peakUnused = icicle();
    result.holders = document.querySelectorAll('#holders-table tbody tr').length;
    result.caches = [].map.call(document.querySelectorAll('#caches-table tbody tr'), function (r) {
      return [].map.call(r.cells, function (c) { return c.textContent; }); });""")
    unused = [b for b in result.get("nowUnused", {}).get("bars", [])
              if b[0] == "[torch_tensor cache: reserved, unused]"]
    check(result.get("now", {}).get("total") == tensors,
          f"the icicle: the tensors, not their segments too: {result.get('now', {}).get('total')} vs {tensors}")
    check(result.get("nowUnused", {}).get("total") == device["current"] and
          [b[1] for b in unused] == [figures["unused_bytes"]],
          f"with the cache's unused rest: the device's memory once: {result.get('nowUnused', {}).get('total')} "
          f"vs {device['current']}, {unused} vs {figures['unused_bytes']}")
    check(result.get("peakUnused", {}).get("total") == device["peak"],
          f"its highest point, the device's peak: {result.get('peakUnused', {}).get('total')} vs {device['peak']}")
    holders = [s for s in snapshot["stacks"] if s["peak_live_bytes"] > 0 and s["id"] not in segments]
    check(result.get("holders") == min(50, len(holders)),
          f"largest holders: no segment: {result.get('holders')} rows vs {len(holders)}")
    check([row[:2] for row in result.get("caches", [])] == [["PyTorch", "device 0"]] and
          result["caches"][0][4] == format_bytes(figures["unused_bytes"]),
          f"the cache per device: {result.get('caches')} vs {figures}")
    # At exit: what the program held at its end, neutral; nothing leaked.
    html = glob.glob(os.path.join(traced.dir, "report-*.html"))[0]
    result, _ = drive(html, """
    result.held = document.getElementById('held-at-end').className;
    result.heldBytes = +document.getElementById('held-bytes').dataset.value;
    result.leaked = !!document.getElementById('leaked-bytes');
    result.leaks = document.getElementById('leaks').className;""")
    held = sum(g["bytes"] for g in exit_report["held_at_end"])
    check(result.get("held") == "neutral" and result.get("heldBytes") == held and held > 0 and
          result.get("leaked") is False and result.get("leaks") == "",
          f"held at the end, neutral, no Leaked 0 card: {result} vs {held}")


def summary_of(err):
    """The exit summary's lines on stderr, from its first line to its last."""
    lines = err.splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith("==== cumemtrace exit report"))
    last = next(i for i, l in enumerate(lines) if i > first and l.startswith("==== end of"))
    return lines[first:last + 1]


def test_torch_blocks_findings(traced):
    """A model of 24 modules holding their weights, and one line that keeps
    a tensor each step: every report opens with its findings, the growing
    line first; the summary on stderr stays short, prints no empty section,
    and says where the full report is; the HTML page opens with the same."""
    _, err, reports, _ = scenario(traced, "modules_and_leak", CUMEMTRACE_QUIET="0",
                                  CUMEMTRACE_FORMAT="json,text,html")
    report = reports["exit"][0]
    check_verdicts(report, "modules_and_leak")
    leak = marked_lines("LEAK", "modules_and_leak").pop()
    where = f"{script()}:{leak} in modules_and_leak"
    summary = summary_of(err)
    check(len(summary) <= 60, f"the summary is at most 60 lines: {len(summary)}\n" + "\n".join(summary))
    growing = [i for i, l in enumerate(summary) if l.startswith(f"   - growing at {where}: +")]
    check(growing and growing[0] < 15 and "  Findings:" in summary[:growing[0]],
          f"the growing line in the findings, in the first 15 lines: {summary[:16]}")
    findings = summary[summary.index("  Findings:") + 1:]
    findings = findings[:findings.index("")]
    check(len(findings) <= 15 and
          findings[1].startswith("   - held at the end of the program (not leaked): ") and
          "from 25 sites" in findings[1] and all(l.startswith("      at ") for l in findings[2:]),
          f"then what was held at the end, and its top sites: {findings}")
    check(not any("0 B in 0 blocks" in l or l.startswith("  Leaked") for l in summary),
          f"no empty section: {summary}")
    json_path = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    check(any(l.startswith("  full report: ") and json_path in l for l in summary),
          f"the summary says where the full report is: {summary[-3:]}")
    # The JSON carries them; the text report opens with them and lists all.
    first = report["findings"][0]
    check(first["verdict"] == "growing" and first["site"] == where and
          first["bytes"] == report["growth"]["growing"][0]["live_bytes"],
          f"findings[0], growing at the LEAK line: {first}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*.txt"))[0]).read()
    lines = text.splitlines()
    check(any(l.startswith(f"   - growing at {where}: +") for l in lines[:15]),
          f"the text report opens with the findings: {lines[:15]}")
    check(all(f"/srv/model/layer{i}.py:2" in text for i in range(24)) and "full report" not in text,
          "the text report lists every site")
    # The page: the findings first, the growing section before the others.
    if not find_browser():
        check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
              "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
        return
    html = glob.glob(os.path.join(traced.dir, "report-*.html"))[0]
    result, _ = drive(html, """
    var main = document.querySelector('main');
    result.first = main.firstElementChild.id;
    result.items = Array.prototype.map.call(document.querySelectorAll('#findings li'), function (li) {
      return [li.dataset.verdict, li.textContent];
    });
    result.tables = Array.prototype.map.call(document.querySelectorAll('#tables > section'), function (s) {
      return s.id;
    });""")
    items = result.get("items", [])
    check(result.get("first") == "findings" and items and items[0][0] == "growing" and
          where in items[0][1], f"the page opens with the findings, growing first: {result}")
    check(result.get("tables", [""])[0] == "growing", f"the growing section first: {result.get('tables')}")


def test_torch_blocks_compiled(traced):
    """torch.compile's generated code (Inductor's module in its cache folder,
    an FX graph compiled from a string) is a framework's: the site of what it
    allocates is the line that called the compiled function."""
    _, err, reports, _ = scenario(traced, "compiled", CUMEMTRACE_QUIET="0", CUMEMTRACE_FORMAT="json,text")
    report = reports["exit"][0]
    check_verdicts(report, "compiled")
    line = marked_lines("LEAK", "compiled").pop()
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: s for s in report["stacks"]}
    for g in report["growth"]["growing"]:
        stack = stacks[g["stack"]]
        site = frames[stack["frames"][stack["site"]]]
        check(site["file"] == script() and site["line"] == line,
              f"the site is the line that called the compiled model: {site}")
    generated = [f for f in report["frames"] if f.get("file") and
                 (f["file"].startswith("/tmp/torchinductor_") or f["file"].startswith("<eval_with_key>"))]
    check(len(generated) >= 2 and all(f["origin"] == "framework" for f in generated),
          f"generated code is a framework's: {generated}")
    sites = [frames[s["frames"][s["site"]]] for s in report["stacks"] if s["site"] is not None]
    check(not any(f in generated for f in sites), f"never a site: {sites}")
    where = f"{script()}:{line} in compiled"
    check(f"   - growing at {where}: +" in err and "growing at /tmp/torchinductor_" not in err,
          f"the summary names the user's line: {err[-2000:]}")


def test_torch_blocks_cache_idle(traced):
    _, _, reports, _ = scenario(traced, "cache_idle")
    report = reports["exit"][0]
    check(report["fragmentation"]["verdict"] == "idle_cache",
          f"the freed 256 MiB kept by the cache: {report['fragmentation']}")
    device = cache(report)["devices"][0]
    check(device["releasable_bytes"] >= 256 * MiB, f"empty_cache() would return it: {device}")
    check(not report["growth"]["growing"], "nothing growing")


def oom_reports(directory):
    found = []
    for name in sorted(glob.glob(os.path.join(directory, "report-*-oom*.json"))):
        with open(name) as handle:
            found.append(json.load(handle))
    return found


def oom_at(reports, scenario_name):
    """The OOM report of the framework's own failure at the scenario's OOM
    line (CUMEMTRACE_OOM=every also writes one for each failed cudaMalloc)."""
    lines = marked_lines("OOM", scenario_name)
    for report in reports:
        if site_line(report, report["event"]["stack"]) in lines and \
                report["event"]["kind"] == "torch_tensor":
            return report
    return None


def test_torch_blocks_fragmented_at_end(traced):
    """Kept small tensors between freed larger ones, to the program's end: the
    exit report's cache view and verdict are those of that end, not of after
    the interpreter's teardown freed the small ones (then every segment would
    look idle)."""
    _, _, reports, figures = scenario(traced, "fragmented_at_end", CUMEMTRACE_FORMAT="text,json")
    report = reports["exit"][0]
    view = cache(report)
    device = view["devices"][0] if view and view["devices"] else {}
    check(device.get("block_bytes") == figures["allocated"] == 48 * 2 * MiB,
          f"the kept tensors, as the stand-in counts them: {device}, {figures}")
    check(device.get("hole_bytes") == figures["inactive_split"] >= 200 * MiB and
          device.get("holes") == figures["inactive_split_blocks"],
          f"the holes between them, as the stand-in counts them: {device}, {figures}")
    check(report["fragmentation"]["verdict"] == "fragmented", f"{report['fragmentation']}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*.txt"))[0]).read()
    check("PyTorch's cache (at the program's end)" in text, "the text says when")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                            glob.glob(os.path.join(traced.dir, "report-*.json"))[0]],
                           capture_output=True, text=True).stdout
    check(again == text, "read back from the JSON, the same text")


def test_torch_blocks_fragmentation_oom(traced):
    """Two of every three 6 MiB tensors freed, then 40 MiB: free bytes in the
    cache, in holes none of which fits."""
    out, _, _, _ = scenario(traced, "fragmentation_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_OOM="every",
                            CUMEMTRACE_FORMAT="text,json")
    check("fragmentation_oom: out of memory" in out, f"the program saw its OOM: {out!r}")
    report = oom_at(oom_reports(traced.dir), "fragmentation_oom")
    if not check(report is not None, "an OOM report names the OOM line"):
        return
    event = report["event"]
    check(event["verdict"] == "cache_fragmented", f"verdict: {event['verdict']}")
    check(event["kind"] == "torch_tensor" and event["retry"] == "failed", f"{event}")
    check(event["cache"]["unused_bytes"] + event["driver_free"] >= event["size"] >
          event["cache"]["largest_hole_bytes"], f"free enough, no hole fits: {event}")
    texts = []
    for name in glob.glob(os.path.join(traced.dir, "report-*-oom*.txt")):
        with open(name) as handle:
            texts.append(handle.read())
    check(any("cache fragmented" in t and "expandable_segments:True" in t for t in texts),
          "the text says it, and what helps")
    # The framework's report takes the place of the driver's failure it
    # follows, in that report's very files: none written beside it.
    names = sorted(os.path.basename(n) for n in glob.glob(os.path.join(traced.dir, "*oom*")))
    beside = [n for n in names if not re.fullmatch(r"report-\d+-oom-\d+\.(json|txt)", n)]
    check(names and not beside, f"every OOM report in its own name: {names}")


def test_torch_blocks_pool_oom(traced):
    """One OOM story. 512 KiB tensors refused while PyTorch's large pool holds
    6 MiB holes: stderr says the final verdict once, after PyTorch's retry
    (none of the driver's before it), with why no hole served (the size
    pools) and what helps; the file says the same; the exit report's
    findings repeat it, in the file and read back from the JSON."""
    out, err, reports, _ = scenario(traced, "pool_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_QUIET="0",
                                    CUMEMTRACE_FORMAT="json,text")
    check("pool_oom: out of memory" in out, f"the program saw its OOM: {out!r}")
    ooms = reports.get("oom", [])
    if not check(len(ooms) == 1, f"one OOM report: {len(ooms)}"):
        return
    event = ooms[0]["event"]
    check(event["verdict"] == "cache_fragmented" and event["retry"] == "failed" and
          event["size"] == 512 * 1024, f"the framework's verdict: {event}")
    cache_then = event["cache"]
    check(cache_then["large_pool_largest_hole_bytes"] >= 6 * MiB > 512 * 1024 >
          cache_then["small_pool_largest_hole_bytes"], f"the holes by pool: {cache_then}")
    why = cache_then.get("hole_why", "")
    check("up to 6.00 MiB" in why and "large pool" in why and "small pool's 2 MiB segments" in why,
          f"why no hole served, in one clause: {why!r}")
    summary = err[:err.find("==== cumemtrace exit report")]
    check(summary.count("OUT OF MEMORY") == 1 and summary.count("  verdict: ") == 1 and
          "not yet known" not in err and "exhausted" not in summary,
          f"stderr says one verdict, the final one: {summary[-4000:]}")
    check(f"  why no hole served: {why}\n" in summary and "expandable_segments:True" in summary and
          "  at OOM: " in summary, f"with why, what helps and the categories line: {summary[-4000:]}")
    written = [l for l in err.splitlines() if "oom report written to" in l]
    check(len(written) == len(set(written)) == 2, f"each of its files named once: {written}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*-oom*.txt"))[0]).read()
    check("verdict: cache fragmented" in text and f"why no hole served: {why}" in text and
          "not yet known" not in text, "the file says the same")
    said = ooms[0]["findings"][0]
    exit_report = reports["exit"][0]
    first = exit_report["findings"][0]
    check(first["verdict"] == "oom" and first["text"] == said["text"] and
          first["site"] == said["site"], f"the exit findings repeat it: {first} vs {said}")
    check(exit_report["failures"]["last_oom"]["verdict"] == "cache_fragmented",
          f"kept in the JSON: {exit_report['failures'].get('last_oom')}")
    check(not any(f["verdict"] == "failed" for f in exit_report["findings"]),
          f"the OOM's failed calls not counted again: {exit_report['findings']}")
    line = f"   - out of memory at {said['site']}: {said['text']}\n"
    check(err.count(line) == 2, f"stderr: once at the OOM, once in the exit findings: {err[-3000:]}")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                            glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]],
                           capture_output=True, text=True).stdout
    check(line in again, f"read back from the JSON, the same line: {again[:2000]}")


def test_torch_model_oom_said_once(traced):
    """Under the defaults (the first OOM reported), a model's OOM: stderr
    holds one OOM report, PyTorch's, with what the tensors were."""
    out, err, reports, _, _ = model_scenario(traced, "fragmentation_oom", SIMCUDA_MEMORY="1G",
                                             CUMEMTRACE_QUIET="0")
    check("fragmentation_oom: out of memory" in out, f"the program saw its OOM: {out!r}")
    summary = err[:err.find("==== cumemtrace exit report")]
    check(summary.count("OUT OF MEMORY") == 1 and "PyTorch's allocator gave up" in summary and
          "not yet known" not in summary and summary.count("  verdict: ") == 1,
          f"one verdict, PyTorch's: {summary[-4000:]}")
    check("  at OOM: parameters " in summary and "optimizer state " in summary,
          f"the categories line: {summary[-4000:]}")
    verdict = reports["oom"][0]["event"]["verdict"]
    first = reports["exit"][0]["findings"][0]
    check(first["verdict"] == "oom" and first["text"] == reports["oom"][0]["findings"][0]["text"],
          f"the exit findings repeat {verdict}: {first}")


PAGE_OPENING = """
var icicle = document.getElementById('icicle');
result.moment = icicle.dataset.momentName;
result.total = +icicle.dataset.total;
result.title = document.getElementById('icicle-title').textContent;
result.cards = {};
[].forEach.call(document.querySelectorAll('.card'), function (c) {
  result.cards[c.id] = [c.querySelector('.label').textContent, c.dataset.value]; });
result.oomLines = document.querySelectorAll('#memory-chart line.oom').length;
result.legend = (document.querySelector('#kind-toggles .legend-note') || {}).textContent || '';
result.colors = {};
[].forEach.call(document.querySelectorAll('#kind-toggles label'), function (l) {
  var i = l.querySelector('i');
  if (i) { result.colors[l.textContent] = getComputedStyle(i).backgroundColor; } });
result.oomColor = getComputedStyle(document.querySelector('.card.bad .value') ||
  document.body).color;
result.firstFinding = (document.querySelector('#findings li') || {}).dataset || {};"""


def page_of(traced, report_json):
    """The page `cumemtrace html` makes of a report, as it opens: PAGE_OPENING's
    result; None without Chromium."""
    if not find_browser():
        check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
              "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
        return None
    html = report_json[:-len(".json")] + "-page.html"
    made = tool("html", report_json, "-o", html)
    check(made.returncode == 0, f"the page made: {made.stderr!r}")
    result, _ = drive(html, PAGE_OPENING)
    check("error" not in result, f"the page's script ran: {result.get('error')}")
    return result


def test_html_python_opens_held_at_end(traced):
    """The page made from a Python program's default JSON opens on what the
    text report leads with, what the program held when it ended, not the
    0 B its teardown left; and shows no "Leaked 0" card beside it."""
    scenario(traced, "held_at_end")
    report_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    with open(report_json) as handle:
        report = json.load(handle)
    held = sum(g["bytes"] for g in report["held_at_end"])
    check(held == 24 * MiB and not report.get("timeline"), f"held 24 MiB, no timeline: {held}")
    page = page_of(traced, report_json)
    if page is None:
        return
    check(page["moment"] == "program-end" and page["total"] == held and
          "held when the program ended" in page["title"],
          f"opens on the program's end, {held} bytes: {page['moment']} {page['total']} {page['title']!r}")
    check("leaked-bytes" not in page["cards"] and "leaked-blocks" not in page["cards"] and
          page["cards"].get("held-bytes", [None, None])[1] == str(held),
          f"no Leaked 0 card, the held one instead: {page['cards']}")
    check(page["cards"]["ooms"][1] == "0", f"no OOM: {page['cards']['ooms']}")


def test_html_oom_counted_once(traced):
    """Pages of an OOM run's default JSON: the OOM report's opens at the OOM
    and counts one OOM (not the driver's two refusals besides PyTorch's
    failure); the exit report's counts one too and leads with it; tensors
    are not drawn in the OOM's red. With a timeline, the exit report's page
    opens at the OOM."""
    scenario(traced, "pool_oom", SIMCUDA_MEMORY="1G")
    oom_json = glob.glob(os.path.join(traced.dir, "report-*-oom.json"))[0]
    exit_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    with open(exit_json) as handle:
        failures = json.load(handle)["failures"]
    check(sum(1 for f in failures["recent"] if f["oom"]) == 3 and failures["ooms"] == 1 and
          {f["oom_number"] for f in failures["recent"] if f["oom"]} == {1},
          f"three failed calls make the one OOM: {failures}")
    page = page_of(traced, oom_json)
    if page is None:
        return
    check(page["moment"] == "end" and "at the out-of-memory failure" in page["title"],
          f"the OOM report's page opens at the OOM: {page['moment']} {page['title']!r}")
    check(page["cards"]["ooms"][1] == "1", f"one OOM: {page['cards']['ooms']}")
    def red(color):
        rgb = [int(x) for x in re.findall(r"\d+", color or "")][:3]
        return len(rgb) == 3 and rgb[0] > 150 and rgb[1] < 90 and rgb[2] < 90
    check(red(page["oomColor"]) and page["colors"].get("torch_tensor") and
          not red(page["colors"]["torch_tensor"]),
          f"red means the OOM, not the tensors: {page['colors']} vs {page['oomColor']}")
    page = page_of(traced, exit_json)
    check(page["cards"]["ooms"][1] == "1" and page["oomLines"] <= 1,
          f"the exit report's page: one OOM: {page['cards']['ooms']}, {page['oomLines']} lines")
    check(page["firstFinding"].get("verdict") == "oom", f"led by the OOM: {page['firstFinding']}")
    check(page["moment"] == "program-end", f"no timeline: the program's end: {page['moment']}")
    # With a timeline, at the OOM itself: one red line, the tensors live then.
    scenario(traced, "pool_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_EVENTS="64K")
    exit_json = glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]
    page = page_of(traced, exit_json)
    check(page["moment"] == "oom" and "at the out-of-memory failure" in page["title"] and
          page["oomLines"] == 1 and "red: out of memory (1)" in page["legend"],
          f"opens at the OOM, one red line: {page['moment']} {page['title']!r} {page['oomLines']} "
          f"{page['legend']!r}")
    check(page["total"] >= 600 * MiB, f"the tensors live at the OOM: {page['total']}")


def test_torch_blocks_exhaustion_oom(traced):
    out, _, _, _ = scenario(traced, "exhaustion_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_OOM="every")
    report = oom_at(oom_reports(traced.dir), "exhaustion_oom")
    if not check(report is not None, "an OOM report names the OOM line"):
        return
    check(report["event"]["verdict"] == "tensors_exhausted", f"verdict: {report['event']}")
    counters = device_counters(report, 0, "torch_tensor")
    check(counters["num_ooms"] >= 1, f"the tensors' OOMs counted: {counters}")


def test_torch_blocks_teardown(traced):
    """No framework: buffers freed by __del__ at the teardown are held at the
    end, and the line that grew all along is still growing."""
    _, _, reports, _ = scenario(traced, "teardown_ctypes")
    check_verdicts(reports["exit"][0], "teardown_ctypes")
    held = {site_line(reports["exit"][0], g["stack"]) for g in reports["exit"][0]["held_at_end"]}
    check(marked_lines("LEAK", "teardown_ctypes") <= held, f"held at the end: {held}")


def test_torch_blocks_crash(traced):
    """A crash dump of a program holding tensors, symbolized: the tensors
    are live with their line, their cache's segments apart, counted once."""
    scenario(traced, "crash_with_tensors", expect_rc=-6)
    dumps = glob.glob(os.path.join(traced.dir, "report-*.dump"))
    if not check(len(dumps) == 1, f"one crash dump: {dumps}"):
        return
    base = os.path.join(traced.dir, "symbolized")
    done = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "symbolize", dumps[0],
                           "--output", base, "--format", "json"], capture_output=True, text=True)
    check(done.returncode == 0, f"symbolized: {done.stderr!r}")
    with open(base + ".json") as handle:
        report = json.load(handle)
    validate(report, base + ".json")
    tensors = [g for g in report["live"] if g["kind"] == "torch_tensor"]
    check(len(tensors) == 1 and tensors[0]["bytes"] == 12 * MiB and
          site_line(report, tensors[0]["stack"]) in marked_lines("HELD", "crash_with_tensors"),
          f"4 x 3 MiB tensors with their line: {tensors}")
    view = cache(report)
    check(view and view["view"] == "blocks" and view["devices"] and
          view["devices"][0]["block_bytes"] == 12 * MiB, f"the cache's view: {view}")
    segments = [s["id"] for s in report["stacks"] if s["cache_segment"] == "torch_tensor"]
    check(segments, "the segments are known as such")


def test_torch_blocks_threads(traced):
    """Four threads allocating through the stand-in (its lock, then ours)
    while the main thread takes snapshots (ours only): no deadlock, and the
    counts stay exact."""
    start = time.time()
    out, _, reports, _ = scenario(traced, "threads_and_snapshots")
    check(time.time() - start < 60, "done in time")
    check("snapshots" in out, f"finished: {out!r}")
    report = reports["exit"][0]
    counters = device_counters(report, 0, "torch_tensor")
    check(counters["allocation"]["current"] == 0 and
          counters["allocation"]["allocated"] == counters["allocation"]["freed"],
          f"every tensor freed and seen freed: {counters}")
    check(report["tracer"]["lost"]["unknown_free"] == 0, "no free of an unknown tensor")


def native_and_nodes(stack):
    """A stack's native frames' function names (those before its first
    Python frame), and the backward nodes whose apply() is among them."""
    native = [f["function"] or "" for f in itertools.takewhile(lambda f: not f["python"], stack)]
    found = (re.search(r"(\w+)::apply\(", name) for name in native)
    return native, [m.group(1) for m in found if m]


def test_torch_blocks_backward(traced):
    """Tensors of backward nodes, made on the autograd engine's thread (no
    Python there): by default each stack is the node's apply() and the main
    thread's Python frames, nothing unwound; growth names the line that ran
    the backward. With CUMEMTRACE_BLOCK_DEPTH at the full depth, the native
    frames are unwound as on any other thread."""
    leak = marked_lines("LEAK", "backward_nodes")
    for depth, unwound in (("0", False), ("32", True)):
        _, err, reports, _ = scenario(traced, "backward_nodes", CUMEMTRACE_BLOCK_DEPTH=depth)
        report = reports["exit"][0]
        check_verdicts(report, "backward_nodes")
        frames = {f["id"]: f for f in report["frames"]}
        stacks = {s["id"]: [frames[i] for i in s["frames"]] for s in report["stacks"]}
        groups = [g for g in report["live"] if g["kind"] == "torch_tensor" and
                  site_line(report, g["stack"]) in leak]
        check(sorted(g["bytes"] for g in groups) == [30 * MiB, 30 * MiB],
              f"depth {depth}: two live groups of 30 MiB at the LEAK line: "
              f"{[(g['bytes'], site_line(report, g['stack'])) for g in report['live']]}")
        nodes = set()
        for group in groups:
            stack = stacks[group["stack"]]
            native, applies = native_and_nodes(stack)
            nodes.update(applies)
            marker = stack[len(native)] if len(native) < len(stack) else {}
            check(marker.get("function") == "[main thread, at that moment]",
                  f"depth {depth}: the main thread's frames follow the native ones: {marker}")
            if unwound:
                check(len(applies) == 1 and any("gradient" in name for name in native),
                      f"depth {depth}: the unwound frames, apply() among them: {native}")
            else:
                check(len(native) == 1 and len(applies) == 1,
                      f"depth {depth}: the node's apply() alone, nothing unwound: {native}")
        check(nodes == {"SimMmBackward", "SimAddBackward"},
              f"depth {depth}: each node's tensors under its own apply(): {nodes}")
    # The marker is a placeholder: no command shows it as a frame (the JSON
    # keeps it, hidden); the text says in words whose frames follow it.
    path = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    command = os.path.join(support.BUILD, "cumemtrace")
    outputs = {}
    for args in (["report", path], ["report", path, "--all-frames"], ["merge", path, path],
                 ["diff", path, path], ["merge", path, path, "--all-frames", "--format", "json"]):
        done = subprocess.run([command] + args, capture_output=True, text=True)
        check(done.returncode == 0, f"{args}: {done.stderr}")
        outputs[" ".join(args[:1] + args[3:])] = done.stdout
    folded = os.path.join(traced.dir, "exported.folded")
    subprocess.run([command, "export", "--format", "folded", path, "-o", folded, "--all-frames"],
                   check=True)
    outputs["folded"] = open(folded).read()
    for name, output in outputs.items():
        check("[main thread, at that moment]" not in output and "runs no Python:" not in output,
              f"{name}: no placeholder shown as a frame: {output[:3000]}")
    check("this thread runs no Python; the main thread's frames at that moment" in outputs["report"]
          and "this thread runs no Python; the main thread's frames" in outputs["merge"],
          f"said in words instead: {outputs['merge'][:3000]}")
    marker = next(f for f in report["frames"] if f["python"] and f["line"] == 0)
    check(all(s["hidden"] and s["frames"].index(marker["id"]) in s["hidden"]
              for s in report["stacks"] if marker["id"] in s["frames"]),
          "the JSON keeps the marker, hidden")


def test_torch_threads_come_and_go(traced):
    """Two hundred short threads, each making its tensors from the same
    lines: the table of stacks known by their frames' key that each maps
    (some 200 KiB) is unmapped when it ends, and every tensor keeps its own
    line, found by the key or not. The tables touch some 12 KiB each: left
    behind, 200 threads grew the anonymous memory by some 3,000 KiB, against
    some 700 when they are not (the Python objects kept). Under a sanitizer,
    whose runtime keeps memory of its own for each thread, only the lines
    are checked."""
    out, _, reports, _ = scenario(traced, "threads_come_and_go")
    line = next(l for l in out.splitlines() if l.startswith("mapped: "))
    mapped = json.loads(line[len("mapped: "):])
    check(os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") or
          mapped["after"] - mapped["before"] < mapped["threads"] * 8,
          f"no table left behind by each of {mapped['threads']} threads (KiB): {mapped}")
    report = reports["exit"][0]
    by_line = {}
    for held in report["held_at_end"]:
        if held["kind"] == "torch_tensor":
            where = site_line(report, held["stack"])
            by_line[where] = by_line.get(where, 0) + held["blocks"]
    leak = marked_lines("LEAK", "threads_come_and_go")
    held = marked_lines("HELD", "threads_come_and_go")
    check(len(leak) == 1 and len(held) == 1 and
          by_line == {min(leak): 3 * 210, min(held): 210},
          f"3 tensors a thread at the LEAK line, 1 at the HELD line: {by_line}")


def check_frames_reused(out, reports, minimum=81):
    """frames_reused's tracebacks (or another scenario's, printed the same
    way), as it printed them, are the report's tensors' stacks, each with as
    many live blocks; at least `minimum` of them (frames_reused's: above 80)."""
    line = next(l for l in out.splitlines() if l.startswith("frames_reused: "))
    expected = {tuple(tuple(f) for f in entry[:-1]): entry[-1]
                for entry in json.loads(line[len("frames_reused: "):])}
    report = reports["exit"][0]
    frames = {f["id"]: f for f in report["frames"]}
    found = {}
    for stack in report["stacks"]:
        if stack["kind"] == "torch_tensor":
            where = tuple((frames[i]["file"], frames[i]["function"], frames[i]["line"])
                          for i in stack["frames"] if frames[i]["python"])
            found[where] = found.get(where, 0) + stack["live_blocks"]
    wrong = sorted(str((where[:2], expected.get(where), found.get(where)))
                   for where in set(expected) | set(found)
                   if expected.get(where) != found.get(where))
    check(len(expected) >= minimum and not wrong,
          f"{len(expected)} tracebacks; {len(wrong)} with other counts: {wrong[:4]}")


def test_torch_blocks_frames(traced):
    """Frames that a walk remembering the last one's could take for another
    (the same call depth at another line or function, generators, recursion,
    code compiled again at a freed code object's address): every tensor's
    stack holds exactly the Python frames the program saw, in two threads."""
    out, _, reports, _ = scenario(traced, "frames_reused")
    check_frames_reused(out, reports)


def under_each_python(traced, versions, name, **env):
    """Scenario `name` of torch_blocks.py under each CPython of `versions`
    found here: [(python, stdout, stderr, {reason: [reports]})]. Skips where
    there is none (a clean Debian 12 has only its 3.11), or where the
    stand-in for PyTorch was not built."""
    pythons = [p for v in versions for p in support.interpreters(v)]
    if not pythons:
        pytest.skip(f"no CPython {' or '.join(versions)} on PATH or in pyenv")
    scenario(traced, "held_at_end")          # skips where the stand-in was not built
    runs = []
    for python in pythons:
        print(f"{name} under {python}")
        out, err, reports, _ = run_scenario(traced, "torch_blocks.py", name, (),
                                            torch_env(**env), python=python)
        runs.append((python, out, err, reports))
    return runs


def test_torch_blocks_frames_watched(traced):
    """The same under each CPython from 3.12 on found here, whose code
    objects the tracer watches being freed (PyCode_AddWatcher): its frames'
    keys then read no code object, and a code object compiled again where
    one was freed must still find its own stack."""
    for python, out, err, reports in under_each_python(traced, ("3.12", "3.13", "3.14"),
                                                       "frames_reused", CUMEMTRACE_DEBUG="1"):
        check("watching code objects" in err, f"{python}: code objects watched: {err[-800:]!r}")
        check_frames_reused(out, reports)


DIRECT = "thread states read from _PyRuntime"


def test_torch_blocks_state_read_directly(traced):
    """From 3.11 on a tensor's event reads its thread's state and whether the
    interpreter runs straight from _PyRuntime, once the key there gave a
    thread the state the interpreter's call gave it: one debug line says so,
    once, and every tensor of two threads still has its own stack."""
    for python, out, err, reports in under_each_python(traced, ("3.11", "3.12", "3.13"),
                                                       "frames_reused", CUMEMTRACE_DEBUG="1"):
        check(err.count(DIRECT) == 1 and "through PyGILState" not in err,
              f"{python}: read directly, checked once: {err[-800:]!r}")
        check_frames_reused(out, reports)


def test_torch_blocks_state_read_directly_after_fork(traced):
    """A forked child's interpreter may make its key anew: the child checks
    again (a second debug line), and the tensors it keeps are at its line."""
    if sys.version_info < (3, 11):
        pytest.skip("3.10's frames are not keyed: the state is asked for as before")
    scenario(traced, "held_at_end")          # skips where the stand-in was not built
    program = (
        "import os, sys\n" + IMPORT_TORCH_BLOCKS +
        "def make(n):\n"
        "    return [t.Tensor(1 << 20) for _ in range(n)]  # MADE\n"
        "parent = make(4)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    child = make(5)\n"
        "    sys.exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert status == 0, status\n")
    _, err, reports, _ = run_program(traced, "torch_state_fork.py", program,
                                     CUMEMTRACE_DEBUG="1")
    check(err.count(DIRECT) == 2, f"checked in the parent and in the child: {err[-800:]!r}")
    lines = program.splitlines()
    made = lines.index("    return [t.Tensor(1 << 20) for _ in range(n)]  # MADE") + 1
    callers = {lines.index("parent = make(4)") + 1: "parent",
               lines.index("    child = make(5)") + 1: "child"}
    found = []
    for report in reports:
        frames = {f["id"]: f for f in report["frames"]}
        for stack in report["stacks"]:
            at = {frames[i]["line"] for i in stack["frames"]
                  if frames[i]["python"] and frames[i]["file"].endswith("torch_state_fork.py")}
            if stack["kind"] == "torch_tensor" and made in at:
                found.append((report["process"]["pid"],
                              [callers[n] for n in sorted(at & set(callers))],
                              stack["allocations"]))
    check(len({pid for pid, _, _ in found}) == 2 and
          sorted((who, n) for _, who, n in found) == [(["child"], 5), (["parent"], 4)],
          f"the parent's 4 tensors and the child's 5, each in its own report: {found}")


def test_torch_blocks_frames_no_watcher_left(traced):
    """A program that took every code watcher before the tracer could
    (3.12 on): one debug line says so, the keys take the code objects'
    filenames again, and every tensor still finds its own stack."""
    for python, out, err, reports in under_each_python(
            traced, ("3.12", "3.13", "3.14"), "frames_reused", CUMEMTRACE_DEBUG="1",
            TORCH_BLOCKS_TAKE_CODE_WATCHERS="1"):
        check("no code watcher left" in err and "watching code objects" not in err,
              f"{python}: no watcher left: {err[-800:]!r}")
        check_frames_reused(out, reports)


def test_torch_blocks_same_file_again(traced):
    """Code compiled again and again under one file name where the last
    one's code objects were freed, at one line or the next: each tensor's
    stack has its own line, under each CPython 3.12 or 3.13 found here, whose
    code objects' versions (co_version) tell the new ones from the freed.
    Not 3.14 on: the offsets those publish do not include co_version. 3.10
    and 3.11 have none, and may show the freed one's line."""
    for _, out, _, reports in under_each_python(traced, ("3.12", "3.13"), "same_file_again"):
        check_frames_reused(out, reports, minimum=2)


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


def test_torch_blocks_backward_keyed(traced):
    """Many backward nodes to a call, run while the main thread waits at two
    places of different depths. After the engine thread's first tensors,
    each stack is found by its key (the node, and the reading of the main
    thread's frames it borrows), with no walk. Every kept gradient must still
    be under its own node's apply() and the line that ran it, with the calls
    around that line."""
    (near,), (far,) = marked_lines("NEAR", "backward_depths"), marked_lines("FAR",
                                                                           "backward_depths")
    _, err, reports, _ = scenario(traced, "backward_depths")
    report = reports["exit"][0]
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: [frames[i] for i in s["frames"]] for s in report["stacks"]}
    found = {}
    for group in report["live"]:
        if group["kind"] != "torch_tensor":
            continue
        stack = stacks[group["stack"]]
        nodes = tuple(sorted(set(native_and_nodes(stack)[1])))
        calls = tuple(f["function"] for f in stack
                      if f["python"] and (f.get("file") or "").endswith("torch_blocks.py"))[:2]
        where = (site_line(report, group["stack"]), nodes, calls)
        found[where] = found.get(where, 0) + group["bytes"]
    want = {(near, ("SimMmBackward",), ("backward_depths", "<module>")): 20 * MiB,
            (near, ("SimAddBackward",), ("backward_depths", "<module>")): 20 * MiB,
            (far, ("SimMmBackward",), ("backward_deeper", "backward_depths")): 20 * MiB,
            (far, ("SimAddBackward",), ("backward_deeper", "backward_depths")): 20 * MiB}
    check(found == want, f"each gradient under its node and its line: {found}, {err[-300:]!r}")


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


def test_torch_blocks_fork(traced):
    """fork() while threads allocate through the stand-in (a child inherits
    its lock as it was, as with PyTorch, so the child only makes CUDA calls
    of its own): every child exits, and writes its own report.

    Under AddressSanitizer the forks wait until no thread is inside an
    allocation: GCC 12's ASan has no fork handler for its allocator, so a
    child forked while a thread is in malloc waits for ever at its own next
    malloc of that size, traced or not (seen: the child's exit report,
    in libdw's strdup, 2 runs in 37)."""
    gate = "threading.Lock()" if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") \
        else "contextlib.nullcontext()"
    program = (
        "import contextlib, ctypes, os, signal, sys, threading, time\n" + IMPORT_TORCH_BLOCKS +
        "cudart = ctypes.CDLL('libcudart.so.13')\n"
        "# The first CUDA calls load libraries: a fork during a dlopen leaves the\n"
        "# child's loader inconsistent, traced or not (python_fork.py says so too).\n"
        "first = t.Tensor(1 << 20)\n" + CUDA_CALL +
        "del first  # a child's exit frees no tensor under a lock held at the fork\n"
        f"gate = {gate}\n"
        "stop = time.time() + 1.0\n"
        "def churn():\n"
        "    while time.time() < stop:\n"
        "        with gate:\n"
        "            x = [t.Tensor(64 << 10) for _ in range(4)]\n"
        "            del x\n"
        "workers = [threading.Thread(target=churn) for _ in range(3)]\n"
        "[w.start() for w in workers]\n"
        "children = 0\n"
        "while time.time() < stop:\n"
        "    with gate:\n"
        "        pid = os.fork()\n"
        "    if pid == 0:\n"
        "        signal.alarm(20)\n" + textwrap.indent(CUDA_CALL, " " * 8) +
        "        sys.exit(0)\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    assert status == 0, status\n"
        "    children += 1\n"
        "[w.join() for w in workers]\n"
        "print('children', children)\n")
    start = time.time()
    out, err, _, _ = run_program(traced, "torch_blocks_fork.py", program)
    check(out.startswith("children ") and int(out.split()[1]) > 0, f"children exited: {out!r}")
    check(time.time() - start < 60, "done in time")


# ---- CuPy and JAX, played by stand-in packages (tests/sim/python) ----------

CUPY, JAX = "cupy_blocks.py", "jax_blocks.py"


REGION = 256 * MiB      # the JAX stand-in's preallocated region (SIMJAX_PREALLOCATE)


def python_scenario(traced, file, name, args=(), expect_rc=0, preload=True, **extra):
    """Run one scenario of cupy_blocks.py or jax_blocks.py, with the stand-in
    packages on PYTHONPATH (run_scenario's answer)."""
    env = {"LD_LIBRARY_PATH": os.path.join(support.BUILD, "sim"),
           "PYTHONPATH": os.path.join(support.SOURCE, "tests", "sim", "python"),
           "CUMEMTRACE_SAMPLE_MS": "40", "CUMEMTRACE_QUIET": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}     # nothing written into the source tree
    env.update(extra)
    return run_scenario(traced, file, name, args, env, expect_rc, preload)


def cache_device(report, kind, device=0):
    view = cache(report, kind)
    found = [d for d in (view or {}).get("devices", []) if d["device"] == device]
    return found[0] if found else {}


def lines_of(report, groups, file):
    return {site_line(report, g["stack"], file) for g in groups}


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


# ---- what the tensors are: torch_model.py's stand-in modules and optimizer ----

def model_scenario(traced, name, expect_rc=0, **env):
    """Run one scenario of torch_model.py: run_scenario's answer and what
    the program's own objects held ("held:")."""
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                       "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    out, err, reports, figures = run_scenario(traced, "torch_model.py", name, (), torch_env(**env),
                                              expect_rc)
    held = {}
    for line in out.splitlines():
        if line.startswith("held: "):
            held = json.loads(line[len("held: "):])
    return out, err, reports, figures, held


def check_split(report, held, what):
    """The report's parameters, gradients and optimizer state are what the
    program's objects hold; its largest parameters are named."""
    classes = report.get("classes") or {}
    if not check(classes.get("known"), f"{what}: the split is known: {classes}"):
        return
    for name in ("parameters", "gradients", "optimizer_state"):
        check(classes[name]["bytes"] == held[name],
              f"{what}: {name} {classes[name]['bytes']}, the objects hold {held[name]}")
    check(classes["modules"] >= 1 and classes["optimizers"] == 1, f"{what}: {classes}")
    names = [h["name"] for h in classes["holders"]]
    check(held["largest"] in names and "encoder.layers.3.linear1.weight" in names,
          f"{what}: the largest parameters by their qualified names: {names}")
    for h in classes["holders"]:
        if h["name"] == "encoder.layers.3.linear1.weight":
            check(h["parameters"] == h["gradients"] == h["optimizer_state"] // 2 == 4 * 128 * 512,
                  f"{what}: that parameter, its gradient and its state: {h}")


def check_counters_now(report, what):
    """PyTorch's counters read at the report's moment, and equal to the
    tracer's own view of the cache then."""
    torch = report.get("torch")
    if not check(torch is not None, f"{what}: PyTorch's counters are there"):
        return
    check(torch["now"] and torch["why_not"] is None, f"{what}: read at its moment: {torch}")
    view = cache(report)
    device = view["devices"][0] if view and view["devices"] else {}
    figures = torch["devices"][0]
    check(figures["requested_bytes"] == device.get("block_bytes") and
          figures["reserved_bytes"] == device.get("reserved_bytes"),
          f"{what}: PyTorch's counters {figures} against the cache's view {device}")


def test_torch_model_classes(traced):
    """Parameters, gradients and Adam's state by their parameters' names, and
    the leaking line as the rest's largest site: in a snapshot and at the end."""
    _, _, reports, _, held = model_scenario(traced, "training", CUMEMTRACE_FORMAT="text,json,html")
    snapshots, end = reports.get("snapshot", []), reports.get("exit", [])
    if not check(len(snapshots) == 1 and len(end) == 1, f"a snapshot and the end: {reports}"):
        return
    leaks = marked_lines("LEAK", "training", "torch_model.py")
    for report, what in ((snapshots[0], "snapshot"), (end[0], "exit")):
        check_split(report, held, what)
        classes = report["classes"]
        sites = [site_line(report, s["stack"], "torch_model.py") for s in classes["rest_sites"]]
        check(sites and sites[0] in leaks, f"{what}: the rest's largest site is the leak: {sites}")
    check(snapshots[0]["classes"]["read"] == "report" and snapshots[0]["torch"]["now"],
          f"the snapshot's reading is its own: {snapshots[0]['torch']}")
    check(end[0]["classes"]["read"] == "python_exit" and
          end[0]["classes"]["rest"]["bytes"] >= 40 * 256 * 1024,
          f"the end's, with the 40 kept tensors: {end[0]['classes']}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*[0-9].txt"))[0]).read()
    check("What the tensors are (at the program's end), from" in text and
          "encoder.layers.3.linear1.weight: 256 KiB; 256 KiB; 512 KiB" in text,
          "the text says it, by name")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                            glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]],
                           capture_output=True, text=True).stdout
    check(again == text, "read back from the JSON, the same text")
    if not find_browser():
        check(os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1",
              "no chromium (CUMEMTRACE_TEST_NO_BROWSER=1 skips)")
        return
    result, _ = drive(glob.glob(os.path.join(traced.dir, "report-*[0-9].html"))[0], """
    function cells(id) {
      return [].map.call(document.querySelectorAll('#' + id + ' tbody tr'), function (r) {
        return [].map.call(r.cells, function (c) { return c.textContent; }); });
    }
    result.heading = document.querySelector('#classes h2').textContent;
    result.split = cells('classes-table');
    result.holders = cells('class-holders-table');
    result.rest = cells('class-rest-table');""")
    split = {row[0]: row[1] for row in result.get("split", [])}
    check(split.get("parameters") == format_bytes(held["parameters"]) and
          split.get("optimizer state") == format_bytes(held["optimizer_state"]),
          f"the page's split: {result.get('split')} vs {held}")
    check(any(row[0] == "encoder.layers.3.linear1.weight" for row in result.get("holders", [])) and
          len(result.get("rest", [])) >= 1 and "program's end" in result.get("heading", ""),
          f"the page names the parameters and the rest's sites: {result}")


def check_model_oom(traced, name, verdict):
    out, _, _, _, held = model_scenario(traced, name, SIMCUDA_MEMORY="1G", CUMEMTRACE_OOM="every",
                                        CUMEMTRACE_FORMAT="text,json")
    check(f"{name}: out of memory" in out, f"the program saw its OOM: {out!r}")
    reports = oom_reports(traced.dir)
    lines = marked_lines("OOM", name, "torch_model.py")
    report = next((r for r in reports if r["event"]["kind"] == "torch_tensor" and
                   site_line(r, r["event"]["stack"], "torch_model.py") in lines), None)
    if not check(report is not None, f"{name}: an OOM report names the OOM line"):
        return
    check(report["event"]["verdict"] == verdict, f"{name}: verdict {report['event']}")
    check(report["torch"] and report["torch"]["read"] == "oom_observer",
          f"{name}: read in the OOM observer: {report['torch']}")
    check_counters_now(report, name)
    check_split(report, held, name)
    check(report["classes"]["read"] == "oom_observer", f"{name}: {report['classes']}")
    texts = [open(n).read() for n in glob.glob(os.path.join(traced.dir, "report-*-oom*.txt"))]
    check(any("at OOM: parameters " in t and "optimizer state " in t and ", of which " in t
              for t in texts), f"{name}: the OOM's text says what the tensors were")
    # The driver's failures before it could not read Python: they say so.
    for r in reports:
        if r is not report and r["torch"] and not r["torch"]["now"]:
            check("inside a CUDA call" in (r["torch"]["why_not"] or ""),
                  f"{name}: why not at that moment: {r['torch']}")


def test_torch_model_exhaustion_oom(traced):
    check_model_oom(traced, "exhaustion_oom", "tensors_exhausted")


def test_torch_model_fragmentation_oom(traced):
    check_model_oom(traced, "fragmentation_oom", "cache_fragmented")


def test_torch_model_no_modules(traced):
    """Tensors and no module: one line says the split is not known, and why."""
    _, _, reports, _, _ = model_scenario(traced, "no_modules", CUMEMTRACE_FORMAT="text,json")
    classes = reports["exit"][0]["classes"]
    check(not classes["known"] and "no nn.Module" in classes["why"], f"{classes}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*[0-9].txt"))[0]).read()
    check("What the tensors are: not known: the program holds no nn.Module or optimizer" in text,
          "the text says it in one line")


# ---- who holds the tensors: torch_holders.py's objects ----------------------

UNREACHED = "<no Python root reaches it: held from C, or garbage not yet collected>"
HOLDERS = {"outs": "__main__.model.outs[*]", "class": 'KeepOutputs.outputs[*]["preds"]',
           "closure": "make_store.<locals>.store.<closure>.kept[*]",
           "nested": '__main__.cache["layers"][*][*]', "views": "__main__.views[*]",
           "cycle": "__main__.b.tensor", "from_c": UNREACHED, "thread": "loader:worker().mine[*]",
           "table": "__main__.sessions[*]", "escape": '__main__.record["?[2J?"]'}


def holders_scenario(traced, **env):
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                       "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    out, err, reports, _ = run_scenario(traced, "torch_holders.py", "everything", (),
                                        torch_env(**env))
    lines = {prefix: json.loads(line[len(prefix):]) for line in out.splitlines()
             for prefix in ("held: ", "gc: ", "gc at exit: ") if line.startswith(prefix)}
    return out, reports, lines


def test_torch_holders(traced):
    """Globals, a class's attribute, a closure, nested containers, a dict
    of records (its keys named, control characters as ?) and a table (its
    keys not), a cycle,
    views of one storage, a thread's locals, the caller's locals and a
    tensor only C holds: each group is named by the path that holds it, at
    a snapshot and at the end, with its tensors and bytes; the findings'
    growing lines and the text say who holds them; read back, the same."""
    out, reports, lines = holders_scenario(traced, CUMEMTRACE_FORMAT="text,json")
    held = lines.get("held: ", {})
    snapshots, end = reports.get("snapshot", []), reports.get("exit", [])
    if not check(len(snapshots) == 1 and len(end) == 1 and held, f"a snapshot and the end: {out}"):
        return
    for report, what in ((snapshots[0], "snapshot"), (end[0], "exit")):
        walk = report["holders"]
        check(walk["known"] and walk["cut_short"] is None and walk["objects"] > 1000,
              f"{what}: the walk was complete: {walk['why']} {walk['cut_short']}")
        by_line = {site_line(report, p["stack"], "torch_holders.py"): p for p in walk["paths"]}
        local = "everything().local[*]" if what == "snapshot" else "__main__.KEPT[*][*]"
        for name, path in {**HOLDERS, "local": local}.items():
            found = [by_line.get(n) for n in marked_lines("HOLD", name, "torch_holders.py")]
            p = found[0] if found else None
            if not check(p is not None, f"{what}: {name} has a holder: {walk['paths']}"):
                continue
            check(p["path"] == path and [p["tensors"], p["bytes"]] == held[name],
                  f"{what}: {name} held by {path}, {held[name]}: {p}")
        views = by_line.get(min(marked_lines("HOLD", "views", "torch_holders.py")))
        check(views and views["blocks"] == 1, f"{what}: four tensors on one block: {views}")
        growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        for words in ("held by model.outs, a list of 30 tensors",
                      'held by KeepOutputs.outputs[*]["preds"] (30 tensors)',
                      "held by make_store.<locals>.store.<closure>.kept, a list of 30 tensors"):
            check(any(words in g for g in growing), f"{what}: a growing line says {words}: {growing}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*[0-9].txt"))[0]).read()
    check("      held by __main__.model.outs[*] (list, 30 tensors, 7.50 MiB)" in text,
          f"the text's growing entry names the holder: {text}")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                            glob.glob(os.path.join(traced.dir, "report-*[0-9].json"))[0]],
                           capture_output=True, text=True).stdout
    check(again == text, "read back from the JSON, the same text")


def test_torch_holders_graph(traced):
    """Losses kept with their graphs: the activations only a graph keeps
    (a node's saved tensors, another node's through next_functions) are
    held by "the graph of" the losses' path, at a snapshot and at the end,
    and the findings say so; a saved tensor behind an unpack hook is never
    read (the hook never runs) and the program's output is as untraced."""
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                       "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    out, _, reports, _ = run_scenario(traced, "torch_holders.py", "graphs", (), torch_env())
    held = next((json.loads(line[6:]) for line in out.splitlines() if line.startswith("held: ")),
                {})
    graph = "the graph of __main__.losses[*]"
    paths = {"graph_act": graph, "graph_hidden": graph, "losses": "__main__.losses[*]"}
    for report in reports.get("snapshot", []) + reports.get("exit", []):
        walk = report["holders"]
        by_line = {site_line(report, p["stack"], "torch_holders.py"): p for p in walk["paths"]}
        for name, path in paths.items():
            p = by_line.get(min(marked_lines("HOLD", name, "torch_holders.py")))
            check(p is not None and p["path"] == path and [p["tensors"], p["bytes"]] == held[name],
                  f"{report['reason']}: {name} held by {path}, {held.get(name)}: {p}")
        growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        check(any(g.endswith("— held by the graph of losses[*] (30 tensors)") for g in growing),
              f"{report['reason']}: a growing line names the graph: {growing}")
    check(len(reports.get("snapshot", [])) == 1 and len(reports.get("exit", [])) == 1,
          f"a snapshot and the end: {out}")
    check("unpacked: 0" in out, f"no unpack hook ran: {out}")
    plain, _, _, _ = run_scenario(traced, "torch_holders.py", "graphs", (), torch_env(),
                                  preload=False)
    results = [[line for line in o.splitlines() if line.startswith(("held:", "result:"))]
               for o in (out, plain)]
    check(results[0] == results[1] and len(results[0]) == 2,
          f"the program's output as untraced: {results}")


def test_torch_holders_untouched(traced):
    """The walk changes nothing the program can see: the collector is as
    enabled, with the same thresholds, no collection ran and the older
    generations' counts are the same across a snapshot and at the end, and
    the program's output is as untraced. CUMEMTRACE_HOLDERS=0: no walk,
    said in one line."""
    out, reports, lines = holders_scenario(traced, CUMEMTRACE_FORMAT="json")
    check(lines.get("gc: ") and lines["gc: "]["before"] == lines["gc: "]["after"],
          f"the collector's state across a snapshot: {lines.get('gc: ')}")
    check(lines.get("gc at exit: ") == lines.get("gc: ", {}).get("after"),
          f"and at the end, after the exit report's walk: {lines.get('gc at exit: ')}")
    check(reports["snapshot"][0]["holders"]["known"], "the walk ran")
    plain, _, _, _ = run_scenario(traced, "torch_holders.py", "everything", (), torch_env(),
                                  preload=False)
    results = [[line for line in o.splitlines() if line.startswith(("held:", "result:"))]
               for o in (out, plain)]
    check(results[0] == results[1] and len(results[0]) == 2,
          f"the program's output as untraced: {results}")
    _, off, _ = holders_scenario(traced, CUMEMTRACE_FORMAT="json", CUMEMTRACE_HOLDERS="0")
    walk = off["snapshot"][0]["holders"]
    check(not walk["known"] and "CUMEMTRACE_HOLDERS=0" in walk["why"] and not walk["paths"],
          f"off: no walk, and why: {walk}")


def test_torch_holders_cut_short(traced):
    """A walk past its budget says so in one line, and names what it reached."""
    _, reports, _ = holders_scenario(traced, CUMEMTRACE_FORMAT="text,json",
                                     CUMEMTRACE_HOLDERS_MS="1", SIMTORCH_HOLDERS_HEAP="300000")
    walk = reports["snapshot"][0]["holders"]
    check(walk["known"] and walk["cut_short"] == "after 0.001 s" and walk["objects"] < 300000,
          f"cut short, and where: {walk['cut_short']}, {walk['objects']} objects")
    text = open(glob.glob(os.path.join(traced.dir, "*holders*.txt"))[0]).read()
    check("who holds them: the walk from Python's roots was cut short after 0.001 s" in text,
          f"the text says it in one line: {text}")


def test_cupy_jax_holders(traced):
    """CuPy's and JAX's arrays are named by who holds them too: the growing
    line of each names the list that keeps its arrays."""
    for file, arrays in ((CUPY, 60), (JAX, 40)):
        _, _, reports, _ = python_scenario(traced, file, "training_mix",
                                           CUMEMTRACE_FORMAT="json")
        report = reports["exit"][0]
        growing = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        check(report["holders"]["known"] and
              any(g.endswith(f"— held by HELD[*], a list of {arrays} arrays") for g in growing),
              f"{file}: the growing line names the list: {growing}, {report['holders']}")


# ---- the program's end, everywhere (kept_globals.py) ----------------------
#
# Buffers kept in a module global until the interpreter's teardown frees
# them: exit reports are left with little live, so merge, diff, the exports
# and live read what was held when the program ended.


def test_torch_model_untouched(traced):
    """The tracer's own Python (what the tensors are, read at a snapshot and
    at exit) reads no attribute of the program's other objects: a deprecated
    one that warns at every read is never read, with -W error or without;
    the warning filters, the gc's state and the modules loaded are as they
    were, and the program's output as untraced."""
    if not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                       "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    for options in (["-W", "error"], []):
        runs = {}
        for tracer in (True, False):
            out, err, reports, _ = traced.run(sys.executable,
                                              [*options, script("torch_model.py"), "untouched"],
                                              env=torch_env(), preload=tracer)
            states = [json.loads(line[len("state: "):]) for line in out.splitlines()
                      if line.startswith("state: ")]
            runs[tracer] = (out, [line for line in err.splitlines()
                                  if not line.startswith("cumemtrace:")], states, reports)
        out, err, states, reports = runs[True]
        check(reports and reports[-1].get("classes", {}).get("known"),
              f"{options}: the tensors were classed: {[r.get('classes') for r in reports]}")
        check(len(states) == 1 and states[0]["touched"] == [] and
              "touched at exit: []" in out,
              f"{options}: no attribute of the program's object read: {states} {out[-300:]!r}")
        check(states and states[0]["before"] == states[0]["after"],
              f"{options}: the interpreter's state as it was: {states}")
        check(err == runs[False][1] and "Warning" not in "".join(err),
              f"{options}: the program's stderr as untraced: {err} vs {runs[False][1]}")
        check([line for line in out.splitlines() if not line.startswith("stats:")] ==
              [line for line in runs[False][0].splitlines() if not line.startswith("stats:")],
              f"{options}: the program's stdout as untraced: {out!r} vs {runs[False][0]!r}")


def kept(traced, mode, keep_mib, directory, name, *extra, expect_rc=0, **env):
    """Run kept_globals.py; its exit report's path (directory/name.json)."""
    settings = torch_env() if mode == "torch" else {"LD_LIBRARY_PATH": os.path.join(support.BUILD, "sim")}
    if mode == "torch" and not os.path.exists(os.path.join(support.BUILD, "sim", "torch", "lib",
                                                            "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    settings.update({"CUMEMTRACE_OUTPUT": os.path.join(directory, name), "CUMEMTRACE_QUIET": "1",
                     "CUMEMTRACE_SAMPLE_MS": "20"})
    settings.update(env)
    traced.run(sys.executable, [script("kept_globals.py"), mode, str(keep_mib), *extra], env=settings,
               expect_rc=expect_rc)
    return os.path.join(directory, name + ".json")


def kept_line(tag="KEPT"):
    return min(marked_lines_of("kept_globals.py", tag))


def marked_lines_of(name, tag):
    with open(script(name)) as handle:
        return {n for n, text in enumerate(handle, 1) if text.rstrip().endswith(f"# {tag}")}


def has_line(frames, line, file="kept_globals.py"):
    """A list of frames ({file, line} dicts, or "function (file:line)"
    names) holds `file`:`line`."""
    for f in frames:
        if isinstance(f, dict) and (f.get("file") or "").endswith(file) and f.get("line") == line:
            return True
        if isinstance(f, str) and f.endswith(f"{file}:{line})"):
            return True
    return False


def test_end_state_diff(traced):
    """Two runs that differ by 400 MiB kept in a global, freed by the
    teardown: diff compares what each held at the program's end (by
    default, and says so) and names the line; --at exit sees what the
    teardown left; --at peak each stack's highest; a report whose end was
    not seen makes the default exit, said in one line."""
    directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-end-")
    a, b = kept(traced, "ctypes", 0, directory, "a"), kept(traced, "ctypes", 400, directory, "b")
    completed = tool("diff", a, b, "--format", "json")
    result = json.loads(completed.stdout) if completed.returncode == 0 else {}
    first = (result.get("stacks") or [{}])[0]
    check(result.get("at") == "end" and result["a"]["at"] == result["b"]["at"] == "end" and
          first.get("status") == "new" and first.get("change") == 400 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"diff names the kept line, +400 MiB at the program's end: {completed.stderr} {result}")
    check(result.get("total", {}).get("change") == 400 * MiB,
          f"device memory at the end differs by 400 MiB: {result.get('total')}")
    text = tool("diff", a, b).stdout
    check("at the program's end, before the interpreter's teardown" in text and
          "   #1 +400 MiB new: 0 B -> 400 MiB" in text and
          f"kept_globals.py:{kept_line()}" in text and "Device memory at end" in text,
          f"the text says which moment, and names the line: {text}")
    at_exit = json.loads(tool("diff", a, b, "--at", "exit", "--format", "json").stdout)
    check(at_exit["at"] == "exit" and not any(s["change"] == 400 * MiB for s in at_exit["stacks"]),
          f"--at exit: what the teardown left, not the kept buffers: {at_exit['stacks']}")
    at_peak = json.loads(tool("diff", a, b, "--at", "peak", "--format", "json").stdout)
    check(at_peak["at"] == "peak" and at_peak["stacks"][0]["change"] == 400 * MiB and
          has_line(at_peak["stacks"][0]["frames"], kept_line()) and
          at_peak["total"]["change"] == 400 * MiB,
          f"--at peak: each stack at its own highest: {at_peak['stacks'][:1]} {at_peak['total']}")
    # A C program's report: no end to compare at; the default says so.
    traced.run("examples/leak_loop", ["2"], env={"CUMEMTRACE_QUIET": "1"})
    c_report = glob.glob(os.path.join(traced.dir, "*.json"))[0]
    mixed = tool("diff", c_report, b)
    check(mixed.returncode == 0 and "compared at exit: the program's end (a Python program's exit "
          "hooks) was not seen in both" in mixed.stdout,
          f"no end in A: compared at exit, said so: {mixed.stdout[:600]} {mixed.stderr}")
    bad = tool("diff", a, b, "--at", "middle")
    check(bad.returncode == 1 and "--at takes end, peak or exit: middle" in bad.stderr,
          f"--at checked: {bad.stderr!r}")


def test_end_state_merge(traced):
    """Two ranks of a PyTorch program (the stand-in, in caching mode), rank 1
    keeping 320 MiB of tensors in a global, which the teardown gives back to
    the cache: merge's first stack is that line with each rank's bytes, read
    at the program's end; rank 1 diverges; its growing site is the line."""
    directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-end-")
    files = [kept(traced, "torch", 320 * rank, directory, f"rank-{rank}", RANK=str(rank), WORLD_SIZE="2")
             for rank in (0, 1)]
    completed = tool("merge", *files, "--format", "json")
    merged = json.loads(completed.stdout) if completed.returncode == 0 else {}
    first = (merged.get("stacks") or [{}])[0]
    check(first.get("bytes_by_rank") == [0, 320 * MiB] and first.get("spread_bytes") == 320 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"the first stack is the kept line, with each rank's bytes: {completed.stderr} {first}")
    check([r["at"] for r in merged.get("ranks", [])] == ["end", "end"] and
          (merged.get("divergent") or {}).get("rank") == 1,
          f"both ranks read at the end, rank 1 diverges: {merged.get('ranks')} {merged.get('divergent')}")
    growing = merged.get("growing") or [{}]
    check([r.get("growing_sites") for r in merged.get("ranks", [])] == [0, 1] and
          has_line(growing[0].get("frames", []), kept_line()) and
          [f["rank"] for f in growing[0]["growth"]["fastest"]] == [1],
          f"the one growing site is the kept line, on rank 1 alone: {growing}")
    text = tool("merge", *files).stdout
    lines = text.splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith("   #1 ")), None)
    check(at is not None and lines[at].startswith("   #1 1 rank 0 B; rank 1 320 MiB (320 MiB between ranks") and
          any(f"kept_globals.py:{kept_line()}" in l for l in lines[at + 1:at + 4]) and
          "read at: every rank at its program's end" in text and
          "Divergent rank: 1 on " in text and "at its program's end" in text,
          f"the text: the kept line first, each rank's bytes, the moment: {text}")


def test_end_state_exports(traced):
    """The exports of a program whose teardown freed 400 MiB kept in a
    global: folded stacks and memory_viz's snapshot are of the program's
    end and hold the kept line; the Chrome trace marks the end with it; the
    command's exports of the JSON report say the same."""
    directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-end-")
    report = kept(traced, "ctypes", 400, directory, "b", CUMEMTRACE_FORMAT="json,folded,perfetto,memviz")
    base = report[:-len(".json")]
    line = kept_line()

    def folded_of(path):
        found = {}
        for text in open(path):
            stack, count = text.rstrip("\n").rsplit(" ", 1)
            found[stack] = found.get(stack, 0) + int(count)
        return found

    def check_folded(path, who):
        found = folded_of(path)
        kept_stacks = {k: v for k, v in found.items() if f"kept_globals.py:{line})" in k}
        check(list(kept_stacks.values()) == [400 * MiB] and
              all(k.startswith("[device, at the program's end];") for k in found),
              f"{who}: the kept line, 400 MiB, at the program's end: {found}")

    def check_trace(path, who):
        with open(path) as handle:
            events = json.load(handle)["traceEvents"]
        end = [e for e in events if e["name"].startswith("program end")]
        held = end[0]["args"]["held"] if end else []
        check(len(end) == 1 and held and held[0]["bytes"] == 400 * MiB and
              has_line(held[0]["stack"], line),
              f"{who}: the program's end, the kept line first: {end}")

    def check_memviz(path, who):
        with open(path, "rb") as handle:
            snapshot = pickle.load(handle)
        kept_segments = [s for s in snapshot["segments"] if any(
            f["filename"].endswith("kept_globals.py") and f["line"] == line for f in s["frames"])]
        check(snapshot.get("cumemtrace", {}).get("moment") == "program_end" and
              len(kept_segments) == 20 and sum(s["total_size"] for s in kept_segments) == 400 * MiB,
              f"{who}: the snapshot at the program's end holds the 20 kept buffers: "
              f"{snapshot.get('cumemtrace')} {len(kept_segments)}")
        trace = snapshot["device_traces"][0]
        check(trace and not any(e["action"] == "segment_free" and e["size"] == 20 * MiB for e in trace),
              f"{who}: the traces stop at the program's end (no teardown frees)")

    check_folded(base + ".folded", "folded")
    check_trace(base + ".trace.json", "perfetto")
    check_memviz(base + ".pickle", "memviz")
    for name, suffix, checker in (("folded", ".folded", check_folded),
                                  ("perfetto", ".trace.json", check_trace),
                                  ("memviz", ".pickle", check_memviz)):
        out = os.path.join(directory, "again-" + name)
        completed = tool("export", "--format", name, report, "-o", out)
        if check(completed.returncode == 0, f"export {name}: {completed.stderr}"):
            checker(out + suffix, f"cumemtrace export --format {name}")


def test_end_state_crash_dump(traced):
    """A crash in the interpreter's teardown, after the program ended: the
    dump keeps what was held at the end, so its report, diff and merge read
    the kept line there as from an exit report."""
    directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-end-")
    a = kept(traced, "ctypes", 0, directory, "a")
    kept(traced, "ctypes", 400, directory, "b", "crash", expect_rc=-signal.SIGSEGV)
    dump = os.path.join(directory, "b.dump")
    rc, text, report = symbolize(dump)
    held = [g for g in (report or {}).get("held_at_end", []) if g["bytes"] == 400 * MiB]
    check(rc == 0 and report and report["program_end"] is not None and held and
          site_line(report, held[0]["stack"], "kept_globals.py") == kept_line() and
          held[0]["freed_at_teardown_bytes"] == 400 * MiB,
          f"the dump's report: held at the end, the kept line, freed by the teardown: "
          f"{(report or {}).get('program_end')} {(report or {}).get('held_at_end')}")
    result = json.loads(tool("diff", a, dump, "--format", "json").stdout or "{}")
    first = (result.get("stacks") or [{}])[0]
    check(result.get("at") == "end" and first.get("change") == 400 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"diff of an exit report and the dump, at the program's end: {result}")


def test_end_state_live(traced):
    """cumemtrace live on a program that has ended, its teardown under way:
    the sites are ranked by what they held at the end, and it says so."""
    directory = __import__("tempfile").mkdtemp(prefix="cumemtrace-live-")
    environment = traced_environment(directory, CUMEMTRACE_QUIET="1")
    environment["LD_LIBRARY_PATH"] = os.path.join(support.BUILD, "sim")
    process = subprocess.Popen([sys.executable, "-u", script("kept_globals.py"), "ctypes", "400", "3"],
                               cwd=directory, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    ended = process.stdout.readline()
    view = tool("live", str(process.pid), "--once") if ended.startswith("ended") else None
    process.communicate(timeout=60)
    text = view.stdout if view else ""
    top = text.split("Top sites", 1)[-1].split("Growing", 1)[0]
    rows = [l for l in top.splitlines() if l.strip().startswith("1 ")]
    check(view and view.returncode == 0 and "its interpreter's teardown is freeing" in text and
          "Top sites by bytes held at the program's end" in text and rows and
          rows[0].split()[1:3] == ["400", "MiB"] and f":{kept_line()}" in rows[0],
          f"live after the program's end: the kept line first, 400 MiB at the end: {ended!r} {text}")
