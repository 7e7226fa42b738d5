"""The event timeline, the HTML report and the exports. Each export is read
back with its consumer's parser where one is installed, else checked against
the format's published definition:

  timeline  CUMEMTRACE_EVENTS: the number of events, the oldest dropped.
  html      loaded in a real headless Chromium: no script errors, and the
            figures in the DOM equal the JSON report's.
  folded    "frame;frame;frame bytes" lines, outermost first; sums equal the
            JSON report's live bytes.
  perfetto  Chrome Trace Event format: ph, ts, name, args; ts never
            decreasing per track; each track ends at the report's live bytes.
  memviz    loaded with Python's pickle; the structure torch.cuda._memory_viz
            and MemoryViz.js read; opcodes limited to those MemoryViz.js's own
            unpickler knows; with PyTorch installed, its _memory_viz reads it."""

import collections
import glob
import json
import os
import pickle
import pickletools
import re
import subprocess

import pytest

import support
from browser import find_browser, browser, drive
from support import check, stack_functions, user_functions, symbolize, one_dump, tool, rank_reports


DEVICE_MEMORY_KINDS = {"device", "stream_ordered", "vmm_physical", "array"}


MEMVIZ_KINDS = {"device", "stream_ordered", "managed"}


def one(reports, reason="exit"):
    found = [r for r in reports if r.get("reason") == reason]
    check(len(found) == 1, f"one {reason} report, got {len(found)}")
    return found[0] if found else {}


def output_file(traced, suffix):
    """The exit report's file of that format in the last run's directory."""
    names = [n for n in glob.glob(os.path.join(traced.dir, "report-*" + suffix))
             if "-oom" not in os.path.basename(n) and
             not (suffix == ".json" and n.endswith(".trace.json"))]
    check(len(names) == 1, f"one {suffix} file: {names}")
    return names[0] if names else None

def need_browser():
    """Skip the test when CUMEMTRACE_TEST_NO_BROWSER=1 says there is no
    Chromium on purpose; fail it when there is none otherwise."""
    if find_browser():
        return
    if os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") == "1":
        pytest.skip("CUMEMTRACE_TEST_NO_BROWSER=1")
    pytest.fail("no chromium to load the HTML in (apt-get install chromium, "
                "or set CUMEMTRACE_TEST_NO_BROWSER=1 to skip)")


def leak_loop_html(traced, argument):
    """examples/leak_loop's exit report and the path of its HTML page."""
    _, _, reports, _ = traced.run("examples/leak_loop", [argument],
                                  env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1"})
    return one(reports), output_file(traced, ".html")



def leak_loop_export(traced, format_name, suffix):
    """examples/leak_loop 20 writing JSON and one export: (its report, the export's path)."""
    _, _, reports, _ = traced.run("examples/leak_loop", ["20"],
                                  env={"CUMEMTRACE_FORMAT": "json," + format_name, "CUMEMTRACE_QUIET": "1"})
    return one(reports), output_file(traced, suffix)


def counters_now(report, device, kind):
    for entry in report.get("devices", []):
        if entry["device"] == device:
            return entry["counters"][kind]["allocated_bytes"]["current"]
    return 0


def delta(event):
    if event[1] == "alloc":
        return event[3]
    if event[1] in ("free", "free_implicit"):
        return -event[3]
    return 0


# ---- the timeline -----------------------------------------------------------

def test_timeline_ring(traced):
    """leak_loop 20 makes 41 allocations and 21 frees: 62 events."""
    _, _, reports, _ = traced.run("examples/leak_loop", ["20"],
                                  env={"CUMEMTRACE_EVENTS": "1000", "CUMEMTRACE_QUIET": "1"})
    full = one(reports).get("timeline", {})
    events = full.get("events", [])
    check(full.get("capacity") == 1000 and full.get("recorded") == 62 and full.get("dropped") == 0,
          f"62 events in a ring of 1000: {dict((k, full.get(k)) for k in ('capacity', 'recorded', 'dropped'))}")
    types = collections.Counter(e[1] for e in events)
    check(types == {"alloc": 41, "free": 21}, f"41 allocs, 21 frees: {types}")
    check(all(a[0] <= b[0] for a, b in zip(events, events[1:])), "times never decrease")
    check(events and events[0][3] == 64 << 20 and events[-1][1] == "free" and events[-1][3] == 64 << 20,
          "first the weights' allocation, last their free")
    before = counters_now(one(reports), 0, "device") - sum(delta(e) for e in events)
    check(before == 0, f"replayed from the start, the timeline begins at 0 bytes: {before}")
    leak = [e for e in events if e[1] == "alloc" and e[3] == 4 << 20]
    check(len(leak) == 20 and "leak_scratch_buffer" in user_functions(one(reports), leak[0][6]),
          "the leaked allocations carry their stack")

    _, _, reports, _ = traced.run("examples/leak_loop", ["20"],
                                  env={"CUMEMTRACE_EVENTS": "10", "CUMEMTRACE_QUIET": "1"})
    small = one(reports).get("timeline", {})
    kept = small.get("events", [])
    check(small.get("recorded") == 62 and small.get("dropped") == 52 and len(kept) == 10,
          f"a ring of 10 keeps 10 of 62 and counts 52 dropped: {small.get('recorded')}, "
          f"{small.get('dropped')}, {len(kept)}")
    check([(e[1], e[3], e[5]) for e in kept] == [(e[1], e[3], e[5]) for e in events[-10:]],
          "the newest 10 are kept, the oldest dropped")
    before = counters_now(one(reports), 0, "device") - sum(delta(e) for e in kept)
    expected = counters_now(one(reports), 0, "device") - sum(delta(e) for e in events[-10:])
    check(before == expected and before > 0, f"live bytes before the kept window: {before}")

    _, _, reports, _ = traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_QUIET": "1"})
    check("timeline" not in one(reports), "off by default")
    _, err, reports, _ = traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_EVENTS": "lots"})
    lines = [line for line in err.splitlines() if "CUMEMTRACE_EVENTS" in line]
    check(len(lines) == 1 and "'lots'" in lines[0] and "using 0" in lines[0],
          f"a bad value: one line, the default used: {lines}")
    check("timeline" not in one(reports), "and the timeline stays off")
    _, _, reports, _ = traced.run("examples/leak_loop", ["3"],
                                  env={"CUMEMTRACE_EVENTS": "64K", "CUMEMTRACE_QUIET": "1"})
    check(one(reports).get("timeline", {}).get("capacity") == 65536, "64K is 65536 events")
    _, _, reports, _ = traced.run("examples/leak_loop", ["3"],
                                  env={"CUMEMTRACE_FORMAT": "json,perfetto", "CUMEMTRACE_QUIET": "1"})
    check(one(reports).get("timeline", {}).get("capacity") == 1 << 20,
          "on, with 1M entries, for a format that draws memory over time")


def test_timeline_marks_ooms(traced):
    _, _, reports, _ = traced.run("tests/api", ["{dir}/snap"],
                                  env={"CUMEMTRACE_EVENTS": "100", "CUMEMTRACE_QUIET": "1"})
    events = one(reports).get("timeline", {}).get("events", [])
    check([e[1] for e in events] == ["alloc", "mark", "alloc", "free"],
          f"alloc, mark, alloc, free: {[e[1] for e in events]}")
    marks = [e for e in events if e[1] == "mark"]
    check(marks and marks[0][3] == 1 and marks[0][7] == "after the first block",
          f"the mark, with its number and label: {marks}")

    _, _, reports, _ = traced.run("tests/oom", ["exhausted"],
                                  env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_EVENTS": "100",
                                       "CUMEMTRACE_QUIET": "1"})
    report = one(reports)
    events = report.get("timeline", {}).get("events", [])
    ooms = [e for e in events if e[1] == "oom"]
    check(len(ooms) == 1 and ooms[0][3] == 16 << 20 and ooms[0][4] == 0,
          f"one OOM event of 16 MiB on device 0: {ooms}")
    check(ooms and "grow" in stack_functions(report, ooms[0][6]), "the OOM's stack names grow()")
    check([e[1] for e in events].count("alloc") == 4, "after 4 allocations")


