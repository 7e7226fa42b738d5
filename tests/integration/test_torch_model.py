"""What the tensors are: torch_model.py's stand-in modules and optimizer
(stand_ins.py), their parameters, gradients and optimizer state by name, in a
snapshot, at the end and at an OOM; the program's own objects untouched."""

import glob
import json
import os
import subprocess
import sys

import pytest

import support
from browser import drive
from stand_ins import (script, marked_lines, torch_env, skip_without_torch, run_scenario,
                       format_bytes, site_line, cache, oom_reports, no_browser)
from support import check


def model_scenario(traced, name, expect_rc=0, **env):
    """Run one scenario of torch_model.py: run_scenario's answer and what
    the program's own objects held ("held:")."""
    skip_without_torch()
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
    if no_browser():
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


def test_torch_model_no_modules(traced):
    """Tensors and no module: one line says the split is not known, and why."""
    _, _, reports, _, _ = model_scenario(traced, "no_modules", CUMEMTRACE_FORMAT="text,json")
    classes = reports["exit"][0]["classes"]
    check(not classes["known"] and "no nn.Module" in classes["why"], f"{classes}")
    text = open(glob.glob(os.path.join(traced.dir, "report-*[0-9].txt"))[0]).read()
    check("What the tensors are: not known: the program holds no nn.Module or optimizer" in text,
          "the text says it in one line")


@pytest.mark.parametrize("options", [["-W", "error"], []],
                         ids=["warnings_as_errors", "default_warnings"])
def test_torch_model_untouched(traced, options):
    """The tracer's own Python (what the tensors are, read at a snapshot and
    at exit) reads no attribute of the program's other objects: a deprecated
    one that warns at every read is never read, with -W error or without;
    the warning filters, the gc's state and the modules loaded are as they
    were, and the program's output as untraced."""
    skip_without_torch()
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
