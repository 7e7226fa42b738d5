"""What the tracer records, on the CUDA simulator: every allocation entry
point of the runtime and the driver, a statically linked runtime, a driver
reached through dlopen and cuGetProcAddress, threads, fork, frees the
program never makes, C++ and library names, the public API, and a run under
valgrind."""

import collections
import glob
import json
import os
import re
import shutil
import socket
import tempfile

import pytest

import support
from support import (check, validate, only, device_counters, entry_point, stack_functions,
                     user_functions, stack_files, by_reason, symbolize, one_dump, tool)


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


def test_entry_points_keep(traced):
    out, err, reports, _ = traced.run("tests/all_entry_points", ["keep"])
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


def test_entry_points_free(traced):
    out, err, reports, _ = traced.run("tests/all_entry_points", ["free"])
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
    untraced, _, _, _ = traced.run("tests/all_entry_points", ["free"], preload=False)
    check(out == untraced, f"output changed by the tracer: {out!r} vs {untraced!r}")


def test_static_cudart(traced):
    out, err, reports, _ = traced.run("tests/static_cudart")
    report = only(reports)
    check(entry_point(report, "cuMemAlloc_v2")["allocations"] == 3, "3 driver allocations")
    check(entry_point(report, "cudaMalloc")["calls"] == 0, "runtime level invisible")
    live = report["live"]
    check(len(live) == 1 and live[0]["bytes"] == 3 << 20, f"one 3 MiB block live: {live}")
    if live:
        check("static_allocate" in stack_functions(report, live[0]["stack"]),
              f"stack names static_allocate: {stack_functions(report, live[0]['stack'])}")


def test_dlopen_driver(traced):
    out, err, reports, _ = traced.run("tests/dlopen_driver")
    check("async ptsz calls 1, legacy 0" in out, f"ptsz lookup forwarded: {out!r}")
    report = only(reports)
    check(entry_point(report, "cuMemAlloc_v2")["allocations"] == 3, "3 cuMemAlloc through lookup")
    check(entry_point(report, "cuMemAllocAsync_ptsz")["allocations"] == 1, "ptsz wrapper used")
    check(entry_point(report, "cuGetProcAddress")["calls"] == 1, "v1 lookup wrapped")
    check(report["blocks"]["total"] == 3, f"3 blocks live: {report['blocks']['total']}")