# ---- folded stacks ------------------------------------------------------------

def test_export_folded(traced):
    report, path = leak_loop_export(traced, "folded", ".folded")
    if not path:
        return
    by_kind = collections.Counter()
    lines = open(path).read().splitlines()
    check(lines, "the folded file has lines")
    for line in lines:
        match = re.fullmatch(r"(\S.*) (\d+)", line)
        if not check(match, f"'frame;frame;... bytes': {line!r}"):
            continue
        frames = match.group(1).split(";")
        check(all(frames), f"no empty frame: {line!r}")
        by_kind[frames[0]] += int(match.group(2))
        if "leak_scratch_buffer" in frames:
            order = [frames.index(name) for name in ("main", "train_step", "leak_scratch_buffer")]
            check(order == sorted(order) and frames[-1] == "cudaMalloc",
                  f"outermost first, the allocator innermost: {frames}")
    live = collections.Counter()
    for group in report.get("live", []):
        if group["kind"] not in ("vmm_mapping", "vmm_reservation"):
            live["[" + group["kind"] + "]"] += group["bytes"]
    check(by_kind == live and by_kind["[device]"] == 20 * (4 << 20),
          f"sums equal the JSON report's live bytes: {dict(by_kind)} vs {dict(live)}")

    # Every kind of memory at once: the sums still match.
    _, _, reports, _ = traced.run("tests/all_entry_points", ["keep"],
                                  env={"CUMEMTRACE_FORMAT": "json,folded", "CUMEMTRACE_QUIET": "1"})
    report = one(reports)
    total = sum(int(line.rsplit(" ", 1)[1]) for line in open(output_file(traced, ".folded")))
    expected = sum(g["bytes"] for g in report.get("live", [])
                   if g["kind"] not in ("vmm_mapping", "vmm_reservation"))
    check(total == expected and total > 0, f"all kinds: {total} == {expected}")


# ---- Chrome trace / Perfetto ----------------------------------------------------

def check_trace(path, report):
    with open(path) as handle:
        trace = json.load(handle)
    events = trace.get("traceEvents")
    check(isinstance(events, list) and events, "a traceEvents list")
    last = {}
    instants = []
    for event in events or []:
        check(event.get("ph") in ("C", "i", "M"), f"a known phase: {event}")
        check(isinstance(event.get("name"), str) and isinstance(event.get("pid"), int),
              f"name and pid: {event}")
        if event["ph"] == "M":
            check(event["name"] == "process_name" and "name" in event.get("args", {}),
                  f"metadata names the process: {event}")
            continue
        check(isinstance(event.get("ts"), (int, float)) and event["ts"] >= 0, f"ts: {event}")
        if event["ph"] == "i":
            check(event.get("s") in ("g", "p", "t"), f"an instant's scope: {event}")
            instants.append(event)
            continue
        args = event.get("args", {})
        check(set(args) == {"bytes"} and isinstance(args["bytes"], int) and args["bytes"] >= 0,
              f"a counter's value: {event}")
        track = event["name"]
        if track in last:
            check(event["ts"] >= last[track][0], f"ts never decreases on {track}")
        last[track] = (event["ts"], args["bytes"])
    for track, (_, value) in last.items():
        device, kind = track.split(": ")
        number = None if device == "no device" else int(device.split()[1])
        key = "device_memory" if kind == "all device memory" else kind
        check(value == counters_now(report, number, key),
              f"{track} ends at the report's live bytes: {value}")
    return last, instants


def test_export_perfetto(traced):
    report, path = leak_loop_export(traced, "perfetto", ".trace.json")
    if path:
        last, _ = check_trace(path, report)
        check(set(last) == {"device 0: device"},
              f"one track: device memory is of one kind, no total repeating it: {sorted(last)}")
        check(last.get("device 0: device", (0, 0))[1] == 20 * (4 << 20), "ends at the 80 MiB leak")

    _, _, reports, _ = traced.run("tests/oom", ["exhausted"],
                                  env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_FORMAT": "json,perfetto",
                                       "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_OOM": "off"})
    path = output_file(traced, ".trace.json")
    if path:
        _, instants = check_trace(path, one(reports))
        ooms = [e for e in instants if e["name"].startswith("OOM")]
        check(len(ooms) == 1 and ooms[0]["args"]["size"] == 16 << 20, f"the OOM as an instant: {ooms}")

    # Several kinds of device memory: their sum has a track of its own, named as such.
    _, _, reports, _ = traced.run("tests/all_entry_points", ["keep"],
                                  env={"CUMEMTRACE_FORMAT": "json,perfetto", "CUMEMTRACE_QUIET": "1"})
    path = output_file(traced, ".trace.json")
    if path:
        last, _ = check_trace(path, one(reports))
        check("device 0: all device memory" in last and "device 0: device" in last and
              "device 0: stream_ordered" in last, f"the total beside the kinds: {sorted(last)}")

    # Without the timeline: marks and the end state still make a valid trace.
    _, _, reports, _ = traced.run("tests/api", ["{dir}/snap"],
                                  env={"CUMEMTRACE_FORMAT": "json,perfetto", "CUMEMTRACE_EVENTS": "0",
                                       "CUMEMTRACE_QUIET": "1"})
    report = one(reports)
    path = output_file(traced, ".trace.json")
    if path:
        _, instants = check_trace(path, report)
        check([e["name"] for e in instants] == ["mark: after the first block"],
              f"the mark: {instants}")


