"""PyTorch's tensors, carved out of its cache by the stand-in allocator
(stand_ins.py): the growth verdicts against the scenarios' marked lines,
what was held at the end, the cache's figures, and the command's reading
of them (report, diff, merge, live, the pytest plugin)."""

import glob
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time

import pytest

import support
from browser import drive
from stand_ins import (MiB, script, marked_lines, torch_env, scenario, format_bytes, site_line,
                       cache, check_held_by_line, check_verdicts, no_browser)
from support import check, validate, device_counters, traced_environment, line_of, tool


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


@pytest.mark.parametrize("name", ["short_leak", "small_beside_big", "steady_serving"])
def test_growth_same_every_run(traced, name):
    """The shapes a clock once decided, 10 runs each: a 78-step leak of 1 MiB
    made on an 8 MiB temporary's line, 512 bytes kept on a 4 MiB temporary's
    line, and a steady server with eviction. Growing 10 of 10, 10 of 10, and
    nothing 10 of 10, each run on the same observations (the verdict's
    figures equal). The steps' pauses are short here: the clock is the
    program's work, so they change nothing (bench/growth_repeat.py runs the
    shapes at their full 1.5 s and 3 s, beside a busy CPU)."""
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


def test_growth_per_call_same_line(traced):
    """short_leak keeps 1 MiB a step made on the line of an 8 MiB temporary:
    one stack, two calls a step, so its rate per call is half the block it
    keeps a step, over twice the steps: the calls are all the line's."""
    _, _, reports, _ = scenario(traced, "short_leak", CUMEMTRACE_TEST_STEP_S="0.002")
    report = reports["exit"][0]
    growing = report["growth"]["growing"]
    check(len(growing) == 1 and report["growth"]["mode"] == "work", f"one line growing: {growing}")
    if growing:
        g = growing[0]
        steps = (g["last_bytes"] - g["first_bytes"]) >> 20
        check(steps >= 60 and g["calls"] == 2 * steps and g["rate_per_call"] == 512 << 10,
              f"512 KiB a call over twice the steps it kept: {g}")
        line = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        check(line and line[0].startswith(f"+512 KiB a call over {2 * steps} calls, +"),
              f"the findings line: {line}")


@pytest.mark.parametrize("name", ["training_mix", "leak_beside_temporaries_unmarked",
                                  "kept_then_freed", "short_leak", "steady_serving",
                                  "remade_larger"])
def test_verdicts_without_native_frames(traced, name):
    """CUMEMTRACE_NATIVE=0 (as on a machine where no native stack can be
    walked): every verdict of the stand-in's mixes of leaks and innocent
    temporaries the same as with native frames. Without them a segment the
    cache took at a tensor's line has that line's Python frames alone; it
    once shared the tensor's stack, whose verdicts then went with the
    segment's (training_mix's leak not growing)."""
    def verdicts(report):
        return {v: sorted(site_line(report, g["stack"]) for g in report["growth"][v])
                for v in ("growing", "released")}
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
    if no_browser():
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


@pytest.mark.parametrize("frameworks", ["1", "0"], ids=["tensors", "segments"])
def test_torch_blocks_live(traced, frameworks):
    """cumemtrace live on a process holding tensors: its sites are the
    tensors' lines, not the cache's segments, and a line gives the cache's
    figures; where tensors are not traced, the segments are the sites and a
    line says why."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
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
        return
    held = min(marked_lines("HELD", "watched"))
    sites = view.stdout.split("Top sites", 1)[-1]
    if frameworks == "1":
        check(f"< watched:{held}" in sites and "torch_tensor" in sites and
              "cudaMalloc" not in sites,
              f"the tensors' line, no segment:\n{view.stdout}")
        # All its device memory is the cache's: what its segments reserve.
        device = re.search(r"device 0 +(\S+ \S+)", view.stdout)
        check(device and f"PyTorch's cache: {device.group(1)} reserved, 16.0 MiB in tensors"
              in view.stdout, f"the cache's figures:\n{view.stdout}")
    else:
        check("via cudaMalloc" in sites and "torch_tensor" not in sites and
              "PyTorch's tensors are not traced one by one (CUMEMTRACE_FRAMEWORKS=0"
              in view.stdout, f"the segments, and why:\n{view.stdout}")


def test_torch_blocks_pytest(traced):
    """The pytest plugin on the stand-in allocator: a test that fills the
    cache passes (the cache keeps its segment, the tensor is gone), one that
    keeps a tensor fails, naming its line and the list that holds it; a
    peak limit is held to the tensors, and page-locked host memory fails no
    test (the session's summary lists it)."""
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_tensors")
    command = ["run", "--quiet", "--format=none", "--", sys.executable, "-m", "pytest",
               "-p", "no:cacheprovider", "-p", "cumemtrace_pytest", "-q", "--cuda-leaks", suite]
    out, err, _, _ = traced.run(os.path.join(support.BUILD, "cumemtrace"), command, preload=False,
                                expect_rc=None, env=torch_env())
    text = out + err
    test_file = os.path.join(suite, "test_tensors.py")
    keep = line_of(test_file, "KEEP-LINE")
    failures = text.split("FAILURES")[-1].split("GPU memory at the end of the session")[0]
    check("2 failed, 2 passed" in text and "test_fills_the_cache" not in failures and
          "test_pins_a_staging_buffer" not in failures,
          f"the cache filled once and a pinned staging buffer pass, the kept tensor and the "
          f"peak over its limit fail:\n{text}")
    # Its two tensors are carved from the segment the first test left in the
    # cache: measured by the tensors, not by the device's figures.
    check("test_over_its_peak had 32.0 MiB of GPU memory live beyond what was before it "
          "(limit: 1.00 MiB)" in failures, f"the tensors' peak over its limit:\n{text}")
    pinned = line_of(test_file, "PINNED-LINE")
    check("page-locked host memory held at the end of the session (not counted against "
          f"tests): 4 B:\n  4 B from {test_file}:{pinned} in test_pins_a_staging_buffer" in text,
          f"the pinned buffer in the session's summary, apart:\n{text}")
    check("tests that held the most at their end (GPU memory each left held):\n"
          "  4.00 MiB  test_tensors.py::test_keeps_a_tensor  (peak 4.00 MiB)\n"
          "the other tests' highest peaks (device memory live beyond what was before each, "
          "all of it freed by their end):\n"
          "  peak 32.0 MiB  test_tensors.py::test_fills_the_cache\n"
          "  peak 32.0 MiB  test_tensors.py::test_over_its_peak\n" in text,
          f"each test's peak exact, one that allocated nothing not listed:\n{text}")
    check("test_keeps_a_tensor left 4.00 MiB of GPU memory held:" in text and
          f"< test_keeps_a_tensor:{keep} (torch_tensor via torch_caching_allocator) — held by "
          "test_tensors.kept, a list of 1 tensor\n" in text,
          f"the kept tensor's line, and its holder:\n{text}")


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
    if no_browser():
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
