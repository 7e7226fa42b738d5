#!/usr/bin/env python3
"""Integration tests: programs run under libcumemtrace.so on the CUDA simulator.

Each case runs a program from tests/integration or examples/ with the tracer
preloaded (and, where results must not change, without it), then checks the
exit status, the output and the JSON reports. Every report is validated
against docs/report.schema.json.

    cases.py --build BUILD_DIR --source SOURCE_DIR CASE
"""
import argparse
import collections
import glob
import json
import os
import re
import socket
import shutil
import subprocess
import sys
import tempfile

import jsonschema

ARGS = None
FAILED = []
LAST_DIR = None


def check(condition, message):
    if not condition:
        FAILED.append(message)
        print("FAIL:", message)
    return condition


def run(program, args=(), env=None, preload=True, extra_preload=(), expect_rc=0):
    """Run a program in a fresh directory; return (stdout, stderr, reports)."""
    global LAST_DIR
    directory = tempfile.mkdtemp(prefix="cumemtrace-case-")
    LAST_DIR = directory
    args = [a.replace("{dir}", directory) for a in args]
    environment = dict(os.environ)
    environment["LD_LIBRARY_PATH"] = os.path.join(ARGS.build, "sim")
    environment["CUMEMTRACE_OUTPUT"] = os.path.join(directory, "report-%p")
    for key in list(environment):
        if key.startswith("SIMCUDA_") or (key.startswith("CUMEMTRACE_") and key != "CUMEMTRACE_OUTPUT"):
            del environment[key]
    environment.update({k: v.replace("{dir}", directory) for k, v in (env or {}).items()})
    if preload:
        first = [os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]] \
            if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") else []
        libraries = first + [os.path.join(ARGS.build, "libcumemtrace.so")] + list(extra_preload)
        environment["LD_PRELOAD"] = " ".join(libraries)
    elif os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        environment["LD_PRELOAD"] = os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]
    else:
        environment.pop("LD_PRELOAD", None)
    if "ASAN_OPTIONS" in environment:
        # Fatal signals are the tracer's to dump and then the default action's.
        environment["ASAN_OPTIONS"] += ":handle_segv=0:handle_sigbus=0:handle_abort=0"
    path = program if os.path.isabs(program) else os.path.join(ARGS.build, program)
    completed = subprocess.run([path, *args], cwd=directory, env=environment,
                               capture_output=True, text=True, timeout=300)
    check(expect_rc is None or completed.returncode == expect_rc,
          f"{program} {' '.join(args)}: exit status {completed.returncode}, expected {expect_rc}\n"
          f"stdout: {completed.stdout}\nstderr: {completed.stderr[-3000:]}")
    reports = []
    for name in sorted(glob.glob(os.path.join(directory, "*.json"))):
        if name.endswith(".trace.json"):    # the Chrome trace export, not a report
            continue
        with open(name) as handle:
            report = json.load(handle)
        validate(report, name)
        reports.append(report)
    texts = {}
    for name in sorted(glob.glob(os.path.join(directory, "*.txt"))):
        with open(name) as handle:
            texts[os.path.basename(name)] = handle.read()
    leftovers = glob.glob(os.path.join(directory, "*.tmp.*"))
    check(not leftovers, f"temporary files left behind: {leftovers}")
    return completed.stdout, completed.stderr, reports, texts


SCHEMA = None