# ---- PyTorch memory_viz pickle -----------------------------------------------------
# The opcodes MemoryViz.js's own unpickler (torch/utils/viz/MemoryViz.js) knows.
MEMORYVIZ_OPCODES = {"PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE",
                     "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME",
                     "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "SETITEMS",
                     "SETITEM", "DICT", "SHORT_BINUNICODE", "BINUNICODE", "STOP", "EMPTY_TUPLE",
                     "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT"}


ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}


def check_frames(frames, where):
    check(isinstance(frames, list), f"{where}: frames is a list")
    for frame in frames if isinstance(frames, list) else []:
        check(isinstance(frame, dict) and set(frame) == {"filename", "line", "name"} and
              isinstance(frame["filename"], str) and isinstance(frame["line"], int) and
              isinstance(frame["name"], str), f"{where}: a frame {{filename, line, name}}: {frame}")


def check_memviz(path, report):
    data = open(path, "rb").read()
    used = {op.name for op, _, _ in pickletools.genops(data)}
    check(used <= MEMORYVIZ_OPCODES, f"only opcodes MemoryViz.js reads: {used - MEMORYVIZ_OPCODES}")
    snapshot = pickle.loads(data)
    check(set(snapshot) == {"segments", "device_traces"}, f"the snapshot's keys: {set(snapshot)}")
    live = collections.Counter()
    for group in report.get("live", []):
        if group["kind"] in MEMVIZ_KINDS and group["device"] is not None:
            live[group["device"]] += group["bytes"]
    segments = collections.Counter()
    for segment in snapshot.get("segments", []):
        check({"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
               "stream", "segment_type", "blocks", "frames"} <= set(segment), f"segment keys: {set(segment)}")
        blocks = segment.get("blocks", [])
        check(len(blocks) == 1 and blocks[0]["address"] == segment["address"] and
              blocks[0]["size"] == segment["total_size"] == segment["allocated_size"] and
              blocks[0]["state"] == "active_allocated", f"one active block per segment: {segment}")
        check_frames(blocks[0].get("frames") if blocks else [], "block")
        segments[segment["device"]] += segment["total_size"]
    check(segments == live, f"segment sizes equal the JSON report's live bytes: {segments} vs {live}")
    traces = snapshot.get("device_traces", [])
    check(isinstance(traces, list), "device_traces: one list per device")
    for device, trace in enumerate(traces):
        alive = {}
        for entry in trace:
            check({"action", "addr", "size", "stream", "time_us", "frames"} <= set(entry) and
                  entry["action"] in ACTIONS, f"a trace entry: {entry}")
            check_frames(entry.get("frames"), "trace entry")
            if entry["action"] == "oom":
                check("device_free" in entry, "an oom entry has device_free")
            elif entry["action"] == "alloc":
                alive[entry["addr"]] = entry["size"]
            elif entry["action"] == "free_completed":
                alive.pop(entry["addr"], None)
        at_end = {s["address"]: s["total_size"] for s in snapshot["segments"] if s["device"] == device}
        check(all(at_end.get(addr) == size for addr, size in alive.items()),
              f"device {device}: what the trace leaves allocated is in the segments")
    return snapshot


def check_with_torch(memory_viz, snapshot):
    """PyTorch's own reader of snapshots, whichever version is installed."""
    identity = lambda lines: lines          # the flame graph's input, not an SVG
    if hasattr(memory_viz, "segsum"):
        # PyTorch 2.x: the dictionary with segments and device_traces.
        summary = memory_viz.segsum(snapshot)
        check("segments: 20" in summary, f"torch's segsum reads the segments: {summary[-300:]}")
        printed = memory_viz.trace(snapshot)
        check(printed.count("cudaMalloc(") == 41, "torch's trace() reads the 41 segment allocations")
        folded = memory_viz.memory(snapshot, format_flamegraph=identity)
    else:
        # PyTorch 1.13 (Debian's python3-torch): a list of segments.
        stats = memory_viz.stats(snapshot["segments"])
        check(stats["segments"] == 20 and stats["total_size"].value == 20 * (4 << 20) and
              stats["active_allocated"].value == 20 * (4 << 20), f"torch's stats(): {stats}")
        folded = memory_viz.memory(snapshot["segments"], format_flamegraph=identity)
    total = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines())
    check(total == 20 * (4 << 20), f"torch's memory() flame graph sums to the 80 MiB: {total}")
    import torch
    print(f"memviz: read back by torch.cuda._memory_viz of PyTorch {torch.__version__}")


def test_export_memviz(traced):
    report, path = leak_loop_export(traced, "memviz", ".pickle")
    if not path:
        return
    snapshot = check_memviz(path, report)
    trace = snapshot["device_traces"][0] if snapshot.get("device_traces") else []
    actions = collections.Counter(e["action"] for e in trace)
    check(actions == {"segment_alloc": 41, "alloc": 41, "free_requested": 21, "free_completed": 21,
                      "segment_free": 21}, f"every allocation and free traced: {actions}")
    leaked = [s for s in snapshot["segments"] if s["total_size"] == 4 << 20]
    check(len(leaked) == 20 and any(f["name"] == "leak_scratch_buffer"
                                    for f in leaked[0]["blocks"][0]["frames"]),
          "the 20 leaked blocks, with their frames")
    try:
        from torch.cuda import _memory_viz
    except Exception:          # PyTorch is optional: the checks above stand
        print("memviz: PyTorch not installed; checked against its format only")
    else:
        check_with_torch(_memory_viz, snapshot)

    _, _, reports, _ = traced.run("tests/oom", ["exhausted"],
                                  env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_FORMAT": "json,memviz",
                                       "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_OOM": "off"})
    path = output_file(traced, ".pickle")
    if path:
        snapshot = check_memviz(path, one(reports))
        ooms = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"]
        check(len(ooms) == 1 and ooms[0]["size"] == 16 << 20, f"the OOM in the trace: {ooms}")


