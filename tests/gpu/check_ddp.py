"""Check a scripts/ddp-proof.sh run: python3 tests/gpu/check_ddp.py OUT_DIR

Results unchanged (each rank's loss and weight checksum, traced and not),
one report per rank naming rank, world size, host and device, NCCL's
buffers labelled in each, and - when the merge ran - the merged view naming
rank 0 as the one that diverges. Prints what it saw; exits 1 on any miss.
"""
import json
import os
import sys

out = sys.argv[1]
failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += not ok


def results(name):
    """Each rank's line from its own file (OUT/NAME-rankR.txt)."""
    lines = []
    for rank in (0, 1):
        path = os.path.join(out, f"{name}-rank{rank}.txt")
        if os.path.exists(path):
            lines += [l.split(" allocated")[0] for l in open(path) if l.startswith("rank ")]
    return lines


untraced, traced = results("untraced"), results("traced")
check(len(untraced) == 2 and untraced == traced,
      f"results unchanged by the tracer:\n  untraced {untraced}\n  traced   {traced}")
for rank in (0, 1):
    path = os.path.join(out, f"rank{rank}.json")
    if not os.path.exists(path):
        check(False, f"rank {rank}: report {path}")
        continue
    report = json.load(open(path))
    process = report["process"]
    # Device memory only on the rank's own GPU; NCCL's mappings of the peer's
    # buffers count on the peer's device, the one that owns that memory.
    devices = [d["device"] for d in report["devices"] if d["device"] is not None and
               d["counters"]["device_memory"]["allocation"]["allocated"]]
    peer = {d["device"]: d["counters"]["vmm_mapping"]["allocated_bytes"]["peak"]
            for d in report["devices"] if d["device"] not in (None, rank)}
    check(process["rank"] == rank and process["world_size"] == 2 and process["host"] and
          devices == [rank] and all(v > 0 for v in peer.values()) and list(peer) == [1 - rank],
          f"rank {rank}: rank {process['rank']} of {process['world_size']} on {process['host']}, "
          f"device memory on {devices}, peer mappings (peak bytes) on {peer}")
    stacks = {s["id"]: s for s in report["stacks"]}
    by_label = {}
    for group in report["live"] + report.get("freed", []):
        label = stacks[group["stack"]]["label"] if group["stack"] in stacks else None
        by_label.setdefault(label, [0, set()])
        by_label[label][0] += group["bytes"]
        by_label[label][1].add(group["kind"])
    peak = {}
    for stack in report["stacks"]:
        peak[stack["label"]] = peak.get(stack["label"], 0) + stack["peak_live_bytes"]
    summary = ", ".join(f"{k or 'unlabelled'}: {v / 2**20:.1f} MiB at their peaks"
                        for k, v in sorted(peak.items(), key=lambda kv: str(kv[0])))
    check(peak.get("nccl", 0) > 0, f"rank {rank}: NCCL buffers labelled ({summary}); "
                                   f"live at exit by label: "
                                   f"{ {k: (round(v[0] / 2**20, 1), sorted(v[1])) for k, v in by_label.items()} }")
merged = os.path.join(out, "merged.json")
if os.path.exists(merged):
    view = json.load(open(merged))
    print(open(os.path.join(out, "merged.txt")).read())
    divergent = view.get("divergent") or {}
    check(divergent.get("rank") == 0,
          f"the merged view names rank 0 as divergent: {divergent} ({view.get('rule')})")
else:
    print("merge: not run (this build has no `cumemtrace merge`)")
sys.exit(1 if failures else 0)