def validate(report, name):
    global SCHEMA
    if SCHEMA is None:
        with open(os.path.join(ARGS.source, "docs", "report.schema.json")) as handle:
            SCHEMA = json.load(handle)
    try:
        jsonschema.validate(report, SCHEMA, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as error:
        check(False, f"{name} does not match the schema: {error.message} at {list(error.path)}")


def only(reports):
    check(len(reports) == 1, f"expected one report, got {len(reports)}")
    return reports[0] if reports else {}


def device_counters(report, device, kind):
    for entry in report.get("devices", []):
        if entry["device"] == device:
            return entry["counters"][kind]
    return None


def entry_point(report, name):
    for entry in report.get("entry_points", []):
        if entry["name"] == name:
            return entry
    return {"name": name, "calls": 0, "allocations": 0, "failures": 0}


def stack_functions(report, stack_id):
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            return [frames[i]["function"] or "" for i in stack["frames"]]
    return []


def user_functions(report, stack_id):
    """The stack's functions without the CUDA libraries' own frames on top."""
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            names = []
            for i in stack["frames"]:
                module = os.path.basename(frames[i]["module"] or "")
                if not names and (module.startswith("libcudart") or module.startswith("libcuda")):
                    continue
                names.append(frames[i]["function"] or "")
            return names
    return []


def stack_files(report, stack_id):
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            return [f"{os.path.basename(frames[i]['file'] or '')}:{frames[i]['line']}"
                    for i in stack["frames"]]
    return []


KiB = 1024
EXPECTED_BLOCKS = [
    ("cudaMalloc", "device", 100 * KiB), ("cudaMallocManaged", "managed", 101 * KiB),
    ("cudaMallocHost", "pinned_host", 102 * KiB), ("cudaHostAlloc", "pinned_host", 103 * KiB),
    ("cudaMallocPitch", "device", 1024 * 10), ("cudaMalloc3D", "device", 1024 * 4 * 3),
    ("cudaMallocArray", "array", 4 * 64 * 32), ("cudaMallocAsync", "stream_ordered", 104 * KiB),
    ("cudaMallocAsync_ptsz", "stream_ordered", 105 * KiB),
    ("cudaMallocFromPoolAsync", "stream_ordered", 106 * KiB),
    ("cudaMallocFromPoolAsync_ptsz", "stream_ordered", 107 * KiB),
    ("cuMemAlloc_v2", "device", 200 * KiB), ("cuMemAllocPitch_v2", "device", 2048 * 5),
    ("cuMemAllocManaged", "managed", 201 * KiB), ("cuMemAllocHost_v2", "pinned_host", 202 * KiB),
    ("cuMemHostAlloc", "pinned_host", 203 * KiB),
    ("cuMemHostRegister_v2", "registered_host", 64 * KiB),
    ("cuMemAllocAsync", "stream_ordered", 204 * KiB),
    ("cuMemAllocAsync_ptsz", "stream_ordered", 205 * KiB),
    ("cuMemAllocFromPoolAsync", "stream_ordered", 206 * KiB),
    ("cuMemAllocFromPoolAsync_ptsz", "stream_ordered", 207 * KiB),
    ("cuMemCreate", "vmm_physical", 2 << 20), ("cuMemAddressReserve", "vmm_reservation", 4 << 20),
    ("cuMemMap", "vmm_mapping", 2 << 20), ("cuArrayCreate_v2", "array", 64 * 16 * 4),
    ("cuArray3DCreate_v2", "array", 32 * 8 * 4 * 4),
    ("cuMipmappedArrayCreate", "array", 32 * 8 * 4 * 4 + 16 * 4 * 2 * 4),
]


def case_entry_points_keep():
    out, err, reports, _ = run("tests/all_entry_points", ["keep"])
    check("ptsz calls: alloc 2/2 pool 2/2" in out, f"ptsz routing: {out!r}")
    report = only(reports)
    items = report["blocks"]["items"]
    seen = collections.Counter((b["api"], b["kind"], b["size"]) for b in items)
    expected = collections.Counter(EXPECTED_BLOCKS)
    check(seen == expected, f"blocks differ: missing {expected - seen}, unexpected {seen - expected}")
    for api, kind, size in EXPECTED_BLOCKS:
        check(entry_point(report, api)["allocations"] == 1, f"{api} recorded once")
    check(all(b["device"] == 0 for b in items if b["kind"] != "vmm_reservation"),
          "every block on device 0")
    holes = report["fragmentation"]
    check((holes["vmm_reserved_bytes"], holes["vmm_mapped_bytes"], holes["vmm_unmapped_bytes"]) ==
          (4 << 20, 2 << 20, 2 << 20), f"VMM: 4 MiB reserved, 2 MiB mapped, 2 MiB hole: {holes}")
    pools = [b for b in items if "FromPool" in b["api"]]
    check(all(b["stream_or_pool"] for b in pools), "pool allocations name their pool")
    created = report["pools"]
    check(len(created) == 1 and created[0]["device"] == 0 and
          {b["stream_or_pool"] for b in pools} == {created[0]["handle"]},
          f"the pool the program created is listed: {created} {[b['stream_or_pool'] for b in pools]}")
    if created:
        in_blocks = sum(b["size"] for b in pools)
        check(created[0]["reserved_bytes"] == 32 << 20 and
              in_blocks <= created[0]["used_bytes"] < in_blocks + 4096 * len(pools),
              f"its reserved (one 32 MiB chunk) and used bytes ({in_blocks} in blocks): {created[0]}")
        check(created[0]["handle"][2:] in err, "the summary shows the pool")
    check(all(value == 0 for value in report["tracer"]["lost"].values()),
          f"nothing lost: {report['tracer']['lost']}")


def case_entry_points_free():
    out, err, reports, _ = run("tests/all_entry_points", ["free"])
    report = only(reports) if reports else None
    if report is None:
        return
    per_kind = collections.Counter(kind for _, kind, _ in EXPECTED_BLOCKS)
    for kind, count in per_kind.items():
        counters = device_counters(report, 0, kind) if kind != "vmm_reservation" else \
            device_counters(report, None, kind)
        check(counters is not None and counters["allocation"]["allocated"] == count,
              f"{kind}: {count} allocated, report says {counters and counters['allocation']}")
        check(counters is not None and counters["allocation"]["current"] == 0 and
              counters["allocated_bytes"]["current"] == 0, f"{kind}: nothing live at exit")
        check(counters is not None and counters["allocation"]["freed"] == count,
              f"{kind}: every block freed")
    check(report["live"] == [], "no live blocks")
    check(report["tracer"]["lost"]["unknown_free"] == 0, "every free matched an allocation")
    untraced, _, _, _ = run("tests/all_entry_points", ["free"], preload=False)
    check(out == untraced, f"output changed by the tracer: {out!r} vs {untraced!r}")


def case_static_cudart():
    out, err, reports, _ = run("tests/static_cudart")
    report = only(reports)
    check(entry_point(report, "cuMemAlloc_v2")["allocations"] == 3, "3 driver allocations")
    check(entry_point(report, "cudaMalloc")["calls"] == 0, "runtime level invisible")
    live = report["live"]
    check(len(live) == 1 and live[0]["bytes"] == 3 << 20, f"one 3 MiB block live: {live}")
    if live:
        check("static_allocate" in stack_functions(report, live[0]["stack"]),
              f"stack names static_allocate: {stack_functions(report, live[0]['stack'])}")


def case_dlopen_driver():
    out, err, reports, _ = run("tests/dlopen_driver")
    check("async ptsz calls 1, legacy 0" in out, f"ptsz lookup forwarded: {out!r}")
    report = only(reports)
    check(entry_point(report, "cuMemAlloc_v2")["allocations"] == 3, "3 cuMemAlloc through lookup")
    check(entry_point(report, "cuMemAllocAsync_ptsz")["allocations"] == 1, "ptsz wrapper used")
    check(entry_point(report, "cuGetProcAddress")["calls"] == 1, "v1 lookup wrapped")
    check(report["blocks"]["total"] == 3, f"3 blocks live: {report['blocks']['total']}")


def case_leak_loop():
    out, err, reports, texts = run("examples/leak_loop", ["20"],
                                   env={"CUMEMTRACE_FORMAT": "text,json"})
    report = only(reports)
    live = report["live"]
    check(len(live) == 1, f"one leaking site: {live}")
    if live:
        top = live[0]
        check(top["blocks"] == 20 and top["bytes"] == 20 * (4 << 20) and top["api"] == "cudaMalloc",
              f"20 x 4 MiB via cudaMalloc: {top}")
        functions = user_functions(report, top["stack"])
        check(functions[:3] == ["leak_scratch_buffer", "train_step", "main"],
              f"the program's frames, innermost first: {functions}")
        files = [f for f in stack_files(report, top["stack"]) if f.startswith("leak_loop.c:")]
        check(files[:1] == ["leak_loop.c:25"], f"file:line of the cudaMalloc call: {files}")
        check(all(f["module"] is None or "libcumemtrace" not in f["module"]
                  for f in report["frames"]), "no frame of the tracer itself")
    counters = device_counters(report, 0, "device")
    check(counters["allocation"]["allocated"] == 41 and counters["allocation"]["freed"] == 21,
          f"41 allocated, 21 freed: {counters['allocation']}")
    check(counters["allocated_bytes"]["peak"] == (64 << 20) + 19 * (4 << 20) + (32 << 20) + (4 << 20),
          f"peak: {counters['allocated_bytes']}")
    check("Leaked (live at exit)" in err and "leak_scratch_buffer" in err,
          "summary on stderr names the leak")
    check(any("leak_scratch_buffer" in text for text in texts.values()), "text file written")
    device = [d for d in report["devices"] if d["device"] == 0][0]
    check(device["driver_total"] == 8 << 30 and device["untracked_bytes"] is not None,
          f"driver free/total read at exit: {device['driver_free']} {device['driver_total']}")


def case_threads():
    out, err, reports, _ = run("tests/threads")
    report = only(reports)
    counters = device_counters(report, 0, "device")
    check(counters["allocation"]["allocated"] == 160000, f"allocated: {counters['allocation']}")
    check(counters["allocation"]["freed"] == 159984, f"freed: {counters['allocation']}")
    check(counters["allocation"]["current"] == 16, "16 live")
    check(entry_point(report, "cudaMalloc")["allocations"] == 160000, "all labelled cudaMalloc")
    check(len(report["threads"]) >= 16, "16 threads seen")
    check(all(value == 0 for value in report["tracer"]["lost"].values()),
          f"nothing lost: {report['tracer']['lost']}")


def case_threads_snapshot():
    """8 threads allocate and free while snapshots are taken: each snapshot is
    one picture (taken with every registry shard locked), the end is exact."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-snaps-")
    out, err, reports, _ = run("tests/threads_snapshot", [directory])
    report = only(reports)
    threads = 8
    words = out.split()
    total = int(words[words.index("allocations") - 1]) if "allocations" in words else -1
    kinds = ("device", "stream_ordered")
    allocated = sum(device_counters(report, 0, k)["allocation"]["allocated"] for k in kinds)
    freed = sum(device_counters(report, 0, k)["allocation"]["freed"] for k in kinds)
    check(allocated == total, f"allocated: {allocated}, expected {total}")
    check(freed == total - threads, f"freed: {freed}, expected {total - threads}")
    check(report["blocks"]["total"] == threads, f"live at exit: {report['blocks']['total']}")
    check(entry_point(report, "cudaMalloc")["allocations"] == total // 2, "half cudaMalloc")
    check(entry_point(report, "cudaMallocAsync")["allocations"] == total // 2,
          "half cudaMallocAsync")
    check(all(value == 0 for value in report["tracer"]["lost"].values()),
          f"nothing lost: {report['tracer']['lost']}")
    snapshots = []
    for name in sorted(glob.glob(os.path.join(directory, "snap-*.json"))):
        with open(name) as handle:
            snapshots.append(json.load(handle))
        validate(snapshots[-1], name)
    check(len(snapshots) == 10, f"10 snapshots: {len(snapshots)}")
    for number, snap in enumerate(snapshots):
        items = snap["blocks"]["items"]
        live_bytes = sum(item["size"] for item in items)
        zero = {"allocated_bytes": {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
                "allocation": {"current": 0}}
        counters = [device_counters(snap, 0, k) or zero for k in kinds]   # before any block
        current = sum(c["allocated_bytes"]["current"] for c in counters)
        blocks = sum(c["allocation"]["current"] for c in counters)
        check(snap["blocks"]["listed"] == snap["blocks"]["total"] == len(items) == blocks,
              f"snapshot {number}: blocks {snap['blocks']} vs counters {blocks}")
        check(live_bytes == current, f"snapshot {number}: blocks hold {live_bytes} bytes, "
              f"counters say {current}")
        stacks = sum(stack["live_bytes"] for stack in snap["stacks"])
        check(stacks == current, f"snapshot {number}: stacks hold {stacks}, counters {current}")
        for c in counters:
            bytes_ = c["allocated_bytes"]
            check(bytes_["allocated"] == bytes_["current"] + bytes_["freed"]
                  and bytes_["peak"] >= bytes_["current"],
                  f"snapshot {number}: counters add up: {bytes_}")
    shutil.rmtree(directory, ignore_errors=True)


def case_fork():
    out, err, reports, _ = run("tests/fork_child")
    check(len(reports) == 2, f"two reports (parent, child): {len(reports)}")
    by_blocks = {r["blocks"]["total"]: r for r in reports}
    parent, child = by_blocks.get(1), by_blocks.get(2)
    check(parent is not None and child is not None, "parent has 1 block, child 2")
    if parent and child:
        check(child["process"]["ppid"] == parent["process"]["pid"], "child's parent is the parent")
        check(f"child {child['process']['pid']}" in out, "child report has the child's pid")
        check(all(b["size"] == 3 << 20 for b in child["blocks"]["items"]),
              "the child's report holds only its own blocks")


def case_fork_symbols():
    """A forked child symbolizes with what its parent's snapshot read, and a
    report looks up file and line only for the frames it shows."""
    out, err, reports, _ = run("tests/fork_symbols", ["{dir}/snap"],
                               env={"CUMEMTRACE_DEBUG": "1", "LD_DEBUG": "files"})
    child = int(re.search(r"child (\d+)", out).group(1))
    readers = [int(pid) for pid in re.findall(r"reading the modules of process (\d+)", err)]
    check(len(readers) == 1 and readers[0] != child,
          f"the modules read once, by the parent, not again by the child: {readers}")
    report = next((r for r in reports if r["process"]["pid"] == child), None)
    check(report is not None, f"the child's report: {[r['process']['pid'] for r in reports]}")
    if report:
        frames = {f["function"]: f for f in report["frames"]}
        allocating = frames.get("child_allocates")
        check(allocating is not None and (allocating["file"] or "").endswith("fork_symbols.c"),
              f"the child's own frame symbolized, with its file: {allocating}")
    looked_up = re.findall(r"file and line looked up for (\d+) of (\d+) native frames", err)
    check(looked_up and all(int(read) < int(native) for read, native in looked_up),
          f"hidden frames (start-up, CUDA's inner ones) read no debug information: {looked_up}")
    check("libdebuginfod" not in err, "the debuginfod client is not loaded without "
          "DEBUGINFOD_URLS")
    out, err, reports, _ = run("tests/fork_symbols", ["-"], env={"CUMEMTRACE_DEBUG": "1"})
    child = int(re.search(r"child (\d+)", out).group(1))
    readers = [int(pid) for pid in re.findall(r"reading the modules of process (\d+)", err)]
    check(child in readers, f"a child whose parent read nothing reads its modules: {readers}")


def case_fork_pool():
    """A child creates a pool after fork: its report lists that pool."""
    out, err, reports, _ = run("tests/fork_pool")
    check(len(reports) == 2, f"two reports (parent, child): {len(reports)}")
    child = next((r for r in reports if f"child {r['process']['pid']}" in out), None)
    check(child is not None, f"the child's report: {out!r}")
    if child:
        pools = child["pools"]
        check(len(pools) == 1, f"the child's report lists the pool it created: {pools}")
        blocks = [b for b in child["blocks"]["items"] if b["api"] == "cudaMallocFromPoolAsync"]
        check(pools and blocks and blocks[0]["stream_or_pool"] == pools[0]["handle"] and
              pools[0]["used_bytes"] >= 1 << 20,
              f"the pool holds the child's block: {pools} {blocks}")


def case_implicit_free():
    out, err, reports, _ = run("tests/implicit_free")
    report = only(reports)
    device = device_counters(report, 0, "device")
    pinned = device_counters(report, 0, "pinned_host")
    async_ = device_counters(report, 0, "stream_ordered")
    check(device["freed_implicitly"]["blocks"] == 1 and device["allocation"]["freed"] == 0,
          f"device block freed implicitly: {device}")
    check(pinned["freed_implicitly"]["blocks"] == 1, f"pinned block freed implicitly: {pinned}")
    check(async_["allocation"]["current"] == 1, "stream-ordered block survives the reset")
    check("freed only implicitly" in err, "summary says freed only implicitly")
    implicit = [s for s in report["stacks"] if s["freed_implicitly_blocks"]]
    check(any("forget_two" in stack_functions(report, s["id"]) for s in implicit),
          "implicit leak attributed to forget_two")


def by_reason(reports, reason):
    found = [r for r in reports if r["reason"] == reason]
    check(len(found) == 1, f"one {reason} report (got {[r['reason'] for r in reports]})")
    return found[0] if found else {}


def case_oom():
    out, err, reports, _ = run("tests/oom", ["exhausted"], env={"SIMCUDA_MEMORY": "64M"})
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
    check(event.get("retry") == "pending", f"no retry seen: {event.get('retry')}")
    check("grow" in user_functions(oom, event.get("stack", 0)), "the OOM report names grow()")
    check(oom.get("blocks", {}).get("total") == 4, "the OOM report lists the 4 live blocks")
    check("OUT OF MEMORY" in err and "verdict: exhausted" in err, "OOM summary on stderr")


def case_oom_fragmented():
    out, err, reports, _ = run("tests/oom", ["fragmented"], env={"SIMCUDA_MEMORY": "64M"})
    check("fragmented: cudaErrorMemoryAllocation" in out, f"simulated fragmentation: {out!r}")
    event = by_reason(reports, "oom").get("event") or {}
    check(event.get("verdict") == "fragmented" and event.get("driver_free") == 32 << 20,
          f"fragmented verdict: 32 MiB free, 16 MiB refused: {event}")
    check("verdict: fragmented" in err, "fragmented verdict on stderr")
    check(by_reason(reports, "oom").get("fragmentation", {}).get("verdict") == "fragmented",
          "the fragmentation section gives the same verdict")
    check(by_reason(reports, "exit").get("fragmentation", {}).get("verdict") == "none",
          "the exit report, about no OOM, does not")


def case_oom_retry():
    out, err, reports, _ = run("tests/oom", ["retry"], env={"SIMCUDA_MEMORY": "64M"})
    check("retry: cudaSuccess" in out, f"retry succeeded: {out!r}")
    oom = by_reason(reports, "oom")
    check((oom.get("event") or {}).get("retry") == "succeeded",
          f"the OOM report says the retry succeeded: {oom.get('event')}")
    check(oom.get("blocks", {}).get("total") == 4, "the OOM report still shows the OOM moment")
    final = by_reason(reports, "exit")
    check(final["failures"]["oom_retries_succeeded"] == 1, "retry counted")
    out, err, reports, _ = run("tests/oom", ["exhausted"],
                               env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_OOM": "off"})
    check([r["reason"] for r in reports] == ["exit"], "CUMEMTRACE_OOM=off: no OOM report")


def stack_order(report):
    """Where the stacks of a report are out of the writer's order (by live
    and implicitly freed bytes, then peak, highest first, then by id)."""
    key = [(-(s["live_bytes"] + s["freed_implicitly_bytes"]), -s["peak_live_bytes"], s["id"])
           for s in report["stacks"]]
    return [i for i in range(1, len(key)) if key[i - 1] > key[i]]


def case_reports_at_once():
    """OOM reports and snapshots collected at the same time, 10 of each, while
    a third thread changes every site's figures: each report is sorted by its
    own figures, and adds up."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-at-once-")
    out, err, reports, _ = run("tests/reports_at_once", [directory],
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


def case_bad_environment():
    env = {"CUMEMTRACE_DEPTH": "deep", "CUMEMTRACE_FORMAT": "yaml", "CUMEMTRACE_MIN_SIZE": "big",
           "CUMEMTRACE_ENABLE": "perhaps", "CUMEMTRACE_TOP": "-3"}
    out, err, reports, _ = run("examples/leak_loop", ["5"], env=env)
    untraced, _, _, _ = run("examples/leak_loop", ["5"], preload=False)
    check(out == untraced, "program output unchanged")
    lines = [line for line in err.splitlines() if line.startswith("cumemtrace: CUMEMTRACE_")]
    check(len(lines) == 5, f"one line per bad variable: {lines}")
    for name, value in env.items():
        check(any(f"{name}='{value}'" in line and "using" in line for line in lines),
              f"{name} named with its value and the default")
    check(len(reports) == 1, "defaults used: the JSON report is still written")


def case_unwritable_output():
    env = {"CUMEMTRACE_OUTPUT": "/nonexistent-cumemtrace-dir/report"}
    out, err, reports, _ = run("examples/leak_loop", ["3"], env=env)
    untraced, _, _, _ = run("examples/leak_loop", ["3"], preload=False)
    check(out == untraced, "program output unchanged")
    check("cannot write report to '/nonexistent-cumemtrace-dir/report.json': No such file or directory"
          in err, f"one clear line: {err[-500:]!r}")


def case_disabled():
    out, err, reports, _ = run("examples/leak_loop", ["3"], env={"CUMEMTRACE_ENABLE": "0"})
    check(reports == [] and "cumemtrace" not in err, "nothing written when disabled")


def case_quiet_and_depth():
    out, err, reports, _ = run("examples/leak_loop", ["3"],
                               env={"CUMEMTRACE_QUIET": "1", "CUMEMTRACE_DEPTH": "2"})
    check(err == "", f"quiet: nothing on stderr: {err!r}")
    report = only(reports)
    check(all(len(s["frames"]) <= 2 for s in report["stacks"]), "depth 2 honoured")
    out, err, reports, _ = run("examples/leak_loop", ["3"], env={"CUMEMTRACE_MIN_SIZE": "8M"})
    report = only(reports)
    small = [g for g in report["live"] if g["bytes"] == 3 * (4 << 20)]
    check(small and all(len(s["frames"]) == 0 for s in report["stacks"] if s["id"] == small[0]["stack"]),
          "blocks under CUMEMTRACE_MIN_SIZE are counted without a stack")
    out, err, reports, _ = run("examples/leak_loop", ["3"], env={"CUMEMTRACE_FORMAT": "none"})
    check(not os.listdir(LAST_DIR) and "Memory by device" in err,
          f"format none: no file, the summary still on stderr: {os.listdir(LAST_DIR)} {err[-200:]!r}")
    out, err, reports, _ = run("examples/leak_loop", ["3"],
                               env={"CUMEMTRACE_FORMAT": "none", "CUMEMTRACE_QUIET": "1"})
    check(not os.listdir(LAST_DIR) and err == "", f"and quiet: nothing at all: {err!r}")


def case_rtld_next():
    lib = os.path.join(ARGS.build, "tests", "librtld_next_interposer.so")
    out, err, reports, _ = run("tests/rtld_next", extra_preload=[lib])
    check("getpid ok" in out, f"RTLD_NEXT resolved relative to the caller: {out!r} {err[-300:]!r}")


def case_examples():
    for name, site in (("pinned_pileup", "load_batch"), ("async_leak", "handle_request"),
                       ("vmm_unreleased", "create_spare")):
        out, err, reports, _ = run(f"examples/{name}")
        report = only(reports)
        top = report["live"][0] if report.get("live") else {}
        check(site in stack_functions(report, top.get("stack", 0)),
              f"{name}: the top leak is at {site}: {top}")
        check(site in err, f"{name}: summary names {site}")
        pool = report["devices"][0]["default_pool"]
        if name == "async_leak":
            # 30 requests of 1 MiB, 10 kept: the simulator's pool reserves in
            # 32 MiB chunks, so the pool says 10 MiB used of 32 MiB reserved.
            check(pool == {"reserved_bytes": 32 << 20, "reserved_peak": 32 << 20,
                           "used_bytes": 10 << 20, "used_peak": 11 << 20},
                  f"the default pool's reserved and used bytes: {pool}")
            check("22.0 MiB reserved but unused" in err, "the summary shows the pool's idle bytes")
            check(report["fragmentation"]["verdict"] == "idle_pool_reserve" and
                  report["fragmentation"]["pool_idle_bytes"] == 22 << 20,
                  f"and the fragmentation section's verdict: {report['fragmentation']}")
        else:
            check(pool is None, f"{name}: no stream-ordered allocation, no pool figures: {pool}")


def symbolize(dump, formats="json"):
    """Run `cumemtrace symbolize` on a dump; return (exit status, stdout, JSON report)."""
    base = dump[:-len(".dump")] + "-symbolized"
    completed = subprocess.run([os.path.join(ARGS.build, "cumemtrace"), "symbolize", dump,
                                "--output", base, "--format", formats],
                               capture_output=True, text=True, timeout=120)
    report = None
    if os.path.exists(base + ".json"):
        with open(base + ".json") as handle:
            report = json.load(handle)
        validate(report, base + ".json")
    return completed.returncode, completed.stdout + completed.stderr, report


def one_dump():
    dumps = glob.glob(os.path.join(LAST_DIR, "*.dump"))
    check(len(dumps) == 1, f"one crash dump: {dumps}")
    return dumps[0] if dumps else None


def case_crash_segv():
    out, err, reports, _ = run("tests/crash", ["segv-threads"], expect_rc=-11)
    check("crash dump written to" in err, f"one line names the dump: {err[-300:]!r}")
    dump = one_dump()
    if not dump:
        return
    rc, text, report = symbolize(dump)
    check(rc == 0 and report is not None, f"symbolize: {rc} {text[-500:]}")
    if not report:
        return
    check(report["event"]["type"] == "crash" and report["event"]["signal"] == 11,
          f"crash event: {report['event']}")
    held = [b for b in report["blocks"]["items"] if b["size"] >= 1 << 20]
    check(sorted(b["size"] for b in held) == [1 << 20, 2 << 20, 3 << 20],
          f"the main thread's 3 blocks: {held}")
    check(all("hold" in user_functions(report, b["stack"]) for b in held),
          "their stacks name hold() (symbolized offline)")
    check("hold" in text and "crash.c:" in text, "text report with file:line")


def case_crash_abort():
    out, err, reports, _ = run("tests/crash", ["abort"], env={"SIMCUDA_ABORT_AT": "3"},
                               expect_rc=-6)
    dump = one_dump()
    if not dump:
        return
    rc, text, report = symbolize(dump)
    check(rc == 0 and report and report["event"]["signal"] == 6, f"abort dump: {text[-300:]}")
    if report:
        check(report["blocks"]["total"] == 2, f"2 live blocks: {report['blocks']['total']}")
        check(report["event"]["lock"] == "taken", "the lock was free: abort came from the driver")


def case_crash_own_handler():
    out, err, reports, _ = run("tests/crash", ["own-handler"], expect_rc=3)
    check("own handler ran" in out, f"the program's own SIGSEGV handler still runs: {out!r}")
    dump = one_dump()
    if dump:
        rc, text, report = symbolize(dump)
        check(rc == 0 and report and report["blocks"]["total"] >= 3, "dump written before it")


def case_crash_unwritable():
    out, err, reports, _ = run("tests/crash", ["segv-threads"],
                               env={"CUMEMTRACE_OUTPUT": "/nonexistent-cumemtrace/x"},
                               expect_rc=-11)
    check("cannot write the crash dump to '/nonexistent-cumemtrace/x.dump': No such file or "
          "directory" in err, f"one clear line, with the path and the reason: {err[-300:]!r}")


def case_exit_in_handler():
    # The SIGALRM handler's exit() runs in a signal handler: a dump stands in
    # for the report (the full report could hang on a lock the interrupted
    # code holds: a CUDA call's, malloc's). The program exits 0, once, and
    # what it holds is on record.
    seen = set()
    for attempt in range(8):
        out, err, reports, _ = run("tests/crash", ["exit-in-handler"])
        dumps = glob.glob(os.path.join(LAST_DIR, "*.dump"))
        check(len(reports) + len(dumps) == 1,
              f"one exit record, report or dump: {len(reports)} reports, {len(dumps)} dumps")
        if dumps:
            seen.add("dump")
            check("exit() from a signal handler" in err, f"the dump is announced: {err[-300:]!r}")
            rc, text, report = symbolize(dumps[0])
            check(rc == 0 and report and report["reason"] == "exit" and report["event"] is None,
                  f"the dump reads back as an exit report: {rc} {text[-300:]}")
            reports = [report]
        else:
            seen.add("report")
        sizes = sorted(b["size"] for b in reports[0]["blocks"]["items"])
        check((1 << 20) in sizes and (2 << 20) in sizes,
              f"the 1 MiB and 2 MiB blocks held at exit are listed: {sizes}")
    print(f"exit-in-handler: {sorted(seen)} seen")


def case_signal_storm():
    out, err, reports, _ = run("tests/crash", ["usr2-storm"])
    snapshots = [r for r in reports if r["reason"] == "signal"]
    check(1 <= len(snapshots) <= 1000, f"snapshots written: {len(snapshots)}")
    check(all(r["event"] == {"type": "signal", "signal": 12} for r in snapshots),
          "each snapshot names its signal")
    final = by_reason(reports, "exit")
    counters = device_counters(final, 0, "device") if final else None
    check(counters and counters["allocation"]["allocated"] == 20003 and
          counters["allocation"]["current"] == 403,
          f"exact counts after the storm: {counters and counters['allocation']}")
    expected = sum(1024 + (t * 131 + i * 17) % 8192 for t in range(4) for i in range(5000))
    check(out == f"storm: {expected} bytes allocated\n", f"results unchanged: {out!r}")


def case_signal_chained():
    out, err, reports, _ = run("tests/crash", ["usr2-chained"])
    check("own handler saw 20 signals" in out, f"the program's handler saw every signal: {out!r}")
    check(any(r["reason"] == "signal" for r in reports), "and snapshots were written")
    out, err, reports, _ = run("tests/crash", ["usr2-chained"], env={"CUMEMTRACE_SIGNAL": "off"})
    check(not any(r["reason"] == "signal" for r in reports), "CUMEMTRACE_SIGNAL=off: none")


def case_torch_per_tensor():
    shell = ["-c", 'echo "[${PYTORCH_NO_CUDA_MEMORY_CACHING:-unset}]"']
    out, err, reports, _ = run("/bin/sh", shell, env={"CUMEMTRACE_TORCH_PER_TENSOR": "1"})
    check(out == "[1]\n", f"PyTorch's caching is off for the program: {out!r}")
    out, err, reports, _ = run("/bin/sh", shell)
    check(out == "[unset]\n", f"and left alone by default: {out!r}")
    for value in ("maybe", ""):
        out, err, reports, _ = run("/bin/sh", shell, env={"CUMEMTRACE_TORCH_PER_TENSOR": value})
        check(out == "[unset]\n" and "cumemtrace" not in err,
              f"{value!r} changes nothing, and a process without CUDA says nothing: {out!r} {err!r}")
    out, err, reports, _ = run("examples/leak_loop", ["2"],
                               env={"CUMEMTRACE_TORCH_PER_TENSOR": "maybe"})
    check(err.count("CUMEMTRACE_TORCH_PER_TENSOR='maybe'") == 1,
          f"a bad value is named once in a process that uses CUDA: {err[-500:]!r}")
    out, err, reports, _ = run("examples/leak_loop", ["2"], env={"CUMEMTRACE_TORCH_PER_TENSOR": ""})
    check("CUMEMTRACE_TORCH_PER_TENSOR" not in err, f"empty means unset: {err[-500:]!r}")


def case_follow_and_overwrite():
    shell = ["-c", 'echo "[$LD_PRELOAD]"']
    out, err, reports, _ = run("/bin/sh", shell, env={"CUMEMTRACE_FOLLOW": "0"})
    check("libcumemtrace" not in out, f"CUMEMTRACE_FOLLOW=0 leaves children alone: {out!r}")
    out, err, reports, _ = run("/bin/sh", shell)
    check("libcumemtrace" in out, f"children are traced by default: {out!r}")
    out, err, reports, _ = run("tests/fork_child", env={"CUMEMTRACE_OUTPUT": "{dir}/fixed"})
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(LAST_DIR, "*.json")))
    check(len(names) == 2 and "fixed.json" in names, f"no report overwritten: {names}")


