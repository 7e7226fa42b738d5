"""What the reports conclude: out-of-memory failures and their retries,
several reports written at once, the sites that grow (sampled at marks or
over time), and the tracer's own time."""

import glob
import json
import os
import shutil
import tempfile

from support import (check, validate, only, device_counters, stack_functions, user_functions,
                     by_reason, tool)


def test_oom(traced):
    out, err, reports, _ = traced.run("tests/oom", ["exhausted"], env={"SIMCUDA_MEMORY": "64M"})
    check("oom after 4 blocks" in out, f"simulated OOM: {out!r}")
    report = by_reason(reports, "exit")
    device = device_counters(report, 0, "device")
    check(device["num_ooms"] == 1 and device["num_alloc_failures"] == 1, f"one OOM: {device}")
    failure = report["failures"]["recent"][0] if report["failures"]["recent"] else {}
    check(failure.get("api") == "cudaMalloc" and failure.get("size") == 16 << 20 and failure.get("oom"),
          f"failure recorded: {failure}")
    check("grow" in stack_functions(report, failure.get("stack", 0)), "failure stack names grow()")
    oom = by_reason(reports, "oom")
    event = oom.get("event") or {}
    check(event.get("verdict") == "exhausted" and event.get("driver_free") == 0 and
          event.get("driver_total") == 64 << 20 and event.get("size") == 16 << 20,
          f"exhausted verdict with the driver's numbers: {event}")
    # The program ended without asking again: the file, written at once
    # with the retry pending, says so at exit.
    check(event.get("retry") == "none", f"no retry seen: {event.get('retry')}")
    check("grow" in user_functions(oom, event.get("stack", 0)), "the OOM report names grow()")
    check(oom.get("blocks", {}).get("total") == 4, "the OOM report lists the 4 live blocks")
    check("OUT OF MEMORY" in err and "verdict: exhausted" in err, "OOM summary on stderr")


def test_oom_fragmented(traced):
    out, err, reports, _ = traced.run("tests/oom", ["fragmented"], env={"SIMCUDA_MEMORY": "64M"})
    check("fragmented: cudaErrorMemoryAllocation" in out, f"simulated fragmentation: {out!r}")
    event = by_reason(reports, "oom").get("event") or {}
    check(event.get("verdict") == "fragmented" and event.get("driver_free") == 32 << 20,
          f"fragmented verdict: 32 MiB free, 16 MiB refused: {event}")
    check("verdict: fragmented" in err, "fragmented verdict on stderr")
    check(by_reason(reports, "oom").get("fragmentation", {}).get("verdict") == "fragmented",
          "the fragmentation section gives the same verdict")
    check(by_reason(reports, "exit").get("fragmentation", {}).get("verdict") == "none",
          "the exit report, about no OOM, does not")