def test_leak_loop(traced):
    out, err, reports, texts = traced.run("examples/leak_loop", ["20"],
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


def test_threads(traced):
    out, err, reports, _ = traced.run("tests/threads")
    report = only(reports)
    counters = device_counters(report, 0, "device")
    check(counters["allocation"]["allocated"] == 160000, f"allocated: {counters['allocation']}")
    check(counters["allocation"]["freed"] == 159984, f"freed: {counters['allocation']}")
    check(counters["allocation"]["current"] == 16, "16 live")
    check(entry_point(report, "cudaMalloc")["allocations"] == 160000, "all labelled cudaMalloc")
    check(len(report["threads"]) >= 16, "16 threads seen")
    check(all(value == 0 for value in report["tracer"]["lost"].values()),
          f"nothing lost: {report['tracer']['lost']}")


def test_threads_snapshot(traced):
    """8 threads allocate and free while snapshots are taken: each snapshot is
    one picture (taken with every registry shard locked), the end is exact."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-snaps-")
    out, err, reports, _ = traced.run("tests/threads_snapshot", [directory])
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


def test_fork(traced):
    out, err, reports, _ = traced.run("tests/fork_child")
    check(len(reports) == 2, f"two reports (parent, child): {len(reports)}")
    by_blocks = {r["blocks"]["total"]: r for r in reports}
    parent, child = by_blocks.get(1), by_blocks.get(2)
    check(parent is not None and child is not None, "parent has 1 block, child 2")
    if parent and child:
        check(child["process"]["ppid"] == parent["process"]["pid"], "child's parent is the parent")
        check(f"child {child['process']['pid']}" in out, "child report has the child's pid")
        check(all(b["size"] == 3 << 20 for b in child["blocks"]["items"]),
              "the child's report holds only its own blocks")


def test_fork_symbols(traced):
    """A forked child symbolizes with what its parent's snapshot read, and a
    report looks up file and line only for the frames it shows."""
    out, err, reports, _ = traced.run("tests/fork_symbols", ["{dir}/snap"],
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
    out, err, reports, _ = traced.run("tests/fork_symbols", ["-"], env={"CUMEMTRACE_DEBUG": "1"})
    child = int(re.search(r"child (\d+)", out).group(1))
    readers = [int(pid) for pid in re.findall(r"reading the modules of process (\d+)", err)]
    check(child in readers, f"a child whose parent read nothing reads its modules: {readers}")


def test_fork_pool(traced):
    """A child creates a pool after fork: its report lists that pool."""
    out, err, reports, _ = traced.run("tests/fork_pool")
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


def test_implicit_free(traced):
    out, err, reports, _ = traced.run("tests/implicit_free")
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


def test_rtld_next(traced):
    lib = os.path.join(support.BUILD, "tests", "librtld_next_interposer.so")
    out, err, reports, _ = traced.run("tests/rtld_next", extra_preload=[lib])
    check("getpid ok" in out, f"RTLD_NEXT resolved relative to the caller: {out!r} {err[-300:]!r}")


def test_torch_per_tensor(traced):
    shell = ["-c", 'echo "[${PYTORCH_NO_CUDA_MEMORY_CACHING:-unset}]"']
    out, err, reports, _ = traced.run("/bin/sh", shell, env={"CUMEMTRACE_TORCH_PER_TENSOR": "1"})
    check(out == "[1]\n", f"PyTorch's caching is off for the program: {out!r}")
    out, err, reports, _ = traced.run("/bin/sh", shell)
    check(out == "[unset]\n", f"and left alone by default: {out!r}")
    for value, said in (("maybe", 1), ("", 0)):
        out, err, reports, _ = traced.run("/bin/sh", shell, env={"CUMEMTRACE_TORCH_PER_TENSOR": value})
        check(out == "[unset]\n" and err.count("cumemtrace") == said and
              err.count("CUMEMTRACE_TORCH_PER_TENSOR='maybe'") == said,
              f"{value!r} changes nothing; a bad value is said once, when the library loads, "
              f"even in a process without CUDA: {out!r} {err!r}")
    out, err, reports, _ = traced.run("examples/leak_loop", ["2"],
                                      env={"CUMEMTRACE_TORCH_PER_TENSOR": "maybe"})
    check(err.count("CUMEMTRACE_TORCH_PER_TENSOR='maybe'") == 1,
          f"a bad value is named once in a process that uses CUDA: {err[-500:]!r}")
    out, err, reports, _ = traced.run("examples/leak_loop", ["2"], env={"CUMEMTRACE_TORCH_PER_TENSOR": ""})
    check("CUMEMTRACE_TORCH_PER_TENSOR" not in err, f"empty means unset: {err[-500:]!r}")


def test_cxx_names(traced):
    """C++ names from a program with no C++ runtime (tests/cxx_names): the
    tracer loads none into it, neither at start-up nor for a report, so its
    reports keep the names as linked; everything the command prints or
    exports from them shows them demangled, and a crash dump is symbolized
    with them demangled."""
    program = os.path.join(support.BUILD, "tests", "cxx_names")
    if not os.path.exists(program):
        pytest.skip("no C++ compiler at configure time")
    mangled, plain = "_ZN3app6memory4Pool4grabEm", "app::memory::Pool::grab(unsigned long)"
    shown = "app::memory::Pool::grab("       # the text's stacks shorten the arguments
    # Untraced, the program maps no libstdc++ (but in a sanitizer build, whose
    # runtime needs it): traced, neither after the allocation nor after a report.
    untraced, _, _, _ = traced.run(program, ["exit"], preload=False)
    out, err, reports, _ = traced.run(program, ["exit", "{dir}/snapshot"])
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
    report = os.path.join(traced.dir, f"report-{exit_report['process']['pid']}.json")
    snapshot = os.path.join(traced.dir, "snapshot.json")
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
        out_path = os.path.join(traced.dir, f"exported-{number}")
        completed = tool(*args, "-o", out_path)
        written = glob.glob(out_path + "*")
        text = open(written[0], encoding="latin-1").read() if len(written) == 1 else ""
        check(completed.returncode == 0 and shown in text and not (only_plain and mangled in text),
              f"cumemtrace {' '.join(args[:3])}: demangled: {completed.stderr!r} {written}")
    # A crash dump, symbolized by the command against the program's files.
    traced.run(program, ["crash"], expect_rc=-11)
    dump = one_dump(traced)
    if dump:
        rc, output, symbolized = symbolize(dump, "json,text")
        text_path = dump[:-len(".dump")] + "-symbolized.txt"
        text = open(text_path).read() if os.path.exists(text_path) else ""
        frames = symbolized["frames"] if symbolized else []
        check(rc == 0 and any(f["function"] == plain and f.get("mangled") == mangled
                              for f in frames) and shown in text and mangled not in text,
              f"cumemtrace symbolize: demangled: {rc} {output[-300:]} {text[-800:]}")


def test_nccl_label(traced):
    """Buffers allocated through libnccl are labelled; a peer's memory mapped
    here counts on the device that owns it."""
    out, err, reports, _ = traced.run("tests/nccl_label", env={
        "CUMEMTRACE_FORMAT": "text,json", "CUMEMTRACE_OUTPUT": "{dir}/rank%r",
        "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    check(out == "nccl label: done\n", f"ran: {out!r} {err[-400:]!r}")
    check(os.path.exists(os.path.join(traced.dir, "rank1.json")), "%r in the file name is the rank")
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


def test_public_api(traced):
    out, err, reports, _ = traced.run("tests/api", [os.path.join(tempfile.gettempdir(), "unused")],
                                      preload=False)
    check("tracer absent, snapshot -2" in out, f"runs untraced: {out!r}")
    out, err, reports, _ = traced.run("tests/api", ["{dir}/snap-%p"])
    path = glob.glob(os.path.join(traced.dir, "snap-*.json"))
    check("snapshot 0" in out and len(path) == 1, f"snapshot written where asked: {out!r} {path}")
    check("_Unwind_RaiseException from" in out and "libunwind" not in out,
          f"the program's exception unwinder is untouched: {out!r}")
    snap = [r for r in reports if r["reason"] == "snapshot"]
    final = by_reason(reports, "exit")
    check(snap and snap[0]["blocks"]["total"] == 2, "the snapshot holds both blocks")
    marks = final.get("marks", {}).get("recent", [])
    check(len(marks) == 1 and marks[0]["label"] == "after the first block" and
          marks[0]["device_bytes"] == 1 << 20, f"the mark, with the live bytes then: {marks}")


def test_valgrind(traced):
    """Every entry point and the exit report under valgrind's memcheck."""
    valgrind = shutil.which("valgrind")
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") or not valgrind:
        pytest.skip("a sanitizer build, or valgrind missing")
    supp = os.path.join(support.SOURCE, "tests", "valgrind.supp")
    out, err, reports, _ = traced.run(valgrind, ["-q", "--error-exitcode=9", f"--suppressions={supp}",
                                                 os.path.join(support.BUILD, "tests", "all_entry_points"),
                                                 "keep"],
                                      env={"SIMCUDA_MEMORY": "64M"})  # memcheck is slow to map 8 GiB
    check("failures 0" in out and len(reports) == 1, f"ran cleanly under memcheck: {err[-2000:]}")