def attribute(dom, element_id, name="data-value"):
    match = re.search(r'<[^>]*\bid="%s"[^>]*>' % re.escape(element_id), dom)
    if not match:
        return None
    value = re.search(r'\b%s="([^"]*)"' % re.escape(name), match.group(0))
    return value.group(1) if value else None


def check_page(html, report):
    completed = browser(html, "--dump-dom")
    dom = completed.stdout
    body = re.search(r"<body[^>]*>", dom)
    body = body.group(0) if body else ""
    check('data-script-errors="0"' in body and 'data-rendered="1"' in body,
          f"the page rendered without script errors: {body} "
          f"{re.findall(r'<pre id=.errors.>(.*?)</pre>', dom, re.S)}")
    devices = report.get("devices", [])
    live_device = sum(d["counters"]["device_memory"]["allocated_bytes"]["current"] for d in devices)
    peak_device = max([d["counters"]["device_memory"]["allocated_bytes"]["peak"] for d in devices] or [0])
    live = report.get("live", [])
    shown = {
        "live-device-bytes": live_device,
        "peak-device-bytes": peak_device,
        "leaked-bytes": sum(g["bytes"] for g in live),
        "leaked-blocks": sum(g["blocks"] for g in live),
        "leaked-sites": len({g["stack"] for g in live}),
        "growing-sites": len(report["growth"]["growing"]) if report.get("growth") else 0,
    }
    for element_id, expected in shown.items():
        value = attribute(dom, element_id)
        check(value == str(expected), f"#{element_id} shows {value}, the JSON says {expected}")
    # The icicle at first: at the highest point of the timeline when there is
    # one, else at the end; of every kind but the VMM address space.
    kinds = {kind for d in devices for kind, c in d["counters"].items()
             if kind != "device_memory" and c["allocation"]["allocated"] and kind not in ADDRESS_SPACE}
    end_total = sum(g["bytes"] for g in live if g["kind"] in kinds)
    events = (report.get("timeline") or {}).get("events", [])
    expected = max(icicle_totals(report, kinds)) if events else end_total
    check(attribute(dom, "icicle", "data-total") == str(expected),
          f"the icicle holds {expected} bytes: {attribute(dom, 'icicle', 'data-total')}")
    return dom


ADDRESS_SPACE = {"vmm_mapping", "vmm_reservation"}


def icicle_totals(report, kinds):
    """Live bytes of `kinds` before the first timeline event and after each."""
    now = sum(g["bytes"] for g in report["live"] if g["kind"] in kinds)
    totals = [now]
    for event in reversed(report["timeline"]["events"]):
        if event[5] in kinds:
            now -= delta(event)
        totals.append(now)
    return totals[::-1]