def test_oom_retry(traced):
    out, err, reports, _ = traced.run("tests/oom", ["retry"], env={"SIMCUDA_MEMORY": "64M"})
    check("retry: cudaSuccess" in out, f"retry succeeded: {out!r}")
    oom = by_reason(reports, "oom")
    check((oom.get("event") or {}).get("retry") == "succeeded",
          f"the OOM report says the retry succeeded: {oom.get('event')}")
    check(oom.get("blocks", {}).get("total") == 4, "the OOM report still shows the OOM moment")
    final = by_reason(reports, "exit")
    check(final["failures"]["oom_retries_succeeded"] == 1, "retry counted")
    out, err, reports, _ = traced.run("tests/oom", ["exhausted"],
                                      env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_OOM": "off"})
    check([r["reason"] for r in reports] == ["exit"], "CUMEMTRACE_OOM=off: no OOM report")


def stack_order(report):
    """Where the stacks of a report are out of the writer's order (by live
    and implicitly freed bytes, then peak, highest first, then by id)."""
    key = [(-(s["live_bytes"] + s["freed_implicitly_bytes"]), -s["peak_live_bytes"], s["id"])
           for s in report["stacks"]]
    return [i for i in range(1, len(key)) if key[i - 1] > key[i]]


def test_reports_at_once(traced):
    """OOM reports and snapshots collected at the same time, 10 of each, while
    a third thread changes every site's figures: each report is sorted by its
    own figures, and adds up."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-at-once-")
    out, err, reports, _ = traced.run("tests/reports_at_once", [directory],
                                      env={"SIMCUDA_MEMORY": "1G", "CUMEMTRACE_OOM": "every",
                                           "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_MAX_BLOCKS": "0"})
    check("10 ooms" in out, f"every round failed with out-of-memory: {out!r}")
    ooms = [r for r in reports if r["reason"] == "oom"]
    snapshots = []
    for name in sorted(glob.glob(os.path.join(directory, "snap-*.json"))):
        with open(name) as handle:
            snapshots.append(json.load(handle))
        validate(snapshots[-1], name)
    check(len(ooms) == 10 and len(snapshots) == 10,
          f"10 OOM reports and 10 snapshots: {len(ooms)}, {len(snapshots)}")
    for number, report in enumerate(ooms + snapshots):
        name = f"{report['reason']} report {number % 10}"
        # The churning thread may be between a site's free and its new block.
        check(len(report["stacks"]) >= 255, f"{name}: every site's stack: {len(report['stacks'])}")
        check(not stack_order(report), f"{name}: stacks out of order at {stack_order(report)[:5]}")
        live = sum(s["live_bytes"] for s in report["stacks"])
        counted = device_counters(report, 0, "device")["allocated_bytes"]["current"]
        check(live == counted, f"{name}: stacks hold {live} bytes, counters say {counted}")
    shutil.rmtree(directory, ignore_errors=True)


def growing_functions(report):
    """Each growing stack as (innermost frame's function in tests/growth, entry)."""
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: s for s in report["stacks"]}
    found = []
    for entry in report["growth"]["growing"]:
        names = [frames[i].get("function") or "" for i in stacks[entry["stack"]]["frames"]]
        ours = [n for n in names if n.startswith(("grow_", "fill_", "temporary", "main"))]
        found.append((ours[0] if ours else names, entry))
    return found


def test_growth_marks(traced):
    out, err, reports, _ = traced.run("tests/growth", ["leak-marks"], env={"CUMEMTRACE_FORMAT": "json,text"})
    report = only(reports)
    growth = report["growth"]
    # One observation per mark, and the report's own at exit.
    check(growth["mode"] == "marks" and growth["samples"] == 61 and growth["every"] == 1,
          f"an observation per mark: {growth}")
    found = growing_functions(report)
    check([f for f, _ in found] == ["grow_by_mark"], f"only grow_by_mark grows: {found}")
    if found:
        entry = found[0][1]
        check(entry["rate"] == 1 << 20, f"1 MiB per mark: {entry['rate']}")
        check(entry["rises"] == 59 and entry["falls"] == 0, f"rose at every later mark: {entry}")
    check("Growing (leak suspects" in err and "per mark" in err, "the summary names it")


def test_growth_time(traced):
    """With no marks, the observations follow the program's events: 150 of
    them here, on a grid of 32 to 64; the same observations at every run
    (the events are the same), and the rate per second between them."""
    found_runs = []
    for run in range(3):
        out, err, reports, _ = traced.run("tests/growth", ["leak-time"])
        report = only(reports)
        growth = report["growth"]
        check(growth["mode"] == "work" and 32 <= growth["samples"] <= 65,
              f"observations over the work: {growth}")
        found = growing_functions(report)
        found_runs.append([(f, e["rises"], e["samples_since_first"]) for f, e in found])
        check([f for f, _ in found] == ["grow_by_time"], f"only grow_by_time grows: {found}")
        if found:
            rate = found[0][1]["rate"]
            # 64 KiB every 2 ms plus the call: at most 32 MiB/s; more than 1 MiB/s
            # even under the sanitizers.
            check(1 << 20 < rate <= 32 << 20, f"a plausible rate: {rate / 2**20:.1f} MiB/s")
    check(found_runs[0] == found_runs[1] == found_runs[2], f"the same observations each run: {found_runs}")
    out, err, reports, _ = traced.run("tests/growth", ["leak-time"], env={"CUMEMTRACE_GROWTH": "0"})
    check(only(reports)["growth"]["samples"] == 0 and not only(reports)["growth"]["growing"],
          "CUMEMTRACE_GROWTH=0: no observations")
    out, err, reports, _ = traced.run("tests/growth", ["leak-time"], env={"CUMEMTRACE_SAMPLE_MS": "soon"})
    check("CUMEMTRACE_SAMPLE_MS='soon'" in err, f"a bad value is named: {err[:300]!r}")


def test_growth_per_call(traced):
    """An unmarked loop keeping 1 MiB a step beside an 8 MiB temporary it
    frees within the step, both made by one function: its rate is also per
    call of the kept block's site (1 MiB, the block a step keeps) over the
    calls it made while it grew, in the findings, the growth table and the
    JSON, and the same read back by `cumemtrace report`. Its marked twin
    keeps its rate per mark, with no rate per call."""
    out, err, reports, texts = traced.run("tests/growth", ["leak-beside"],
                                          env={"CUMEMTRACE_FORMAT": "json,text"})
    report = only(reports)
    found = growing_functions(report)
    check([f for f, _ in found] == ["grow_step_block"] and report["growth"]["mode"] == "work",
          f"only the kept block's site grows, over the work: {found}")
    if found:
        entry = found[0][1]
        calls = entry["calls"]
        # Its first observation already holds some: the calls since then.
        check(calls == (entry["last_bytes"] - entry["first_bytes"]) >> 20 and 60 <= calls <= 78,
              f"a call per MiB kept since its first observation: {entry}")
        check(entry["rate_per_call"] == 1 << 20, f"1 MiB a call: {entry['rate_per_call']}")
        said = f"+1.00 MiB a call over {calls} calls, +"
        line = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
        check(len(line) == 1 and line[0].startswith(said) and " per second, 78.0 MiB" in line[0],
              f"the findings line says it: {line}")
        text = "".join(texts.values())
        check(f"   #1 {said}" in text, f"the growth table says it: {text[:3000]}")
        path = glob.glob(os.path.join(traced.dir, "*.json"))[0]
        back = tool("report", path)
        check(back.returncode == 0 and "growing at" in back.stdout and said in back.stdout,
              f"read back, the same rate per call: {back.stdout[:2000]} {back.stderr}")
        again = json.loads(tool("report", path, "--format", "json").stdout)
        check(again["growth"]["growing"] == report["growth"]["growing"],
              f"the JSON read back keeps it: {again['growth']['growing']}")
        del report["growth"]["growing"][0]["calls"]  # a report of an earlier version
        path = os.path.join(traced.dir, "earlier.json")
        with open(path, "w") as handle:
            json.dump(report, handle)
        older = tool("report", path)
        check(older.returncode == 0 and "a call" not in older.stdout and
              " per second, 78.0 MiB" in older.stdout,
              f"a report without calls: per second alone: {older.stdout[:2000]} {older.stderr}")
    out, err, reports, texts = traced.run("tests/growth", ["leak-beside", "marks"],
                                          env={"CUMEMTRACE_FORMAT": "json,text"})
    report = only(reports)
    found = growing_functions(report)
    check([f for f, _ in found] == ["grow_step_block"] and report["growth"]["mode"] == "marks",
          f"marked: only the kept block's site grows, at marks: {found}")
    if found:
        check(found[0][1]["rate"] == 1 << 20 and found[0][1]["calls"] == 0,
              f"1 MiB per mark, no rate per call: {found[0][1]}")
    line = [f["text"] for f in report["findings"] if f["verdict"] == "growing"]
    check(len(line) == 1 and line[0].startswith("+1.00 MiB per mark, 78.0 MiB") and
          "a call" not in "".join(texts.values()), f"marked: per mark: {line}")


def test_growth_steady(traced):
    out, err, reports, _ = traced.run("tests/growth", ["steady"])
    report = only(reports)
    check(report["growth"]["samples"] >= 8, f"observations taken: {report['growth']['samples']}")
    check(report["growth"]["growing"] == [],
          f"a cache filled once and temporaries are not leaks: {growing_functions(report)}")


def test_self_time(traced):
    """CUMEMTRACE_SELF_TIME=1 counts the tracer's own time in CUDA calls and
    not the driver's: every cuMemAlloc_v2 sleeps 5 ms, 60 of them 300 ms."""
    env = {"CUMEMTRACE_FORMAT": "json,text", "SIMCUDA_ALLOC_DELAY_US": "5000"}
    out, err, reports, texts = traced.run("tests/growth", ["leak-marks"],
                                          env={**env, "CUMEMTRACE_SELF_TIME": "1"})
    report = only(reports)
    total = report["tracer"]["self_time_ns"]
    check(total is not None and 0 < total < 150e6,
          f"our time, without the driver's 300 ms: {total} ns")
    at_marks = [m.get("self_time_ns") for m in report["marks"]["recent"]]
    check(len(at_marks) == 60 and None not in at_marks, f"every mark has the figure: {at_marks}")
    if None not in at_marks:
        rises = sum(b > a for a, b in zip(at_marks, at_marks[1:]))
        check(at_marks == sorted(at_marks) and rises == 59 and at_marks[-1] <= total,
              f"rises between marks (an allocation each), up to the total: {at_marks}")
    check(any("the tracer's own time in CUDA calls" in t for t in texts.values()),
          "the text report says it")
    out, err, reports, texts = traced.run("tests/growth", ["leak-marks"], env=env)
    report = only(reports)
    check(report["tracer"]["self_time_ns"] is None and
          all("self_time_ns" not in m for m in report["marks"]["recent"]),
          "not timed unless asked")
    check(not any("own time" in t for t in texts.values()), "and not in the text")