def case_command_errors():
    tool = os.path.join(ARGS.build, "cumemtrace")
    for args, status, words in ((["symbolize", "/nonexistent.dump"], 2, "cannot read dump"),
                                (["frobnicate"], 1, "unknown command"),
                                (["run"], 1, "no command to run")):
        completed = subprocess.run([tool, *args], capture_output=True, text=True)
        check(completed.returncode == status and words in completed.stderr and
              completed.stderr.count("\n") == 1,
              f"{args}: status {completed.returncode}, {completed.stderr!r}")
    out, err, reports, _ = run(tool, ["run", "--format", "json", "--",
                                      os.path.join(ARGS.build, "examples", "leak_loop"), "2"],
                               preload=False)
    check(len(reports) == 1 and reports[0]["live"], "cumemtrace run traces the command")


def python_stack(report, size):
    """The Python frames (function, file, line) of the one live group of `size` bytes."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    held = [g for g in report.get("live", []) if g["bytes"] == size]
    check(len(held) == 1, f"one live group of {size} bytes: {report.get('live')}")
    return [frames[i] for i in stacks[held[0]["stack"]]["frames"] if frames[i]["python"]]


def case_report_reads_right():
    """What a newcomer meets: no driver found (the simulator's libcudart
    without its libcuda), VMM sites, several kinds of memory on one device."""
    lonely = tempfile.mkdtemp(prefix="cumemtrace-nodriver-")
    os.symlink(os.path.join(ARGS.build, "sim", "libcudart.so.13"),
               os.path.join(lonely, "libcudart.so.13"))
    out, err, reports, texts = run("examples/leak_loop", ["2"], expect_rc=1,
                                   env={"LD_LIBRARY_PATH": lonely, "CUMEMTRACE_FORMAT": "text,json"})
    text = "".join(texts.values())
    check("failed with error 35 (cudaErrorInsufficientDriver)" in text,
          f"the error code has its CUDA name: {text[-1500:]}")
    check("LD_LIBRARY_PATH=build/sim" in text and text.count("no usable driver") == 1,
          "and one line says what to do without a GPU")
    failures = only(reports).get("failures", {}).get("recent", [])
    check([f["error"] for f in failures] == ["cudaErrorInsufficientDriver"], f"JSON: {failures}")
    lines = text.splitlines()
    headings = [i for i, l in enumerate(lines) if l.startswith("  ") and l.rstrip().endswith(":")
                and not l.startswith("   ")]
    check(all(i + 1 < len(lines) and lines[i + 1].startswith("   ") for i in headings),
          f"no heading without entries: {[lines[i] for i in headings]}")
    check("Largest holders" not in text, "nothing was ever held: no largest holders")
    json_path = glob.glob(os.path.join(LAST_DIR, "*.json"))[0]
    hidden, shown = tool("report", json_path).stdout, tool("report", json_path, "--all-frames").stdout
    check("_start" not in hidden and "(3 frames hidden: start-up)" in hidden and
          "_start" in shown and "frames hidden" not in shown,
          f"report --all-frames shows the start-up frames the default hides:\n{shown[-800:]}")

    out, err, reports, texts = run("examples/vmm_unreleased", env={"CUMEMTRACE_FORMAT": "text,json"})
    text = "".join(texts.values())
    holders = [l for l in text.splitlines() if l.startswith("   #") and " peak " in l]
    check(any("16.0 MiB of vmm_reservation via cuMemAddressReserve" in l for l in holders) and
          any("16.0 MiB of vmm_mapping via cuMemMap" in l for l in holders) and
          any("16.0 MiB of vmm_physical via cuMemCreate" in l for l in holders),
          f"largest holders name their kind and entry point: {holders}")
    stacks = only(reports).get("stacks", [])
    check(all(s["kind"] and s["api"] for s in stacks), f"and so does the JSON: {stacks}")
    # The total row only where it sums several kinds.
    check("all device memory" not in text, "one kind of device memory: no total row repeating it")
    out, err, reports, texts = run("tests/all_entry_points", ["keep"],
                                   env={"CUMEMTRACE_FORMAT": "text"})
    text = "".join(texts.values())
    check(text.count("    all device memory ") >= 1, "several kinds: the total row, named as one")


def traced_environment(directory, **settings):
    """The environment run() gives a traced program, for one started with Popen."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("CUMEMTRACE_") and not k.startswith("SIMCUDA_")}
    first = [os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]] \
        if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") else []
    environment.update(LD_LIBRARY_PATH=os.path.join(ARGS.build, "sim"),
                       LD_PRELOAD=" ".join(first + [os.path.join(ARGS.build, "libcumemtrace.so")]),
                       CUMEMTRACE_OUTPUT=os.path.join(directory, "report-%p"), **settings)
    return environment