def test_html_browser(traced):
    need_browser()
    # An argument that tries to end the embedded JSON's <script> element.
    hostile = "20</script><b id=injected>x</b><script>"
    _, _, reports, _ = traced.run("examples/leak_loop", [hostile],
                                  env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1",
                                       "CUMEMTRACE_SAMPLE_MS": "5"})
    report = one(reports)
    html = output_file(traced, ".html")
    if not html:
        return
    dom = check_page(html, report)
    check('id="injected"' not in dom, "text from the report cannot end the embedded JSON")
    check(hostile.replace("<", "&lt;").replace(">", "&gt;") in dom, "the argument is shown as text")
    check(attribute(dom, "icicle", "data-total") ==
          str(report["devices"][0]["counters"]["device_memory"]["allocated_bytes"]["peak"]),
          "the icicle at the peak holds the peak's bytes (nothing dropped from the timeline)")
    check(attribute(dom, "timeline-info", "data-events") == str(len(report["timeline"]["events"])),
          "the timeline's event count")
    check('id="memory-chart"' in dom and 'data-series="device 0: device"' in dom, "the chart has its line")
    check("leak_scratch_buffer" in dom, "the leaking function is named")

    shot = os.path.join(traced.dir, "page.png")
    browser(html, f"--screenshot={shot}", "--window-size=1280,1400")
    data = open(shot, "rb").read() if os.path.exists(shot) else b""
    check(data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000, f"a screenshot ({len(data)} bytes)")

    # No timeline, an OOM report, several kinds: still no script error.
    _, _, reports, _ = traced.run("tests/oom", ["exhausted"],
                                  env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_FORMAT": "json,html",
                                       "CUMEMTRACE_EVENTS": "0", "CUMEMTRACE_QUIET": "1"})
    for report in reports:
        names = glob.glob(os.path.join(traced.dir, "*%s.html" % ("-oom" if report["reason"] == "oom" else "")))
        names = [n for n in names if ("-oom" in n) == (report["reason"] == "oom")]
        check(len(names) == 1, f"one HTML page for the {report['reason']} report: {names}")
        if names:
            dom = check_page(names[0], report)
            if report["reason"] == "oom":
                check('id="oom-event"' in dom, "the OOM report shows the failed request")
    _, _, reports, _ = traced.run("tests/all_entry_points", ["keep"],
                                  env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1"})
    html = output_file(traced, ".html")
    if html:
        check_page(html, one(reports))


def live_after(report, index, kinds):
    """Live bytes per stack of `kinds` after timeline event `index` (-1: before
    the first), computed here from the JSON: the live groups at the end minus
    every change after it."""
    events = report["timeline"]["events"]
    bytes_ = collections.Counter()
    for group in report["live"]:
        if group["kind"] in kinds:
            bytes_[group["stack"]] += group["bytes"]
    for event in events[index + 1:]:
        if event[5] in kinds:
            bytes_[event[6]] -= delta(event)
    return bytes_


def test_html_interactions(traced):
    """The page's own controls, clicked: moments, zoom, search, hover, brush,
    kinds, all frames; rounded ticks; marks as ticks; the address keeps the view."""
    need_browser()
    report, html = leak_loop_html(traced, "20")
    events = report["timeline"]["events"]
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: s for s in report["stacks"]}
    kinds = {"device"}
    totals = [sum(live_after(report, i, kinds).values()) for i in range(-1, len(events))]
    peak = max(totals)
    end = sum(g["bytes"] for g in report["live"] if g["kind"] in kinds)
    # Two moments in the middle of the widest gaps between events, one in each
    # half of the run: a mouse event's position is a whole pixel.
    half = len(events) // 2
    gap = lambda i: events[i + 1][0] - events[i][0]
    first_gap = max(range(1, half), key=gap)
    second_gap = max(range(half, len(events) - 2), key=gap)
    t1 = (events[first_gap][0] + events[first_gap + 1][0]) / 2
    t2 = (events[second_gap][0] + events[second_gap + 1][0]) / 2
    at_t1 = first_gap
    range_peak = max(totals[i + 1] for i in range(at_t1 + 1, max(i for i, e in enumerate(events) if e[0] <= t2) + 1))
    actions = f"""
    result.first = icicle();
    fire(document.querySelector('button[data-moment=end]'), 'click');
    result.end = icicle();
    fire(bar('train_step'), 'click');
    result.zoomed = icicle();
    result.hashZoomed = location.hash;
    fire(document.querySelector('#icicle .frame.root'), 'click');
    result.unzoomed = icicle();
    type(document.getElementById('search'), 'Scratch');
    result.searched = icicle();
    type(document.getElementById('search'), '');
    fire(chart(), 'mousemove', chartX({t1}));
    result.tip = document.getElementById('chart-tip').textContent;
    fire(chart(), 'mousedown', chartX({t1})); fire(chart(), 'mouseup', chartX({t1}));
    result.clicked = icicle();
    fire(chart(), 'mousedown', chartX({t1})); fire(chart(), 'mousemove', chartX({t2}));
    fire(chart(), 'mouseup', chartX({t2}));
    result.brushed = icicle();
    result.brush = document.querySelector('#memory-chart .brush').getAttribute('visibility');
    toggle(document.getElementById('all-frames'));
    result.all = icicle();
    toggle(document.getElementById('all-frames'));
    toggle(document.querySelector('#kind-toggles input[data-kind=device]'));
    result.off = icicle();
    result.paths = document.querySelectorAll('#memory-chart path').length;
    result.hash = location.hash;
    result.yticks = [].map.call(document.querySelectorAll('#memory-chart text.tick'), function (t) {{ return t.textContent; }});
    result.torch = [].some.call(document.querySelectorAll('h2'), function (h) {{ return /torch/i.test(h.textContent); }});
    result.holders = document.querySelectorAll('#holders-table tbody tr').length;
    """
    result, dom = drive(html, actions)
    first, end_view = result.get("first", {}), result.get("end", {})
    check(first.get("moment", "").startswith("peak") and first.get("total") == peak,
          f"at first: the highest point, {peak} bytes: {first.get('moment')} {first.get('total')}")
    check(end_view.get("moment") == "end" and end_view.get("total") == end,
          f"At the end: {end} bytes: {end_view.get('total')}")
    zoomed = result.get("zoomed", {})
    names = [b[0] for b in zoomed.get("bars", []) if "ancestor" not in b[2]]
    check(zoomed.get("focus") == "train_step" and names[:1] == ["train_step"] and
          "main" not in names and zoomed.get("focusBytes") == end,
          f"a click zooms into train_step: {zoomed.get('focus')} {names}")
    check("zoom=main/train_step" in result.get("hashZoomed", ""), f"the address says so: {result.get('hashZoomed')}")
    check(result.get("unzoomed", {}).get("focus") == "", "a click on the root zooms out")
    searched = result.get("searched", {})
    check(searched.get("search") == end and
          [b[0] for b in searched.get("bars", []) if "match" in b[2]] == ["leak_scratch_buffer"],
          f"the search finds leak_scratch_buffer, case aside: {searched.get('search')}")
    # Hover: the top sites at that moment, most first, named by their site.
    expected = live_after(report, at_t1, kinds).most_common()
    tip = result.get("tip", "")
    sites = []
    for stack_id, held in expected:
        if held <= 0:
            continue
        f = frames[stacks[stack_id]["frames"][stacks[stack_id]["site"]]]
        sites.append(f"{os.path.basename(f['file'])}:{f['line']} in {f['function']}")
    positions = [tip.find(site) for site in sites]
    check(sites and all(p >= 0 for p in positions) and positions == sorted(positions),
          f"the hover names the sites live then, most first: {sites} in {tip!r}")
    clicked = result.get("clicked", {})
    check(clicked.get("moment") == f"event:{at_t1}" and clicked.get("total") == totals[at_t1 + 1],
          f"a click shows that moment: {clicked.get('moment')} {clicked.get('total')} vs {totals[at_t1 + 1]}")
    brushed = result.get("brushed", {})
    check(brushed.get("total") == range_peak and result.get("brush") == "visible",
          f"a range shows its highest point: {brushed.get('total')} vs {range_peak}")
    all_names = [b[0] for b in result.get("all", {}).get("bars", [])]
    check("_start" in all_names and "_start" not in [b[0] for b in brushed.get("bars", [])],
          "start-up frames only with all frames")
    check(result.get("off", {}).get("total") == 0 and result.get("paths") == 0,
          f"device memory toggled off: {result.get('off', {}).get('total')} {result.get('paths')}")
    check("off=device" in result.get("hash", "") and "moment=range:" in result.get("hash", ""),
          f"the address keeps the view: {result.get('hash')}")
    check(not result.get("torch"), "no PyTorch section for a program without PyTorch")
    check(result.get("holders") == sum(1 for s in report["stacks"] if s["peak_live_bytes"] > 0),
          "the largest holders, one row per site")
    check_ticks(result.get("yticks", []))

    # The view from the address alone: what a link or a screenshot shows.
    result, _ = drive(html, "result.view = icicle(); result.search = document.getElementById('search').value;",
                      suffix="#moment=end&zoom=main/train_step&search=scratch")
    view = result.get("view", {})
    check(view.get("focus") == "train_step" and view.get("search") == end and result.get("search") == "scratch",
          f"#moment=end&zoom=...&search=...: {view.get('focus')} {view.get('search')}")

    # Sixty marks: ticks along the top, not sixty full-height lines.
    _, _, reports, _ = traced.run("tests/growth", ["leak-marks"],
                                  env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1"})
    result, _ = drive(output_file(traced, ".html"), """
    result.lines = document.querySelectorAll('#memory-chart line.mark').length;
    result.ticks = document.querySelectorAll('#memory-chart line.mark-tick').length;""")
    check(result.get("lines") == 0 and result.get("ticks") == 60, f"60 marks as ticks: {result}")


def test_html_growth_rates(traced):
    """The page's growing table says what the text does: per call of the
    site, then per second, for a program that marks no steps; per mark for
    one that does."""
    need_browser()
    cell = ("result.rate = document.querySelector('#growing-table tbody tr td:nth-child(3)')"
            ".textContent;")
    traced.run("tests/growth", ["leak-beside"], env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1"})
    report = json.load(open(output_file(traced, ".json")))
    calls = report["growth"]["growing"][0]["calls"] if report["growth"]["growing"] else None
    result, _ = drive(output_file(traced, ".html"), cell)
    check(calls and re.fullmatch(rf"1\.00 MiB a call over {calls} calls, [0-9.]+ [KMG]iB/s",
                                 result.get("rate", "")), f"per call, then per second: {result}")
    traced.run("tests/growth", ["leak-beside", "marks"],
               env={"CUMEMTRACE_FORMAT": "json,html", "CUMEMTRACE_QUIET": "1"})
    result, _ = drive(output_file(traced, ".html"), cell)
    check(result.get("rate") == "1.00 MiB per mark", f"per mark: {result}")


def check_ticks(labels):
    """Axis labels: round numbers in one unit, evenly spaced, none repeated."""
    by_unit = collections.defaultdict(list)
    for label in labels:
        number, unit = label.split(" ")
        by_unit[unit].append(float(number))
    check(len(labels) == len(set(labels)), f"no label twice: {labels}")
    for unit, numbers in by_unit.items():
        steps = {round(b - a, 6) for a, b in zip(numbers, numbers[1:])}
        check(numbers[0] == 0 and len(steps) == 1, f"{unit}: from 0 in equal steps: {numbers}")
        step = steps.pop() if steps else 1
        check(any(abs(step - f * 10 ** k) < 1e-9 for f in (1, 2, 2.5, 5) for k in range(-3, 6)),
              f"{unit}: a round step: {step}")


def test_html_held_at_end(traced):
    """A report of a Python program that ended (issue 14): what it held at
    its end in a neutral colour, only what nobody freed after it in red; a
    framework's cache segments neither leaked nor counted beside its blocks.
    The page is fed hand-made reports."""
    need_browser()
    report, html = leak_loop_html(traced, "3")
    with open(html) as handle:
        text = handle.read()
    start = text.index('id="report-data">') + len('id="report-data">')
    stop = text.index("</script>", start)
    page = os.path.join(traced.dir, "held.html")

    def write(made):
        with open(page, "w") as handle:
            handle.write(text[:start] + json.dumps(made).replace("<", "\\u003c") + text[stop:])

    made = json.loads(json.dumps(report))
    made["program_end"] = {"time_ms": 1}
    made["held_at_end"] = [dict(stack=made["live"][0]["stack"], kind="device", api="cudaMalloc", device=0,
                                blocks=1, bytes=64 << 20, freed_at_teardown_bytes=64 << 20)]
    write(made)
    result, _ = drive(page, """
    function tone(id) { var e = document.getElementById(id); return e ? e.className : null; }
    function colour(selector) { var e = document.querySelector(selector); return e ? getComputedStyle(e).color : null; }
    result.held = tone('held-at-end'); result.leaks = tone('leaks');
    result.heldCard = tone('held-bytes'); result.leakCard = tone('leaked-bytes');
    result.heldColour = colour('#held-at-end h2'); result.leakColour = colour('#leaks h2');
    result.heldValue = document.getElementById('held-bytes').dataset.value;
    result.freed = document.querySelector('#held-at-end-table tbody tr').cells[6].textContent;""")
    check(result.get("held") == "neutral" and result.get("heldCard") == "card neutral" and
          result.get("heldValue") == str(64 << 20) and result.get("freed") == "64.0 MiB",
          f"held at the end: neutral, with what the teardown freed: {result}")
    check(result.get("leaks") == "bad" and result.get("leakCard") == "card bad" and
          result.get("leakColour") == "rgb(198, 40, 40)" and result.get("heldColour") != result.get("leakColour"),
          f"allocated after the end and never freed: red: {result}")
    # The same groups held at the end: nothing leaked, and no "Leaked 0"
    # card beside what was held (issue 47).
    for group in made["live"]:
        group["held_at_end"] = True
    write(made)
    result, _ = drive(page, "result.leaked = !!document.getElementById('leaked-bytes');"
                            "result.held = document.getElementById('held-bytes').dataset.value;"
                            "result.leaks = document.getElementById('leaks').className;")
    check(result.get("leaked") is False and result.get("held") == str(64 << 20) and
          result.get("leaks") == "", f"held, not leaked: {result}")

    # A framework whose blocks are recorded: its cache segments are kept by
    # it, not leaked; the icicle counts its blocks, and what they leave of
    # the segments unused only with its toggle, never the segments whole.
    made = json.loads(json.dumps(report))
    segment = made["live"][0]["stack"]
    holder = next(st["id"] for st in made["stacks"] if st["id"] != segment)
    for stack in made["stacks"]:
        stack["cache_segment"] = "torch_tensor" if stack["id"] == segment else None
    made["caches"] = [{"kind": "torch_tensor", "view": "blocks", "why": "", "since_ms": 0, "devices": []}]
    made["live"].append({"stack": holder, "kind": "torch_tensor", "api": "torch", "device": 0, "blocks": 1,
                         "bytes": 10 << 20, "largest": 10 << 20, "oldest_ms": 0, "held_at_end": False})
    counters = json.loads(json.dumps(made["devices"][0]["counters"]["device"]))
    counters["allocation"]["allocated"] = 1
    made["devices"][0]["counters"]["torch_tensor"] = counters
    write(made)
    result, _ = drive(page, """
    result.before = icicle();
    toggle(document.querySelector('#kind-toggles input[data-kind="unused in caches"]'));
    result.after = icicle();
    result.leaked = document.getElementById('leaked-bytes').dataset.value;
    result.kept = document.getElementById('cache-segments').className;""", suffix="#moment=end")
    others = sum(g["bytes"] for g in made["live"] if g["stack"] != segment)
    segments = sum(g["bytes"] for g in made["live"] if g["stack"] == segment)
    check(result.get("leaked") == str(others) and result.get("kept") == "neutral",
          f"the cache's segments are kept by it, not leaked: {result.get('leaked')} vs {others}, "
          f"{result.get('kept')}")
    check(result.get("before", {}).get("total") == others and
          result.get("after", {}).get("total") == others + segments - (10 << 20),
          f"the blocks, then with the cache's unused rest: {result.get('before', {}).get('total')} "
          f"{result.get('after', {}).get('total')} vs {others}, {segments}")

    # Without the program's end (a C program): everything live at exit is
    # leaked, in red, and no held section.
    result, _ = drive(html, "result.held = !!document.getElementById('held-at-end');")
    check(result.get("held") is False, "no held section without program_end")


def test_series_without_timeline(traced):
    """CUMEMTRACE_EVENTS=0: the coarse series still draws memory over time."""
    _, _, reports, _ = traced.run("examples/leak_loop", ["20"],
                                  env={"CUMEMTRACE_FORMAT": "json,html,perfetto", "CUMEMTRACE_EVENTS": "0",
                                       "CUMEMTRACE_SAMPLE_MS": "5", "CUMEMTRACE_QUIET": "1"})
    report = one(reports)
    check("timeline" not in report, "no timeline")
    series = report.get("series", {})
    tracks = series.get("tracks", [])
    check([(t["device"], t["kind"]) for t in tracks] == [(0, "device")], f"one track: {tracks}")
    points = tracks[0]["points"] if tracks else []
    check(len(points) >= 3 and len(points) == series.get("samples"), f"samples: {len(points)}")
    check(all(a[0] < b[0] for a, b in zip(points, points[1:])), "times increase")
    peak = report["devices"][0]["counters"]["device"]["allocated_bytes"]["peak"] if report.get("devices") else 0
    check(all(p[1] <= peak and p[1] % (4 << 20) == 0 for p in points),
          "each sample is at most the peak, in whole 4 MiB steps of the loop")
    check(points and points[-1][1] == counters_now(report, 0, "device"),
          "the last sample, taken for the report, equals the live bytes")
    path = output_file(traced, ".trace.json")
    if path:
        last, _ = check_trace(path, report)
        check(set(last) == {"device 0: device"}, f"tracks: {sorted(last)}")
    html = output_file(traced, ".html")
    if html and find_browser():
        dom = check_page(html, report)
        check(attribute(dom, "series-info", "data-samples") == str(series.get("samples")),
              "the page draws the series")
    elif not find_browser() and os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") != "1":
        check(False, "no chromium to load the HTML report in (set CUMEMTRACE_TEST_NO_BROWSER=1 to skip)")


def test_exports_from_dump(traced):
    """`cumemtrace symbolize DUMP --format ...`: every format from a crash dump."""
    traced.run("tests/crash", ["segv-threads"], expect_rc=-11)
    dump = one_dump(traced)
    if not dump:
        return
    rc, text, report = symbolize(dump, "json,html,folded,perfetto,memviz")
    check(rc == 0 and report, f"symbolize: {rc} {text[-500:]}")
    if not report:
        return
    base = dump[:-len(".dump")] + "-symbolized"
    total = sum(int(line.rsplit(" ", 1)[1]) for line in open(base + ".folded"))
    check(total == sum(g["bytes"] for g in report["live"]) and total > 0,
          f"folded sums to the live bytes: {total}")
    check_trace(base + ".trace.json", report)
    check_memviz(base + ".pickle", report)
    if find_browser():
        check_page(base + ".html", report)
    elif os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") != "1":
        check(False, "no chromium to load the HTML report in (set CUMEMTRACE_TEST_NO_BROWSER=1 to skip)")


def test_command_html_export(traced):
    """`cumemtrace html` and `cumemtrace export` on a JSON report: the timeline
    and series come back from the file, so the page and the exports match the
    library's own."""
    _, _, reports, _ = traced.run("examples/leak_loop", ["20"],
                                  env={"CUMEMTRACE_FORMAT": "json,folded,perfetto,memviz",
                                       "CUMEMTRACE_EVENTS": "1000", "CUMEMTRACE_SAMPLE_MS": "5",
                                       "CUMEMTRACE_QUIET": "1"})
    report = one(reports)
    source = output_file(traced, ".json")
    if not source:
        return
    tool = os.path.join(support.BUILD, "cumemtrace")
    directory = traced.dir
    for name, suffix in (("folded", ".folded"), ("perfetto", ".trace.json"), ("memviz", ".pickle")):
        target = os.path.join(directory, "from-json" + suffix)
        done = subprocess.run([tool, "export", "--format", name, source, "-o", target],
                              capture_output=True, text=True, timeout=120)
        check(done.returncode == 0 and os.path.exists(target),
              f"export --format {name}: {done.returncode} {done.stderr!r}")
        if not os.path.exists(target):
            continue
        library = output_file(traced, suffix)
        if name != "memviz":
            check(open(target, "rb").read() == open(library, "rb").read(),
                  f"{name} from the JSON file is the library's own {suffix}, byte for byte")
            continue
        # The JSON keeps the start time to the millisecond: time_us may differ by < 1 ms.
        ours, theirs = (pickle.load(open(path, "rb")) for path in (target, library))
        times = [(a["time_us"], b["time_us"]) for a, b in zip(ours["device_traces"][0],
                                                              theirs["device_traces"][0])]
        check(times and all(abs(a - b) < 1000 for a, b in times), "trace times within 1 ms")
        for snapshot in (ours, theirs):
            for entry in snapshot["device_traces"][0]:
                del entry["time_us"]
        check(ours == theirs, "memviz from the JSON file is the library's own, but for time_us")
    page = os.path.join(directory, "from-json.html")
    done = subprocess.run([tool, "html", source, "-o", page], capture_output=True, text=True,
                          timeout=120)
    check(done.returncode == 0 and os.path.exists(page), f"html: {done.returncode} {done.stderr!r}")
    if not os.path.exists(page):
        return
    if find_browser():
        dom = check_page(page, report)
        check(attribute(dom, "timeline-info", "data-events") == "62", "the timeline came back")
        check(attribute(dom, "icicle", "data-total") ==
              str(report["devices"][0]["counters"]["device_memory"]["allocated_bytes"]["peak"]),
              "the icicle at the peak, from the file's timeline")
    elif os.environ.get("CUMEMTRACE_TEST_NO_BROWSER") != "1":
        check(False, "no chromium to load the HTML report in (set CUMEMTRACE_TEST_NO_BROWSER=1 to skip)")


def test_unwritable_exports(traced):
    """An output path that cannot be written: one line per file, program unharmed."""
    out, err, _, _ = traced.run("examples/leak_loop", ["3"],
                                env={"CUMEMTRACE_OUTPUT": "/nonexistent/dir/report",
                                     "CUMEMTRACE_FORMAT": "html,folded,perfetto,memviz"})
    untraced, _, _, _ = traced.run("examples/leak_loop", ["3"], preload=False)
    check(out == untraced, "program output unchanged")
    lines = [line for line in err.splitlines() if "cannot write report" in line]
    check(len(lines) == 4 and all(".html" in l or ".folded" in l or ".trace.json" in l or ".pickle" in l
                                  for l in lines), f"one line per file: {lines}")


def test_merge_html(traced):
    """cumemtrace merge --format html: one page, loaded in headless Chromium,
    showing each rank's live bytes and the divergent rank as the JSON says."""
    directory = rank_reports(traced, [(0, 5), (1, 20), (2, 5)])
    files = [os.path.join(directory, f"rank-{r}.json") for r in (0, 1, 2)]
    merged = json.loads(tool("merge", *files, "--format", "json").stdout)
    page = os.path.join(directory, "merged.html")
    completed = tool("merge", *files, "--format", "html", "-o", page)
    check(completed.returncode == 0 and os.path.getsize(page) > 0,
          f"merge --format html: {completed.returncode} {completed.stderr!r}")
    bad = tool("diff", files[0], files[1], "--format", "html")
    check(bad.returncode == 1, f"diff has no html: status {bad.returncode}")
    need_browser()
    dom = browser(page, "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    body = body.group(0) if body else ""
    check('data-script-errors="0"' in body and 'data-rendered="1"' in body,
          f"the merged page rendered without script errors: {body}")
    rows = dict(re.findall(r'<tr data-rank="(\d+)" data-live="(\d+)"', dom))
    expected = {str(r["rank"]): str(r["live_bytes"]) for r in merged["ranks"]}
    check(rows == expected, f"the page shows each rank's live bytes as the JSON: {rows} {expected}")
    check(attribute(dom, "divergent") == str(merged["divergent"]["rank"]) == "1",
          f"the page names rank 1 as divergent: {attribute(dom, 'divergent')}")
    check(re.search(r'<details id="all-ranks">', dom) is not None,
          "every rank's row is in a collapsed table")


def test_merge_html_job(traced):
    """A job of 64 ranks (job_reports.py): on the page's first screen (1280
    x 1000), the OOM rank, the missing ranks and the divergent rank with its
    host and its line, linked to its stack, whose row names it as the
    outlier; a histogram of memory per rank (every rank in one bin, rank 37's
    bin red) and a host x local-rank heat map (8 x 8, rank 40's cell
    missing, rank 37's red)."""
    import job_reports
    source = os.path.join(rank_reports(traced, [(0, 3)]), "rank-0.json")
    folder = __import__("tempfile").mkdtemp(prefix="cumemtrace-job-")
    _, _, site = job_reports.make(source, folder, 64, outliers={37: 200}, missing=[40], oom=[12])
    page = os.path.join(folder, "merged.html")
    completed = tool("merge", folder, "--format", "html", "-o", page)
    check(completed.returncode == 0, f"merge --format html: {completed.returncode} {completed.stderr!r}")
    need_browser()
    result, _ = drive(page, """
      function seen(e) { var box = e.getBoundingClientRect(); return box.bottom > 0 && box.top < window.innerHeight; }
      var divergent = document.getElementById('divergent'), link = document.querySelector('#divergent-stacks a.site');
      result.divergent = [divergent.dataset.value, divergent.textContent, seen(divergent)];
      result.link = link ? [link.textContent, link.getAttribute('href'), seen(link)] : null;
      var target = link && document.querySelector(link.getAttribute('href'));
      result.target = target ? target.querySelector('.outliers').textContent : null;
      result.oom = [document.getElementById('oom').textContent, seen(document.getElementById('oom'))];
      result.missing = document.getElementById('missing').textContent;
      result.bins = [].map.call(document.querySelectorAll('#histogram div'), function (d) {
        return [+d.dataset.count, d.className]; });
      var heat = document.getElementById('heatmap');
      result.heat = [+heat.dataset.hosts, +heat.dataset.localRanks,
                     heat.querySelectorAll('span[data-rank]').length, heat.querySelectorAll('span.missing').length,
                     heat.querySelector('span[data-rank="37"]').style.background];
      result.collapsed = !document.getElementById('all-ranks').open;
      result.rows = document.querySelectorAll('#ranks tr[data-rank]').length;
    """)
    check(result.get("divergent", [None])[0] == "37" and "rank 37 on node-004 (local rank 5)" in
          result["divergent"][1] and result["divergent"][2],
          f"rank 37 and its host on the first screen: {result.get('divergent')}")
    check(result.get("link") and result["link"][0].split(" in ")[0].endswith(site) and result["link"][1] == "#stack-1" and
          result["link"][2] and result.get("target", "").startswith("rank 37 "),
          f"its line on the first screen, linked to the stack naming it: {result.get('link')} {result.get('target')}")
    check(result.get("oom", [""])[0].startswith("Out of memory: rank 12 on node-001") and result["oom"][1] and
          "ranks 12, 40 of the world of 64 left no exit report; rank 40 left no report at all" in
          result.get("missing", ""), f"the OOM and the missing ranks: {result.get('oom')} {result.get('missing')}")
    bins = result.get("bins", [])
    check(sum(c for c, _ in bins) == 63 and [k for c, k in bins if k == "outlier"] == ["outlier"] and
          bins[-1] == [1, "outlier"], f"the histogram: every rank once, rank 37 alone and red: {bins}")
    check(result.get("heat", [])[:4] == [8, 8, 63, 1] and result["heat"][4] in ("rgb(198, 40, 40)", "#c62828"),
          f"the heat map: 8 hosts x 8 local ranks, one missing, rank 37 red: {result.get('heat')}")
    check(result.get("collapsed") is True and result.get("rows") == 63,
          f"every rank's row, collapsed: {result.get('collapsed')} {result.get('rows')}")
