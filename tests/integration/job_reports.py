#!/usr/bin/env python3
"""A job's rank reports made from one real report: what `cumemtrace merge`
is tried on at scale (tests/integration/test_command.py, bench/merge_ranks.py).

    python3 tests/integration/job_reports.py REPORT OUT --ranks N
        [--ranks-per-host 8] [--outlier RANK:MIB]... [--missing RANK]...
        [--oom RANK]... [--jitter KIB]

Writes OUT/node-HHH/rank-R.json, one exit report per rank of a world of N
ranks, eight ranks (local ranks 0-7) per host: REPORT with its process's
rank, local rank, world size, host and pid changed. An outlier rank holds
MIB more at the stack that holds most in REPORT (its site is that stack's
line): the stack's bytes, its live group, what was held at the program's
end and the device's counters all grow by as much. A missing rank leaves no
file; an OOM rank leaves an OOM report (OUT/node-HHH/rank-R-oom.json, the
reason "oom" and an out-of-memory event at that stack) in place of its exit
report.
--jitter gives each rank up to that many KiB more at the second stack (the
first when there is one only), so the ranks are not all alike. Prints one line of JSON: the files written,
their bytes, and the outliers' stack's site (file:line).
"""
import argparse
import copy
import json
import os
import random
import sys


def _top_stack(report):
    """The stack holding most at the moment merge reads (the program's end
    when the report saw it, else exit): its id."""
    if report.get("program_end") and report.get("held_at_end"):
        groups = report["held_at_end"]
    else:
        groups = report.get("live") or []
    ranked = sorted(groups, key=lambda g: -g["bytes"])
    if ranked:
        return ranked[0]["stack"], (ranked[1]["stack"] if len(ranked) > 1 else None)
    stacks = sorted(report["stacks"], key=lambda s: -s.get("live_bytes", 0))
    return stacks[0]["id"], None


def _site(report, stack_id):
    stack = next(s for s in report["stacks"] if s["id"] == stack_id)
    frames = report["frames"]
    site = stack.get("site")
    frame = frames[stack["frames"][site]] if site is not None else None
    if not frame:
        return None
    return f"{os.path.basename(frame.get('file') or '?')}:{frame.get('line')}"


def _add_bytes(report, stack_id, extra):
    """`extra` bytes more held at stack `stack_id`, everywhere merge reads."""
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            stack["live_bytes"] = stack.get("live_bytes", 0) + extra
            stack["peak_live_bytes"] = stack.get("peak_live_bytes", 0) + extra
    device = None
    for group in (report.get("live") or []) + (report.get("held_at_end") or []):
        if group["stack"] == stack_id:
            group["bytes"] += extra
            device = group.get("device", device)
    for d in report["devices"]:
        if d["device"] != device and device is not None:
            continue
        memory = d["counters"]["device_memory"]["allocated_bytes"]
        memory["current"] += extra
        memory["peak"] = max(memory["peak"], memory["current"])
        break
    for d in (report.get("program_end") or {}).get("devices") or []:
        if device is None or d["device"] == device:
            d["live_bytes"] += extra
            break


def _rank_text(report, rank, ranks, per_host):
    process = report["process"]
    process.update(rank=rank, local_rank=rank % per_host, world_size=ranks,
                   host=f"node-{rank // per_host:03d}", pid=100000 + rank)
    return json.dumps(report, separators=(",", ":"))


def make(source, out, ranks, per_host=8, outliers=None, missing=(), oom=(), jitter_kib=0,
         seed=1):
    """Write the job's files under `out`; (files, bytes, site)."""
    with open(source) as handle:
        base = json.load(handle)
    base["reason"] = "exit"
    base["event"] = None
    top, second = _top_stack(base)
    outliers = outliers or {}
    missing, oom = set(missing), set(oom)
    random_ = random.Random(seed)
    written = total = 0
    for rank in range(ranks):
        if rank in missing and rank not in oom:
            continue
        report = copy.deepcopy(base) if (rank in outliers or rank in oom or jitter_kib) else base
        if rank in outliers:
            _add_bytes(report, top, outliers[rank] << 20)
        if jitter_kib:
            _add_bytes(report, top if second is None else second,
                       random_.randrange(jitter_kib + 1) << 10)
        folder = os.path.join(out, f"node-{rank // per_host:03d}")
        os.makedirs(folder, exist_ok=True)
        if rank in oom:
            report["reason"] = "oom"
            report["event"] = {"type": "oom", "size": 1 << 30, "kind": "device", "api": "cudaMalloc",
                               "device": 0, "code": 2, "error": "cudaErrorMemoryAllocation",
                               "stack": top, "driver_free": 0, "driver_total": 80 << 30,
                               "verdict": "exhausted", "retry": "failed"}
            name = os.path.join(folder, f"rank-{rank}-oom.json")
        else:
            name = os.path.join(folder, f"rank-{rank}.json")
        text = _rank_text(report, rank, ranks, per_host)
        with open(name, "w") as handle:
            handle.write(text)
        written += 1
        total += len(text)
    return written, total, _site(base, top)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report")
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--ranks-per-host", type=int, default=8)
    parser.add_argument("--outlier", action="append", default=[], metavar="RANK:MIB")
    parser.add_argument("--missing", action="append", type=int, default=[])
    parser.add_argument("--oom", action="append", type=int, default=[])
    parser.add_argument("--jitter", type=int, default=0, metavar="KIB")
    args = parser.parse_args()
    try:
        outliers = {int(r): int(m) for r, m in (o.split(":") for o in args.outlier)}
    except ValueError:
        sys.exit(f"job_reports.py: --outlier takes RANK:MIB, not {args.outlier}")
    files, size, site = make(args.report, args.out, args.ranks, args.ranks_per_host, outliers,
                             args.missing, args.oom, args.jitter)
    print(json.dumps({"files": files, "bytes": size, "site": site}))


if __name__ == "__main__":
    main()