def live_sockets():
    with open("/proc/net/unix") as handle:
        return [line.split()[-1] for line in handle if "@cumemtrace-live-" in line]


def start_target(directory, *args, watched=True):
    """live_target.py under the tracer; its pids once it holds its weights."""
    ready = os.path.join(directory, "ready")
    script = os.path.join(ARGS.source, "tests", "integration", "live_target.py")
    process = subprocess.Popen([sys.executable, script, ready, *args], cwd=directory,
                               env=traced_environment(directory, CUMEMTRACE_SAMPLE_MS="100",
                                                      CUMEMTRACE_QUIET="1",
                                                      CUMEMTRACE_LIVE="1" if watched else "0"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        if os.path.exists(ready) or process.poll() is not None:
            break
        __import__("time").sleep(0.02)
    pids = [int(p) for p in open(ready).read().split()] if os.path.exists(ready) else []
    check(pids, f"live_target started: {process.poll()}")
    return process, pids


def site_line(script, marker):
    with open(script) as handle:
        return next(i for i, text in enumerate(handle, 1) if marker in text)


def live_groups(directory):
    """The exit report's live groups, as (bytes, blocks, site function) sorted."""
    found = []
    for name in glob.glob(os.path.join(directory, "report-*.json")):
        report = json.load(open(name))
        frames = {f["id"]: f for f in report["frames"]}
        stacks = {s["id"]: s for s in report["stacks"]}
        for g in report["live"]:
            stack = stacks[g["stack"]]
            caller = [frames[i]["function"] for i in stack["frames"] if frames[i]["python"]][1:2]
            found.append((g["bytes"], g["blocks"], tuple(caller)))
    return sorted(found)


def case_live_view():
    """cumemtrace live in tmux: the view, q, nothing left behind, the
    process's results unchanged, fork, another user refused."""
    import time
    tmux = shutil.which("tmux")
    if not check(tmux, "tmux is installed (scripts/setup.sh installs it)"):
        return
    tool_path = os.path.join(ARGS.build, "cumemtrace")
    script = os.path.join(ARGS.source, "tests", "integration", "live_target.py")
    remember_line = site_line(script, "REMEMBER-LINE")
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
    process, pids = start_target(directory)
    if not pids:
        return
    pid = pids[0]
    check(live_sockets().count(f"@cumemtrace-live-{pid}") == 1, f"one socket, by pid: {live_sockets()}")
    check(not glob.glob(os.path.join(directory, "*cumemtrace*")), "and no file for it")

    once = tool("live", str(pid), "--once")
    check(once.returncode == 0 and f"pid {pid}" in once.stdout and "device 0" in once.stdout and
          "in load_weights" not in once.stdout and "< load_weights:" in once.stdout and
          f"< remember:{remember_line}" in once.stdout and "\033[" not in once.stdout,
          f"live --once: {once.returncode} {once.stdout} {once.stderr}")

    # Another user: the process closes the connection without a word.
    if os.geteuid() == 0:
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(reader)
            answer = b"?"
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                peer.settimeout(5)
                peer.connect(f"\0cumemtrace-live-{pid}")
                answer = peer.recv(1 << 16)
            except Exception as error:
                answer = repr(error).encode()
            os.write(writer, b"[" + answer[:200] + b"]")
            os._exit(0)
        os.close(writer)
        os.waitpid(child, 0)
        said = os.read(reader, 512)
        os.close(reader)
        check(said == b"[]", f"another user is answered nothing: {said!r}")

    # The terminal view, in tmux: refreshed, then q.
    server = f"cumemtrace-test-{os.getpid()}"
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TMUX")}
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        environment["LD_PRELOAD"] = os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]
    tmux_command = [tmux, "-L", server, "-f", "/dev/null"]
    started = subprocess.run(tmux_command + ["new-session", "-d", "-x", "140", "-y", "40", "-s", "live",
                                             f"exec {tool_path} live {pid}"],
                             env=environment, capture_output=True, text=True)
    check(started.returncode == 0, f"tmux started: {started.stderr}")
    time.sleep(2.6)
    capture = subprocess.run(tmux_command + ["capture-pane", "-p", "-t", "live"],
                             capture_output=True, text=True).stdout
    with open(os.path.join(ARGS.build, "live-view.txt"), "w") as handle:
        handle.write(capture)
    check(f"cumemtrace live: pid {pid}" in capture and "q quits" in capture and
          "Top sites by live bytes" in capture and f"< remember:{remember_line}" in capture,
          f"the view in tmux:\n{capture}")
    growing = capture.split("Growing", 1)[-1]
    check(f"< remember:{remember_line}" in growing and "load_weights" not in growing,
          f"remember() is growing, the weights are not:\n{capture}")
    changes = [l.split()[4] for l in capture.splitlines()
               if f"< remember:{remember_line}" in l and "[device" in l]
    check(changes and changes[0].startswith("+") and changes[0] != "+0",
          f"what it gained in the last seconds: {changes}")
    subprocess.run(tmux_command + ["send-keys", "-t", "live", "q"], capture_output=True)
    ended = False
    for _ in range(50):
        if subprocess.run(tmux_command + ["has-session", "-t", "live"], capture_output=True).returncode:
            ended = True
            break
        time.sleep(0.1)
    check(ended, "q quits")
    if not ended:
        subprocess.run(tmux_command + ["kill-server"], capture_output=True)

    out, err = process.communicate(timeout=60)
    check(f"@cumemtrace-live-{pid}" not in live_sockets(), f"nothing left once it has exited: {live_sockets()}")
    watched_groups = live_groups(directory)
    # The same program unwatched, with no listener at all: the same output and report.
    quiet = tempfile.mkdtemp(prefix="cumemtrace-live-")
    process, pids = start_target(quiet, watched=False)
    check(pids and f"@cumemtrace-live-{pids[0]}" not in live_sockets(), "CUMEMTRACE_LIVE=0: no socket")
    unwatched_out, _ = process.communicate(timeout=60)
    check(out == unwatched_out and "kept 60 blocks" in out, f"its output unchanged: {out!r} {unwatched_out!r}")
    check(watched_groups == live_groups(quiet) and watched_groups,
          f"its report unchanged: {watched_groups} vs {live_groups(quiet)}")
    gone = tool("live", str(pid), "--once")
    check(gone.returncode == 2 and "no cumemtrace listens" in gone.stderr and gone.stderr.count("\n") == 1,
          f"a process gone: one line: {gone.stderr!r}")

    # fork: the child answers for itself, the parent for itself.
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
    process, pids = start_target(directory, "fork")
    if len(pids) == 2:
        parent, child = (tool("live", str(p), "--once").stdout for p in pids)
        check("< child_work:" in child and "remember" not in child and "load_weights" not in child,
              f"the child's view: its own memory: {child}")
        check("< child_work:" not in parent and "load_weights" in parent, f"the parent's: {parent}")
        check(all(live_sockets().count(f"@cumemtrace-live-{p}") == 1 for p in pids),
              f"a socket each: {live_sockets()}")
    process.communicate(timeout=60)
    check(not any(f"@cumemtrace-live-{p}" in live_sockets() for p in pids),
          f"none left after both: {live_sockets()}")


def case_pytest_plugin():
    """python/cumemtrace_pytest in a suite run under the tracer: the leaking
    test fails naming its line, the growing one fails with --cuda-leaks-repeat,
    a cache filled once and a clean test pass; without the tracer, one line."""
    suite = os.path.join(ARGS.source, "tests", "integration", "pytest_leaks")
    script = os.path.join(suite, "test_gpu.py")
    tool_path = os.path.join(ARGS.build, "cumemtrace")

    def pytest(*options, traced=True):
        command = [tool_path, "run", "--quiet", "--format=none", "--"] if traced else []
        command += [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "cumemtrace_pytest",
                    "-q", *options, suite]
        out, err, _, _ = run(command[0], command[1:], preload=False, expect_rc=None,
                             env={} if traced else {"PYTHONPATH": os.path.join(ARGS.source, "python")})
        return out + err

    allocate_line = site_line(script, "assert cuda.cudaMalloc")
    text = pytest("--cuda-leaks")
    with open(os.path.join(ARGS.build, "pytest-leaks.txt"), "w") as handle:
        handle.write(text)
    check(f"test_leaks left 4.00 MiB of GPU memory held:\n  4.00 MiB from {script}:{allocate_line} in "
          f"allocate < test_leaks:{site_line(script, 'LEAK-LINE')} (device via cudaMalloc)" in text,
          f"the leaking test fails, naming its line:\n{text}")
    failures = text.split("FAILURES")[-1].split("cumemtrace: GPU memory at the end")[0]
    check("3 failed, 2 passed" in text and "FAILED" in text and "test_clean" not in failures and
          "test_fills_a_cache_once" not in failures,
          f"the clean test and the one within its allowance pass:\n{text}")
    check("assert (1 + 1) == 3" in text and "test_fails_on_its_own left" not in text,
          "a test failing on its own is reported as such")
    # At the session's end: what module globals keep (the leaking test's
    # list, the cache), by line, and the tracer's growth verdict.
    summary = text.split("cumemtrace: GPU memory at the end of the session", 1)[-1]
    check("held at the end of the session: 14.0 MiB:\n" in summary and
          f"  4.00 MiB from {script}:{allocate_line} in allocate < test_leaks:"
          f"{site_line(script, 'LEAK-LINE')} (device via cudaMalloc)" in summary and
          f"  8.00 MiB from {script}:{allocate_line} in allocate < workspace:"
          f"{site_line(script, 'CACHE-LINE')}" in summary and "\ngrowing: none" in summary,
          f"the session's summary: what globals keep at its end, by line:\n{text}")
    text = pytest("--cuda-leaks-repeat=3")
    check(f"test_grows holds more GPU memory at each of 3 more runs: 1.00 MiB a run, 3.00 MiB in all:\n"
          f"  3.00 MiB from {script}:{allocate_line} in allocate < test_grows:{site_line(script, 'GROW-LINE')}"
          in text and "test_fills_a_cache_once holds" not in text and "3 failed, 2 passed" in text,
          f"--cuda-leaks-repeat: what grows at every run fails, a cache filled once does not:\n{text}")
    text = pytest()
    check("1 failed, 4 passed" in text, f"no option: the plugin only watches:\n{text}")
    text = pytest("--cuda-leaks", traced=False)
    check("--cuda-leaks needs the tracer: run pytest under `cumemtrace run" in text and
          "no tests ran" not in text, f"without the tracer: one line:\n{text}")
    # What counts comes from the report: a framework's cache segments do not
    # where its blocks are recorded; they do where they are all there is.
    probe = (
        "import cumemtrace_pytest as p\n"
        "live = [{'stack': 1, 'kind': 'device', 'api': 'cudaMalloc', 'bytes': 100},\n"
        "        {'stack': 2, 'kind': 'torch_tensor', 'api': 'torch', 'bytes': 30},\n"
        "        {'stack': 3, 'kind': 'vmm_mapping', 'api': 'cuMemMap', 'bytes': 7}]\n"
        "stacks = [{'id': 1, 'cache_segment': 'torch_tensor'}, {'id': 2, 'cache_segment': None}]\n"
        "for view in ('blocks', 'segments'):\n"
        "    report = {'live': live, 'stacks': stacks, 'caches': [{'kind': 'torch_tensor', 'view': view}]}\n"
        "    print(view, sum(p.held(report).values()))\n"
        "print('old', sum(p.held({'live': live, 'stacks': [{'id': 1}]}).values()))\n"
        "ended = {'live': live, 'stacks': stacks, 'program_end': {'time_ms': 5},\n"
        "         'held_at_end': [{'stack': 2, 'kind': 'torch_tensor', 'api': 'torch', 'bytes': 500}]}\n"
        "print('end', sum(p.held(ended).values()))\n")
    counted = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(ARGS.source, "python")))
    check(counted.stdout.split("\n")[:4] == ["blocks 30", "segments 130", "old 130", "end 500"],
          f"cache segments count only where blocks are unknown; a report of a program that "
          f"ended counts what it held at its end: {counted.stdout!r} {counted.stderr[-300:]!r}")


def check_python_sites(report, script, line, err):
    """The site rule (src/report/frames.h) on a Python program calling the
    simulator's libcudart through ctypes: the site is the Python line of the
    cudaMalloc call, not libffi's frame; libffi, _ctypes and threading.py are
    hidden; the cudaMalloc frame and the user's lines are not."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    for group in report.get("live", []):
        stack = stacks[group["stack"]]
        site = frames[stack["frames"][stack["site"]]]
        if group["bytes"] in (3 << 20, 5 << 20, 7 << 20, 22 << 20, 13 << 20):
            check(site["python"] and site["file"] == script and site["line"] == line,
                  f"{group['bytes'] >> 20} MiB: the site is the ALLOCATE-LINE: {site}")
        hidden = [frames[stack["frames"][i]] for i in stack["hidden"]]
        shown = [frames[f] for i, f in enumerate(stack["frames"]) if i not in stack["hidden"]]
        check(shown[0]["function"] == "cudaMalloc" and shown[0]["origin"] == "cuda",
              f"the call into CUDA is shown: {shown[:1]}")
        check(all(f["origin"] == "user" or f is shown[0] for f in shown),
              f"only the user's frames besides it: {[(f['function'], f['origin']) for f in shown]}")
        # (a marker, line 0, is a placeholder: always hidden)
        check(all(f["origin"] in ("interpreter", "startup", "system") or
                  (f["python"] and f["line"] == 0) for f in hidden),
              f"hidden: the interpreter's, start-up: {[(f['function'], f['module'], f['origin']) for f in hidden]}")
        if group["bytes"] == 7 << 20:
            check(any(f["python"] and f["file"].endswith("threading.py") for f in hidden),
                  "threading.py's frames are Python's own, hidden")
    check(f"at {script}:{line} in allocate" in err, "the summary names the site first")
    check("frames hidden: interpreter" in err and "libffi" not in err,
          f"and hides libffi's and _ctypes' frames: {err[-1500:]}")


def check_python_frames(python):
    """python_frames.py's allocations under `python`, each with its Python frames."""
    script = os.path.join(ARGS.source, "tests", "integration", "python_frames.py")
    with open(script) as handle:
        line = next(i for i, text in enumerate(handle, 1) if "ALLOCATE-LINE" in text)
    with open(script) as handle:
        marked = {text.split("# ")[-1].strip(): i for i, text in enumerate(handle, 1)
                  if "-LINE" in text or "-OF-TWO" in text}
    native_line = marked["NATIVE-THREAD-LINE"]
    out, err, reports, texts = run(python, [script, os.path.join(ARGS.build, "tests", "x")],
                                   env={"CUMEMTRACE_FORMAT": "json,text"})
    text = "".join(texts.values())
    check("python frames: done" in out, f"{python} ran: {out!r} {err[-500:]!r}")
    check("not laid out as expected" not in err and "not as expected" not in err,
          f"{python}: layout accepted: {err[-300:]!r}")
    report = only(reports)
    expected = {3 << 20: ["allocate", "leak_in_python", "<module>"],       # GIL held
                5 << 20: ["allocate", "released", "<module>"],             # GIL released
                7 << 20: ["allocate", "in_thread", "run"],                 # another thread
                22 << 20: ["allocate", "produce", "<module>"],             # a generator
                13 << 20: ["allocate", "größe", "<module>"]}               # not ASCII
    for size, names in expected.items():
        python_frames = python_stack(report, size)
        seen = [f["function"].split(".")[-1] for f in python_frames]
        check(seen[:len(names)] == names, f"{python}: {size >> 20} MiB held by {names}: {seen}")
        check(python_frames and python_frames[0]["file"] == script and
              python_frames[0]["line"] == line,
              f"{python}: file and line of the cudaMalloc call: {python_frames[:1]}")
    # The same function at two lines: three blocks from each.
    for size, marker in ((3 * 29 << 20, "FIRST-OF-TWO"), (3 * 31 << 20, "SECOND-OF-TWO")):
        seen = [(f["function"].split(".")[-1], f["line"]) for f in python_stack(report, size)]
        check(seen[:2] == [("allocate", line), ("two_lines", marked[marker])],
              f"{python}: {size >> 20} MiB named by their own line of two_lines: {seen}")
    # A thread that runs no Python: the main thread's frames, after a marker.
    # (19 MiB: a thread holding a thread state it runs no Python in, as
    # PyTorch's autograd engine threads do.)
    for size, at in ((17 << 20, native_line), (19 << 20, native_line + 1)):
        python_frames = python_stack(report, size)
        seen = [(f["function"].split(".")[-1], f["line"]) for f in python_frames]
        check(seen[:2] == [("[main thread, at that moment]", 0),
                           ("waits_for_native_thread", at)] and
              len(seen) > 2 and seen[2][0] == "<module>",
              f"{python}: {size >> 20} MiB from a thread running no Python names the line "
              f"the main thread waits at: {seen}")
    check(f"in allocate < two_lines:{marked['FIRST-OF-TWO']} < <module>:" in err,
          f"the summary shows Python lines, the site's callers too: {err[-2500:]}")
    check("leak_in_python at " in text, "the text report shows every entry's frames")
    # The marker a thread that runs no Python borrows the main thread's
    # frames after is a placeholder: said in words, never a frame.
    check("[main thread, at that moment]" not in text + err and "runs no Python:" not in text and
          "this thread runs no Python; the main thread's frames" in text,
          f"no placeholder shown as a frame: {text[-2500:]}")
    check_python_sites(report, script, line, text)


def case_python_frames():
    script = os.path.join(ARGS.source, "tests", "integration", "python_frames.py")
    check_python_frames(sys.executable)
    # Every frame on request, unresolved ones named module+offset, never by address.
    out, err, reports, texts = run(sys.executable, [script],
                                   env={"CUMEMTRACE_ALL_FRAMES": "1", "CUMEMTRACE_FORMAT": "text"})
    text = "".join(texts.values())
    check("libffi.so" in text and "frames hidden" not in text and
          not any(re.search(r"#\d+ +0x[0-9a-f]+ ", l) for l in text.splitlines()),
          f"CUMEMTRACE_ALL_FRAMES=1 shows libffi's frames by module+offset: {text[:2000]}")
    out, err, reports, _ = run(sys.executable, [script], env={"CUMEMTRACE_PYTHON": "0"})
    report = only(reports)
    check(not any(f["python"] for f in report.get("frames", [])), "CUMEMTRACE_PYTHON=0: none")


def case_python_fork():
    check_python_fork(sys.executable)


def check_python_fork(python):
    """python_fork.py under `python`: each forked child reports its own block and line."""
    script = os.path.join(ARGS.source, "tests", "integration", "python_fork.py")
    with open(script) as handle:
        line = next(i for i, text in enumerate(handle, 1) if "CHILD-LINE" in text)
    children = 20
    out, err, reports, _ = run(python, [script, str(children)])
    check(f"{children} of {children} children exited cleanly" in out,
          f"no child hung or failed: {out!r} {err[-500:]!r}")
    pids = {r["process"]["pid"] for r in reports}
    kids = [r for r in reports if r["process"]["ppid"] in pids]
    check(len(kids) == children, f"a report from each child: {len(kids)} of {children}")
    for report in kids:
        check(report["blocks"]["total"] == 1,
              f"child {report['process']['pid']}: only its own block: {report['blocks']['total']}")
        frames = python_stack(report, 3 << 20)
        check(frames and frames[0]["function"].split(".")[-1] == "in_child" and
              frames[0]["line"] == line,
              f"child {report['process']['pid']}: its own Python line: {frames[:1]}")


def case_cxx_names():
    """C++ names from a program with no C++ runtime (tests/cxx_names): the
    tracer loads none into it, neither at start-up nor for a report, so its
    reports keep the names as linked; everything the command prints or
    exports from them shows them demangled, and a crash dump is symbolized
    with them demangled."""
    program = os.path.join(ARGS.build, "tests", "cxx_names")
    if not os.path.exists(program):
        print("cxx_names: skipped (no C++ compiler at configure time)")
        sys.exit(77)
    mangled, plain = "_ZN3app6memory4Pool4grabEm", "app::memory::Pool::grab(unsigned long)"
    shown = "app::memory::Pool::grab("       # the text's stacks shorten the arguments
    # Untraced, the program maps no libstdc++ (but in a sanitizer build, whose
    # runtime needs it): traced, neither after the allocation nor after a report.
    untraced, _, _, _ = run(program, ["exit"], preload=False)
    out, err, reports, _ = run(program, ["exit", "{dir}/snapshot"])
    mapped = [l for l in out.splitlines() if l.startswith("libstdc++ ")]
    check(len(mapped) == 2 and mapped == [l for l in untraced.splitlines()
                                          if l.startswith("libstdc++ ")] and
          (os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") or
           all(l.endswith(": not mapped") for l in mapped)),
          f"the tracer loads no C++ runtime, at start-up or for a report: {out!r} "
          f"untraced: {untraced!r}")
    exit_report = by_reason(reports, "exit")
    names = [(f["function"], f.get("mangled")) for f in exit_report.get("frames", [])]
    check((mangled, None) in names or (plain, mangled) in names,
          f"the report has the name as linked, or demangled with it kept: {names}")
    report = os.path.join(LAST_DIR, f"report-{exit_report['process']['pid']}.json")
    snapshot = os.path.join(LAST_DIR, "snapshot.json")
    for args in (["report", report], ["diff", snapshot, report], ["merge", snapshot, report]):
        completed = tool(*args)
        check(completed.returncode == 0 and shown in completed.stdout and
              mangled not in completed.stdout,
              f"cumemtrace {args[0]}: demangled: {completed.returncode} {completed.stderr!r} "
              f"{completed.stdout[:1500]}")
    completed = tool("report", report, "--format", "json")
    frames = json.loads(completed.stdout)["frames"] if completed.returncode == 0 else []
    check({"function": plain, "mangled": mangled}.items() <=
          next((f for f in frames if f.get("mangled")), {}).items(),
          f"the JSON: the demangled name, and the name as linked: {frames}")
    # The pages embed the report's JSON, which has the name as linked too.
    for number, (args, only_plain) in enumerate(
            ((["html", report], False), (["merge", snapshot, report, "--format", "html"], False),
             (["export", "--format", "folded", report], True),
             (["export", "--format", "memviz", report], True))):
        out_path = os.path.join(LAST_DIR, f"exported-{number}")
        completed = tool(*args, "-o", out_path)
        written = glob.glob(out_path + "*")
        text = open(written[0], encoding="latin-1").read() if len(written) == 1 else ""
        check(completed.returncode == 0 and shown in text and not (only_plain and mangled in text),
              f"cumemtrace {' '.join(args[:3])}: demangled: {completed.stderr!r} {written}")
    # A crash dump, symbolized by the command against the program's files.
    run(program, ["crash"], expect_rc=-11)
    dump = one_dump()
    if dump:
        rc, output, symbolized = symbolize(dump, "json,text")
        text_path = dump[:-len(".dump")] + "-symbolized.txt"
        text = open(text_path).read() if os.path.exists(text_path) else ""
        frames = symbolized["frames"] if symbolized else []
        check(rc == 0 and any(f["function"] == plain and f.get("mangled") == mangled
                              for f in frames) and shown in text and mangled not in text,
              f"cumemtrace symbolize: demangled: {rc} {output[-300:]} {text[-800:]}")


def interpreters(version):
    """Every CPython `version` ("3.12") here: python3.12 on PATH and pyenv's
    builds of it (not its shims), each once."""
    found = [os.path.join(d, f"python{version}") for d in os.environ.get("PATH", "").split(":") if d]
    found = [p for p in found if os.access(p, os.X_OK)]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python3")))
    seen, pythons = set(), []
    for python in found:
        if "/shims/" not in python and os.path.realpath(python) not in seen:
            seen.add(os.path.realpath(python))
            pythons.append(python)
    return pythons


def check_python_version(version):
    """The Python-frame cases under each CPython `version` found here; where
    none is, the case is skipped (a clean Debian has only its python3.11).
    Each also says where its frame layout came from: from 3.13 on, the
    offsets the interpreter publishes; before, the table."""
    pythons = interpreters(version)
    if not pythons:
        print(f"python {version}: skipped (no python{version} on PATH or in pyenv)")
        sys.exit(77)
    program = ("import ctypes\n"
               "p = ctypes.c_void_p()\n"
               "assert ctypes.CDLL('libcudart.so.13').cudaMalloc(ctypes.byref(p), 1 << 20) == 0\n")
    source = ("Python frames at the offsets it publishes" if tuple(map(int, version.split("."))) >= (3, 13) else
              "Python frames at the offsets known for it")
    for python in pythons:
        print(f"python {version}: {python}")
        out, err, reports, _ = run(python, ["-c", program], env={"CUMEMTRACE_DEBUG": "1"})
        check(f"CPython {version}: {source}" in err, f"{python}: {source}: {err[-1500:]!r}")
        check_python_frames(python)
        check_python_fork(python)


for _minor in range(10, 15):
    globals()[f"case_python_3_{_minor}"] = \
        lambda version=f"3.{_minor}": check_python_version(version)


def case_torch_counters():
    script = os.path.join(ARGS.source, "tests", "integration", "torch_counters.py")
    out, err, reports, texts = run(sys.executable, [script],
                                   env={"CUMEMTRACE_SAMPLE_MS": "50", "CUMEMTRACE_FORMAT": "text,json"})
    check(out.strip() == "torch counters: done the program's own exception True",
          f"the program's own output and exceptions are untouched: {out!r} {err[-500:]!r}")
    by_reason = {r["reason"]: r for r in reports}
    check(set(by_reason) == {"exit", "signal"}, f"an exit report and a snapshot: {sorted(by_reason)}")
    mib = 1 << 20
    final = by_reason.get("exit", {}).get("torch") or {}
    check(final.get("read") == "python_exit" and final.get("now"),
          f"the exit report has the atexit reading: {final}")
    devices = final.get("devices", [])
    check(len(devices) == 2, f"both devices: {devices}")
    if len(devices) == 2:
        d0, d1 = devices
        check(d0["allocated_bytes"] == 256 * mib and d0["reserved_bytes"] == 1024 * mib and
              d0["allocated_peak"] == 512 * mib and d0["inactive_split_bytes"] == 256 * mib and
              d0["num_alloc_retries"] == 3 and d0["num_ooms"] == 1 and
              d0["inactive_split_blocks"] == 20,
              f"device 0 as memory_stats() said at exit: {d0}")
        check(all(v is None for k, v in d1.items() if k != "device"),
              f"device 1's memory_stats() raised: its figures are null: {d1}")
    snapshot = by_reason.get("signal", {}).get("torch") or {}
    check(snapshot.get("read") == "report" and snapshot.get("now") and
          snapshot["devices"][0]["allocated_bytes"] == 64 * mib,
          f"the snapshot asked for a reading of its own: {snapshot}")
    classes = by_reason.get("signal", {}).get("classes") or {}
    check(not classes.get("known") and "torch.nn or torch.optim is not loaded" in classes["why"],
          f"a torch without nn: the split is not known, and why: {classes}")
    fragmentation = by_reason.get("exit", {}).get("fragmentation", {})
    check(fragmentation.get("verdict") == "fragmented" and
          fragmentation.get("torch_inactive_split_bytes") == 256 * mib and
          fragmentation.get("torch_cached_bytes") == 768 * mib,
          f"inactive split bytes a quarter of the reserve in 20 small holes: fragmented: {fragmentation}")
    text = next((t for name, t in texts.items() if "signal" not in name), "")
    check("PyTorch (torch.cuda.memory_stats, at Python's exit): allocated_bytes 256 MiB" in text,
          f"the text report shows PyTorch's counters: {text[:1500]}")
    # Without torch in sys.modules nothing is read, and the report says null.
    out, err, reports, _ = run(sys.executable, ["-c", "import ctypes; p = ctypes.c_void_p(); "
                                                "ctypes.CDLL('libcudart.so.13').cudaMalloc(ctypes.byref(p), 4096)"],
                               env={"CUMEMTRACE_SAMPLE_MS": "20"})
    check(only(reports)["torch"] is None, "no PyTorch: torch is null")


def case_nccl_label():
    """Buffers allocated through libnccl are labelled; a peer's memory mapped
    here counts on the device that owns it."""
    out, err, reports, _ = run("tests/nccl_label", env={
        "CUMEMTRACE_FORMAT": "text,json", "CUMEMTRACE_OUTPUT": "{dir}/rank%r",
        "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    check(out == "nccl label: done\n", f"ran: {out!r} {err[-400:]!r}")
    check(os.path.exists(os.path.join(LAST_DIR, "rank1.json")), "%r in the file name is the rank")
    report = only(reports)
    process = report["process"]
    check((process["rank"], process["world_size"], process["local_rank"]) == (1, 2, 1) and
          process["host"] == socket.gethostname(), f"rank, world size, host: {process}")
    check(f"host: {socket.gethostname()}; rank 1 of 2 (local rank 1); device 0,1" in err,
          "the summary names host, rank, world size and devices")
    stacks = {s["id"]: s for s in report["stacks"]}
    labelled = collections.defaultdict(int)
    for group in report["live"]:
        labelled[(stacks[group["stack"]]["label"], group["kind"], group["device"])] += group["bytes"]
    mib = 1 << 20
    check(labelled == {("nccl", "vmm_physical", 0): 4 * mib, ("nccl", "vmm_mapping", 0): 4 * mib,
                       ("nccl", "vmm_reservation", None): 6 * mib,
                       ("nccl", "vmm_physical", 1): 2 * mib, ("nccl", "vmm_mapping", 1): 2 * mib,
                       (None, "device", 0): 1 * mib, (None, "device", 1): 3 * mib,
                       # a handle imported from another process: the driver says device 1
                       (None, "vmm_reservation", None): 2 * mib, (None, "vmm_mapping", 1): 2 * mib},
          f"labels, kinds and owning devices: {dict(labelled)}")
    devices = {d["device"]: d["counters"]["device_memory"]["allocated_bytes"]["current"]
               for d in report["devices"]}
    check(devices.get(0) == 5 * mib and devices.get(1) == 5 * mib,
          f"device memory per device (the peer mapping on its owner, counted once): {devices}")
    check("[nccl: communication buffers]" in err, "the summary labels them")


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


def case_growth_marks():
    out, err, reports, _ = run("tests/growth", ["leak-marks"], env={"CUMEMTRACE_FORMAT": "json,text"})
    report = only(reports)
    growth = report["growth"]
    check(growth["mode"] == "marks" and growth["samples"] == 60, f"a sample per mark: {growth}")
    found = growing_functions(report)
    check([f for f, _ in found] == ["grow_by_mark"], f"only grow_by_mark grows: {found}")
    if found:
        entry = found[0][1]
        check(entry["rate"] == 1 << 20, f"1 MiB per mark: {entry['rate']}")
        check(entry["rises"] == 58 and entry["falls"] == 0, f"rose at every later mark: {entry}")
    check("Growing (leak suspects" in err and "per mark" in err, "the summary names it")


def case_growth_time():
    out, err, reports, _ = run("tests/growth", ["leak-time"], env={"CUMEMTRACE_SAMPLE_MS": "20"})
    report = only(reports)
    growth = report["growth"]
    check(growth["mode"] == "time" and growth["interval_ms"] == 20 and growth["samples"] >= 8,
          f"samples over time: {growth['samples']}")
    found = growing_functions(report)
    check([f for f, _ in found] == ["grow_by_time"], f"only grow_by_time grows: {found}")
    if found:
        rate = found[0][1]["rate"]
        # 64 KiB every 2 ms plus the call: at most 32 MiB/s; more than 1 MiB/s
        # even under the sanitizers.
        check(1 << 20 < rate <= 32 << 20, f"a plausible rate: {rate / 2**20:.1f} MiB/s")
    out, err, reports, _ = run("tests/growth", ["leak-time"], env={"CUMEMTRACE_SAMPLE_MS": "0"})
    check(only(reports)["growth"]["samples"] == 0 and not only(reports)["growth"]["growing"],
          "CUMEMTRACE_SAMPLE_MS=0: no samples")
    out, err, reports, _ = run("tests/growth", ["leak-time"], env={"CUMEMTRACE_SAMPLE_MS": "soon"})
    check("CUMEMTRACE_SAMPLE_MS='soon'" in err, f"a bad value is named: {err[:300]!r}")


def case_growth_steady():
    out, err, reports, _ = run("tests/growth", ["steady"], env={"CUMEMTRACE_SAMPLE_MS": "10"})
    report = only(reports)
    check(report["growth"]["samples"] >= 8, f"samples taken: {report['growth']['samples']}")
    check(report["growth"]["growing"] == [],
          f"a cache filled once and temporaries are not leaks: {growing_functions(report)}")


def case_self_time():
    """CUMEMTRACE_SELF_TIME=1 counts the tracer's own time in CUDA calls and
    not the driver's: every cuMemAlloc_v2 sleeps 5 ms, 60 of them 300 ms."""
    env = {"CUMEMTRACE_FORMAT": "json,text", "SIMCUDA_ALLOC_DELAY_US": "5000"}
    out, err, reports, texts = run("tests/growth", ["leak-marks"],
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
    out, err, reports, texts = run("tests/growth", ["leak-marks"], env=env)
    report = only(reports)
    check(report["tracer"]["self_time_ns"] is None and
          all("self_time_ns" not in m for m in report["marks"]["recent"]),
          "not timed unless asked")
    check(not any("own time" in t for t in texts.values()), "and not in the text")


def case_public_api():
    out, err, reports, _ = run("tests/api", [os.path.join(tempfile.gettempdir(), "unused")],
                               preload=False)
    check("tracer absent, snapshot -2" in out, f"runs untraced: {out!r}")
    out, err, reports, _ = run("tests/api", ["{dir}/snap-%p"])
    path = glob.glob(os.path.join(LAST_DIR, "snap-*.json"))
    check("snapshot 0" in out and len(path) == 1, f"snapshot written where asked: {out!r} {path}")
    check("_Unwind_RaiseException from" in out and "libunwind" not in out,
          f"the program's exception unwinder is untouched: {out!r}")
    snap = [r for r in reports if r["reason"] == "snapshot"]
    final = by_reason(reports, "exit")
    check(snap and snap[0]["blocks"]["total"] == 2, "the snapshot holds both blocks")
    marks = final.get("marks", {}).get("recent", [])
    check(len(marks) == 1 and marks[0]["label"] == "after the first block" and
          marks[0]["device_bytes"] == 1 << 20, f"the mark, with the live bytes then: {marks}")


def case_valgrind():
    """Every entry point and the exit report under valgrind's memcheck."""
    valgrind = shutil.which("valgrind")
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") or not valgrind:
        print("valgrind: skipped (sanitizer build, or valgrind missing)")
        sys.exit(77)
    supp = os.path.join(ARGS.source, "tests", "valgrind.supp")
    out, err, reports, _ = run(valgrind, ["-q", "--error-exitcode=9", f"--suppressions={supp}",
                                          os.path.join(ARGS.build, "tests", "all_entry_points"),
                                          "keep"],
                               env={"SIMCUDA_MEMORY": "64M"})  # memcheck is slow to map 8 GiB
    check("failures 0" in out and len(reports) == 1, f"ran cleanly under memcheck: {err[-2000:]}")


def tool(*args, output=None):
    """Run the cumemtrace command; return the CompletedProcess (text)."""
    environment = dict(os.environ)
    environment.pop("LD_PRELOAD", None)
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        environment["LD_PRELOAD"] = os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]
    return subprocess.run([os.path.join(ARGS.build, "cumemtrace"), *args], capture_output=True,
                          text=True, timeout=120, env=environment)


def text_and_json_pairs(directory):
    """Every report written as both .txt and .json in `directory`."""
    pairs = []
    for name in sorted(glob.glob(os.path.join(directory, "*.json"))):
        text = name[:-len(".json")] + ".txt"
        if os.path.exists(text):
            pairs.append((text, name))
    return pairs


# Keys of a JSON report that `cumemtrace report --format json` cannot give
# back as written: they describe the process that writes the report (its
# settings, its symbolizer), not what the report is about. On reading back
# they are the reading command's own: tracer.depth, tracer.min_size,
# tracer.symbolizer and growth.interval_ms; and blocks.total becomes the
# number of blocks listed, the only ones the file holds.
REWRITTEN = {("tracer", "depth"), ("tracer", "min_size"), ("tracer", "symbolizer"),
             ("growth", "interval_ms"), ("blocks", "total"), ("tracer", "live_blocks")}


def without_rewritten(report):
    report = json.loads(json.dumps(report))
    for section, key in REWRITTEN:
        if isinstance(report.get(section), dict):
            report[section].pop(key, None)
    return report


def case_report_roundtrip():
    """`cumemtrace report FILE.json` prints the very text the library wrote.

    The text report is made only of what the JSON report holds, so no line may
    differ: the comparison is byte for byte, for reports covering every
    section (leaks with file:line, counters of every kind, pools and VMM
    holes, OOM events with retries, failures, growth by marks and by time,
    implicit frees, signal snapshots, marks). The JSON read back and written
    again is the same but for REWRITTEN."""
    runs = [("examples/leak_loop", ["20"], {}, 0),
            ("examples/leak_loop", ["3"], {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, 0),
            ("tests/all_entry_points", ["keep"], {}, 0),
            ("tests/oom", ["retry"], {"SIMCUDA_MEMORY": "64M"}, 0),
            ("tests/oom", ["fragmented"], {"SIMCUDA_MEMORY": "64M"}, 0),
            ("tests/implicit_free", [], {}, 0), ("tests/growth", ["leak-marks"], {}, 0),
            ("tests/growth", ["leak-time"], {"CUMEMTRACE_SAMPLE_MS": "20"}, 0),
            ("examples/async_leak", [], {}, 0), ("tests/api", ["{dir}/snap-%p"], {}, 0),
            ("tests/crash", ["usr2-chained"], {}, 0), ("tests/nccl_label", [], {}, 0),
            (sys.executable, [os.path.join(ARGS.source, "tests", "integration", "torch_counters.py")],
             {"CUMEMTRACE_SAMPLE_MS": "50"}, 0),
            (sys.executable, [os.path.join(ARGS.source, "tests", "integration", "python_frames.py")],
             {}, 0)]
    compared = 0
    for program, args, env, rc in runs:
        env = dict(env, CUMEMTRACE_FORMAT="text,json")
        run(program, args, env=env, expect_rc=rc)
        pairs = text_and_json_pairs(LAST_DIR)
        check(pairs, f"{program}: text and JSON reports written")
        for text_path, json_path in pairs[:3]:
            with open(text_path) as handle:
                written = handle.read()
            completed = tool("report", json_path)
            check(completed.returncode == 0 and completed.stderr == "",
                  f"report {json_path}: {completed.returncode} {completed.stderr!r}")
            if not check(completed.stdout == written,
                         f"{program}: the text read back from {os.path.basename(json_path)} "
                         f"differs from the library's:\n" +
                         "".join(l for l in __import__("difflib").unified_diff(
                             written.splitlines(True), completed.stdout.splitlines(True),
                             "library", "cumemtrace report", n=1))[:3000]):
                continue
            compared += 1
            completed = tool("report", json_path, "--format", "json")
            check(completed.returncode == 0, f"report --format json: {completed.stderr!r}")
            again = json.loads(completed.stdout) if completed.returncode == 0 else {}
            validate(again, json_path + " (read back)")
            with open(json_path) as handle:
                original = json.load(handle)
            check(without_rewritten(again) == without_rewritten(original),
                  f"{json_path}: JSON read back and written again differs beyond {REWRITTEN}")
    print(f"report_roundtrip: {compared} reports compared")
    check(compared >= 12, f"enough reports compared: {compared}")
    # Written again to a file with -o: the same text.
    text_path, json_path = text_and_json_pairs(LAST_DIR)[0]
    out = os.path.join(LAST_DIR, "again.txt")
    completed = tool("report", json_path, "-o", out)
    with open(text_path) as a, open(out) as b:
        check(completed.returncode == 0 and completed.stdout == "" and a.read() == b.read(),
              f"report -o writes the same text: {completed.stderr!r}")


def case_report_dump():
    """`cumemtrace report` on a crash dump: what `symbolize` prints."""
    run("tests/crash", ["segv-threads"], expect_rc=-11)
    dump = one_dump()
    if not dump:
        return
    report = tool("report", dump)
    symbolized = tool("symbolize", dump)
    check(report.returncode == 0 and report.stdout == symbolized.stdout,
          f"report and symbolize agree on a dump: {report.returncode} {report.stderr!r}")
    check("crash.c:" in report.stdout and "signal 11" in report.stdout,
          f"symbolized, with the signal: {report.stdout[:500]!r}")


def diff_stacks(report):
    """(status, change, innermost function of ours) per stack of a JSON diff."""
    found = []
    for stack in report["stacks"]:
        names = [f["function"] or "" for f in stack["frames"]]
        ours = [n for n in names if n.endswith(("_cache", "_buffer"))]
        found.append((stack["status"], stack["change"], ours[0] if ours else names))
    return found


def case_diff_snapshots():
    run("tests/snapshots", ["{dir}"], env={"CUMEMTRACE_QUIET": "1"})
    first, second = (os.path.join(LAST_DIR, n) for n in ("first.json", "second.json"))
    MiB = 1 << 20
    completed = tool("diff", first, second, "--format", "json")
    check(completed.returncode == 0, f"diff: {completed.returncode} {completed.stderr!r}")
    if completed.returncode != 0:
        return
    report = json.loads(completed.stdout)
    check(diff_stacks(report) == [("grew", 7 * MiB, "grow_cache"), ("new", 4 * MiB, "late_buffer"),
                                  ("vanished", -2 * MiB, "scratch_buffer")],
          f"grow_cache first with +7 MiB, then late_buffer new, scratch_buffer gone: "
          f"{diff_stacks(report)}")
    check(report["stacks_unchanged"] == 1, "steady_buffer unchanged, not listed")
    check(report["devices"] == [{"device": 0, "a_bytes": 13 * MiB, "b_bytes": 22 * MiB,
                                 "change": 9 * MiB}] and report["total"]["change"] == 9 * MiB,
          f"device totals: {report['devices']} {report['total']}")
    text = tool("diff", first, second).stdout
    lines = text.splitlines()
    first_stack = next((i for i, l in enumerate(lines) if l.startswith("   #1 ")), None)
    check(first_stack is not None and lines[first_stack] == "   #1 +7.00 MiB grew: 3.00 MiB -> 10.0 MiB"
          and lines[first_stack + 1].startswith("      grow_cache at ")
          and "snapshots.c:" in lines[first_stack + 1],
          f"the text names grow_cache first, with file:line: {lines[first_stack:first_stack + 2]}")
    check("1 grew, 1 new, 0 shrank, 1 vanished, 1 unchanged" in text, f"counts: {text[:600]}")
    check("    device 0             13.0 MiB   22.0 MiB   +9.00 MiB" in lines, "device line")
    # Two runs: the same stacks match although their addresses differ
    # (ASLR): nothing changed between the two runs' first snapshots.
    other_dir = LAST_DIR
    run("tests/snapshots", ["{dir}"], env={"CUMEMTRACE_QUIET": "1"})
    completed = tool("diff", os.path.join(other_dir, "first.json"),
                     os.path.join(LAST_DIR, "first.json"), "--format", "json")
    again = json.loads(completed.stdout) if completed.returncode == 0 else {}
    with open(os.path.join(other_dir, "first.json")) as handle:
        stacks = len(json.load(handle)["stacks"])
    check(again.get("stacks") == [] and again.get("stacks_unchanged") == stacks >= 3,
          f"two runs' snapshots match stack for stack: {again.get('stacks')}, "
          f"{again.get('stacks_unchanged')} of {stacks} unchanged")
    # Reversed: what grew now shrank.
    reverse = json.loads(tool("diff", second, first, "--format", "json").stdout)
    check(diff_stacks(reverse) == [("new", 2 * MiB, "scratch_buffer"),
                                   ("vanished", -4 * MiB, "late_buffer"),
                                   ("shrank", -7 * MiB, "grow_cache")],
          f"reversed: {diff_stacks(reverse)}")


def rank_reports(ranks, world_size=True):
    """One exit report per (rank, leak_loop steps), in one directory."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-ranks-")
    for rank, steps in ranks:
        env = {"CUMEMTRACE_OUTPUT": os.path.join(directory, "rank-%r"), "CUMEMTRACE_QUIET": "1",
               "CUMEMTRACE_SAMPLE_MS": "10"}
        if rank is not None:
            env["RANK"] = str(rank)
            if world_size:
                env["WORLD_SIZE"] = str(len(ranks))
        else:
            env["CUMEMTRACE_OUTPUT"] = os.path.join(directory, f"steps-{steps}")
        run("examples/leak_loop", [str(steps)], env=env)
    return directory


def case_merge_ranks():
    MiB = 1 << 20
    directory = rank_reports([(0, 5), (1, 20), (2, 5)])
    files = [os.path.join(directory, f"rank-{r}.json") for r in (2, 0, 1)]  # any order
    completed = tool("merge", *files, "--format", "json")
    check(completed.returncode == 0, f"merge: {completed.returncode} {completed.stderr!r}")
    if completed.returncode != 0:
        return
    merged = json.loads(completed.stdout)
    check([r["rank"] for r in merged["ranks"]] == [0, 1, 2] and merged["ranks_from"] == "reports",
          f"ranks from the reports, in order: {merged['ranks']}")
    check([r["live_bytes"] for r in merged["ranks"]] == [20 * MiB, 80 * MiB, 20 * MiB] and
          [r["leaked_bytes"] for r in merged["ranks"]] == [20 * MiB, 80 * MiB, 20 * MiB] and
          all(r["world_size"] == 3 and r["devices"] == [0] for r in merged["ranks"]),
          f"per-rank totals: {merged['ranks']}")
    check(merged["divergent"] == {"rank": 1, "live_bytes": 80 * MiB, "median_of_others": 20 * MiB},
          f"rank 1 diverges: {merged['divergent']}")
    top = merged["stacks"][0] if merged["stacks"] else {}
    check(top.get("bytes_by_rank") == [20 * MiB, 80 * MiB, 20 * MiB] and
          top["frames"][0]["function"] == "leak_scratch_buffer",
          f"the stack holding most, matched across ranks: {top}")
    text = tool("merge", *files).stdout
    check("Divergent rank: 1 holds 80.0 MiB live" in text and "rule: a rank diverges when" in text,
          f"the text names rank 1 and the rule: {text[:1500]}")
    check("   #1 rank 0 20.0 MiB, rank 1 80.0 MiB, rank 2 20.0 MiB (60.0 MiB between ranks, "
          "120 MiB in all)" in text, f"bytes per rank in the text: {text[:1500]}")
    check(merged["stacks"][0]["spread_bytes"] == 60 * MiB and
          all(r["at"] == "exit" for r in merged["ranks"]) and
          "read at: every rank live at its report" in text,
          f"a C program's ranks are read at exit, and the text says so: {merged['ranks']}")
    check("Growing (leak suspects), per rank:" in text and
          re.search(r"rank 1: \+[0-9.]+ [KMG]iB per second, 80.0 MiB now\n\s+leak_scratch_buffer at ",
                    text), f"rank 1's growing site: {text[-1200:]}")
    # Two ranks, the brief's case: RANK=0 and RANK=1, rank 0 the larger.
    directory = rank_reports([(0, 12), (1, 3)])
    merged = json.loads(tool("merge", os.path.join(directory, "rank-1.json"),
                             os.path.join(directory, "rank-0.json"), "--format", "json").stdout)
    check((merged["divergent"] or {}).get("rank") == 0, f"rank 0 diverges: {merged['divergent']}")
    # Balanced ranks: none diverges.
    directory = rank_reports([(0, 4), (1, 4)])
    merged = json.loads(tool("merge", *sorted(glob.glob(os.path.join(directory, "*.json"))),
                             "--format", "json").stdout)
    check(merged["divergent"] is None, f"balanced: none diverges: {merged['divergent']}")
    # Ranks using two devices each, with NCCL's buffers: labelled in the merge.
    directory = tempfile.mkdtemp(prefix="cumemtrace-ranks-")
    for rank in (0, 1):
        run("tests/nccl_label", env={"RANK": str(rank), "CUMEMTRACE_QUIET": "1",
                                     "CUMEMTRACE_OUTPUT": os.path.join(directory, "rank-%r")})
    files = sorted(glob.glob(os.path.join(directory, "rank-*.json")))
    merged = json.loads(tool("merge", *files, "--format", "json").stdout)
    check([r["devices"] for r in merged["ranks"]] == [[0, 1], [0, 1]],
          f"each rank's devices: {merged['ranks']}")
    check(merged["stacks"] and merged["stacks"][0]["label"] == "nccl" and
          merged["divergent"] is None, f"NCCL's buffers labelled: {merged['stacks'][:1]}")
    text = tool("merge", *files).stdout
    check("[nccl]" in text and "0,1" in text, f"labels and devices in the text: {text[:900]}")
    # No rank in the reports: numbered by file order, and said so.
    directory = rank_reports([(None, 2), (None, 9)])
    files = [os.path.join(directory, "steps-9.json"), os.path.join(directory, "steps-2.json")]
    completed = tool("merge", *files)
    check("numbered by the order of the files" in completed.stdout and
          "Divergent rank: 0 holds 36.0 MiB live" in completed.stdout,
          f"file order: {completed.stdout[:800]}")


def case_command_inputs():
    """Bad inputs and outputs: one line on stderr and exit status 2; bad
    arguments: status 1; --help on every command: status 0."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-inputs-")

    def written(name, text):
        path = os.path.join(directory, name)
        with open(path, "w") as handle:
            handle.write(text)
        return path

    not_json = written("notes.txt", "hello\n")
    wrong_json = written("wrong.json", '{"format": "something-else", "version": 1}\n')
    broken = written("broken.json",
                     '{"format": "cumemtrace-report",\n "version": 1,\n "reason" "exit"}\n')
    newer = written("newer.json", '{"format": "cumemtrace-report", "version": 99}')
    run("examples/leak_loop", ["2"], env={"CUMEMTRACE_QUIET": "1"})
    good = glob.glob(os.path.join(LAST_DIR, "*.json"))[0]
    missing = os.path.join(directory, "missing.json")
    unwritable = "/nonexistent-cumemtrace-dir/out.txt"
    cases = [
        (["report", not_json], 2, f"cannot read '{not_json}': line 1, column 1: unexpected character 'h'"),
        (["report", wrong_json], 2, "not a cumemtrace report: no \"format\": \"cumemtrace-report\""),
        (["report", broken], 2, "line 3, column 11: expected ':' after an object key"),
        (["report", newer], 2, "report format version 99, this cumemtrace reads 1"),
        (["report", missing], 2, f"cannot read '{missing}': No such file or directory"),
        (["report", directory], 2, "Is a directory"),
        (["report", good, "-o", unwritable], 2, f"cannot write '{unwritable}': No such file"),
        (["report", good, "--format", "yaml"], 1, "--format takes text or json"),
        (["report"], 1, "no report file given"),
        (["report", good, "--colour"], 1, "unknown option: --colour"),
        (["diff", good, missing], 2, f"cannot read '{missing}'"),
        (["diff", not_json, good], 2, "unexpected character 'h'"),
        (["diff", good], 1, "two files are needed"),
        (["diff", good, good, "-o", unwritable], 2, f"cannot write '{unwritable}'"),
        (["diff", good, good, "--top", "many"], 1, "not a count: many"),
        (["merge", good, wrong_json], 2, "not a cumemtrace report"),
        (["merge"], 1, "no report files given"),
        (["merge", good, "-o", unwritable], 2, f"cannot write '{unwritable}'"),
        (["html", good, "-o", unwritable], 2, f"cannot write '{unwritable}.html'"),
        (["export", "--format", "perfetto", good, "-o", unwritable], 2,
         f"cannot write '{unwritable}.trace.json'"),
        (["export", "--format", "svg", good, "-o", "x"], 1, "unknown format: svg"),
        (["html", good], 1, "-o PATH is needed"),
    ]
    for args, status, words in cases:
        completed = tool(*args)
        check(completed.returncode == status and words in completed.stderr and
              completed.stderr.count("\n") == 1 and completed.stdout == "",
              f"{args}: status {completed.returncode} (expected {status}), {completed.stderr!r}")
    commands = ("run", "symbolize", "report", "html", "export", "diff", "merge", "live")
    for command in commands:
        completed = tool(command, "--help")
        check(completed.returncode == 0 and
              completed.stdout.startswith(f"usage: cumemtrace {command} ") and
              "exit status" in completed.stdout,
              f"{command} --help prints its own usage: {completed.returncode} "
              f"{completed.stdout[:200]!r}")
    # getopt_long: --opt=value, options after operands, -- before a file named like an option.
    target = os.path.join(directory, "as-json.txt")
    for args in (["report", good, "--format=json", "--output=" + target],
                 ["report", "--format", "json", "-o", target, good],
                 ["report", "-fjson", "-o" + target, "--", good]):
        if os.path.exists(target):
            os.unlink(target)
        completed = tool(*args)
        check(completed.returncode == 0 and os.path.exists(target) and
              open(target).read().startswith('{"format":"cumemtrace-report"'),
              f"{args}: {completed.returncode} {completed.stderr!r}")
    for args, words in ((["diff", good, good, "--top=x"], "not a count: x"),
                        (["merge", good, "--frames"], "missing value for: --frames"),
                        (["report", good, "--all-frames=yes"], "this option takes no value"),
                        (["run", "--depth"], "missing value for: --depth")):
        completed = tool(*args)
        check(completed.returncode == 1 and words in completed.stderr and
              completed.stderr.count("\n") == 1, f"{args}: {completed.returncode} {completed.stderr!r}")
    # The run options reach the traced program as settings, --opt=value too.
    out, err, reports, _ = run(os.path.join(ARGS.build, "cumemtrace"),
                               ["run", "--format=json", "--depth=2", "--quiet", "--",
                                os.path.join(ARGS.build, "examples", "leak_loop"), "2"],
                               preload=False)
    check(len(reports) == 1 and reports[0]["tracer"]["depth"] == 2 and "====" not in err,
          f"run --format=json --depth=2 --quiet: {err[-300:]!r}")
    check_help_matches_readme(commands)


def check_help_matches_readme(commands):
    """`cumemtrace --help` lists each command's own synopsis, and the README's
    block of commands is that list, line for line."""
    overview = tool("--help").stdout
    synopses = [line for line in overview.splitlines()
                if line.startswith("  cumemtrace ") or line.startswith("      [")]
    for command in commands:
        own = tool(command, "--help").stdout.split("\n\n")[0]
        first = own.splitlines()[0][len("usage: "):]
        check(f"  {first}" in synopses, f"{command}: its synopsis is in --help: {first!r}")
    with open(os.path.join(ARGS.source, "README.md")) as handle:
        readme = handle.read()
    block = readme.split("<!-- cumemtrace --help -->\n```\n", 1)[-1].split("```", 1)[0]
    check(block.splitlines() == synopses,
          f"README's commands are cumemtrace --help's:\n{block}\nvs\n" + "\n".join(synopses))


def case_report_malformed():
    """Reports cut short or with sections that do not fit together: status 2
    and one line each, never a crash (the ASan build runs this too)."""
    run("tests/oom", ["retry"], env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_QUIET": "1"})
    path = glob.glob(os.path.join(LAST_DIR, "*-oom.json"))[0]
    with open(path) as handle:
        text = handle.read()
    directory = tempfile.mkdtemp(prefix="cumemtrace-malformed-")
    bad = os.path.join(directory, "bad.json")
    for cut in range(1, len(text) - 2, max(1, len(text) // 40)):
        with open(bad, "w") as handle:
            handle.write(text[:cut])
        completed = tool("report", bad)
        check(completed.returncode == 2 and completed.stderr.count("\n") == 1 and
              "line 1, column" in completed.stderr,
              f"cut at {cut}: {completed.returncode} {completed.stderr!r}")
    report = json.loads(text)

    def mutated(change, words):
        copy = json.loads(json.dumps(report))
        change(copy)
        with open(bad, "w") as handle:
            json.dump(copy, handle)
        completed = tool("report", bad)
        check(completed.returncode == 2 and words in completed.stderr and
              completed.stderr.count("\n") == 1, f"{words}: {completed.returncode} {completed.stderr!r}")

    mutated(lambda r: r["stacks"][0]["frames"].append(99999), "a stack names a frame that is not in")
    mutated(lambda r: r["frames"].reverse(), "frame ids out of order")
    mutated(lambda r: r["live"][0].update(stack=99999), "a stack id that is not in")
    mutated(lambda r: r["live"][0].update(kind="plasma"), "an unknown \"kind\"")
    mutated(lambda r: r.update(stacks=5), "no \"stacks\" list")
    mutated(lambda r: r.pop("process"), "no \"process\" object")
    mutated(lambda r: r["event"].update(type="earthquake"), "an unknown event type")
    mutated(lambda r: r["stacks"][0].update(id=0), "a stack without an id or frames")
    mutated(lambda r: r["tracer"].update(stacks=10**30), "more stacks than a report can hold")
    mutated(lambda r: r["tracer"].update(stacks=2**62), "more stacks than a report can hold")
    for first, second in ((0, 1),):
        def swap(r):
            frames = r["frames"]
            frames[first]["address"], frames[second]["address"] = \
                frames[second]["address"], frames[first]["address"]
        mutated(swap, "frame addresses not in ascending order")


def case_install():
    """cmake --install into a prefix: the command finds the library there,
    and pkg-config gives flags that build a program against the header and
    the API-only library, which finds it at run time without
    LD_LIBRARY_PATH, does nothing untraced and reaches the tracer traced."""
    prefix = tempfile.mkdtemp(prefix="cumemtrace-prefix-")
    completed = subprocess.run(["cmake", "--install", ARGS.build, "--prefix", prefix],
                               capture_output=True, text=True, timeout=300)
    check(completed.returncode == 0, f"cmake --install: {completed.stderr[-1000:]}")
    for path in ("lib/libcumemtrace.so", "lib/libcumemtrace_api.so", "bin/cumemtrace",
                 "include/cumemtrace.h", "lib/pkgconfig/cumemtrace.pc",
                 "share/cumemtrace/python/cumemtrace/torch_tracker.py",
                 "share/cumemtrace/torch_tracker/torch_tracker.cpp"):
        check(os.path.isfile(os.path.join(prefix, path)), f"installed: {path}")
    installed = os.path.join(prefix, "bin", "cumemtrace")
    out, err, reports, _ = run(installed, ["run", "--format", "json", "--",
                                           os.path.join(ARGS.build, "examples", "leak_loop"), "2"],
                               preload=False)
    check(len(reports) == 1 and reports[0]["live"] and
          reports[0]["live"][0]["bytes"] == 2 * (4 << 20),
          f"the installed command traces with the installed library: {err[-500:]!r}")
    out, err, _, _ = run(installed, ["run", "--", sys.executable, "-c",
                                     "import cumemtrace_pytest, cumemtrace, os; "
                                     "print(cumemtrace_pytest.__file__, cumemtrace.traced(), "
                                     "os.environ['PYTEST_ADDOPTS'])"],
                         preload=False)
    check(out.startswith(os.path.join(prefix, "share", "cumemtrace", "python", "cumemtrace_pytest")) and
          out.endswith(" True -p cumemtrace_pytest\n"),
          f"run puts the installed Python packages on PYTHONPATH, the plugin in pytest's: "
          f"{out!r} {err[-300:]!r}")
    # Moved after installing: pkg-config's paths follow the .pc file.
    moved = prefix + "-moved"
    os.rename(prefix, moved)
    environment = dict(os.environ, PKG_CONFIG_PATH=os.path.join(moved, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "cumemtrace"], capture_output=True,
                           text=True, env=environment)
    check(flags.returncode == 0 and "/include" in flags.stdout and
          "-lcumemtrace_api" in flags.stdout and "-Wl,-rpath," in flags.stdout and
          moved in flags.stdout, f"pkg-config: {flags.returncode} {flags.stdout!r} {flags.stderr!r}")
    source = os.path.join(moved, "uses_api.c")
    with open(source, "w") as handle:
        handle.write('#include <stdio.h>\n#include <cumemtrace.h>\n'
                     'int main(void) { cumemtrace_mark("start");\n'
                     '  const char *version = cumemtrace_version();\n'
                     '  printf("version %s snapshot %d\\n", version ? version : "(not traced)",\n'
                     '         cumemtrace_snapshot(NULL)); return 0; }\n')
    program = os.path.join(moved, "uses_api")
    built = subprocess.run(["cc", "-Wall", "-Werror", source, "-o", program,
                            *flags.stdout.split()], capture_output=True, text=True)
    check(built.returncode == 0, f"compiled against the installed header: {built.stderr}")
    if built.returncode == 0:
        out, err, reports, _ = run(program, preload=False, env={"LD_LIBRARY_PATH": ""})
        check(out == "version (not traced) snapshot -1\n" and not reports,
              f"linked, untraced: found without LD_LIBRARY_PATH, does nothing: {out!r} {err!r}")
        out, err, reports, _ = run(os.path.join(moved, "bin", "cumemtrace"),
                                   ["run", "-f", "json", "--", program], preload=False)
        check(out == "version 0.1.0 snapshot 0\n" and
              "snapshot" in [r["reason"] for r in reports],
              f"traced: the calls reach the tracer: {out!r} {err[-300:]!r}")


CASES = {name[5:]: function for name, function in globals().items() if name.startswith("case_")}


def main(table=CASES):
    """Run one case of `table` (exports.py passes its own) and say how it went,
    or list the cases."""
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true",
                        help="print the names of the cases, one a line (CMake makes a test of each)")
    parser.add_argument("--build")
    parser.add_argument("--source")
    parser.add_argument("case", nargs="?", choices=sorted(table))
    ARGS = parser.parse_args()
    if ARGS.list:
        print("\n".join(sorted(table)))
        return 0
    if not (ARGS.build and ARGS.source and ARGS.case):
        parser.error("--build, --source and a case are needed")
    # Every temporary directory of the case inside one, removed if it passes:
    # a failed case keeps its programs' reports and dumps for a look.
    scratch = tempfile.mkdtemp(prefix=f"cumemtrace-test-{ARGS.case}-")
    tempfile.tempdir = scratch
    table[ARGS.case]()
    if FAILED:
        print(f"{ARGS.case}: {len(FAILED)} checks failed; its files are in {scratch}")
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"{ARGS.case}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
