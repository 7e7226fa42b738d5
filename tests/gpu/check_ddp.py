"""Check a tests/gpu/ddp-proof.sh run: python3 tests/gpu/check_ddp.py OUT_DIR

Results unchanged (each rank's loss and weight checksum, traced and not),
one report per rank naming rank, world size and host, and the program's end
seen; over NCCL (two GPUs), each rank's device memory on its own GPU and
NCCL's buffers labelled. The merged view (read at each rank's program end,
before the interpreter's teardown freed what KEPT held): its first stack is
ddp_train.py's RANK1-KEPT line, with rank 0's bytes 0 and rank 1's those of
the STEPS outputs it kept; rank 1 diverges and its growing site is that
line. Prints PASS or FAIL per check, then PASS or FAIL for the whole; exits
1 on any FAIL.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "ddp_train.py")
out = sys.argv[1]
failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what)
    failures += not ok


def results(name):
    """Each rank's line from its own file (OUT/NAME-rankR.txt)."""
    lines = []
    for rank in (0, 1):
        path = os.path.join(out, f"{name}-rank{rank}.txt")
        if os.path.exists(path):
            lines += [l.split(" allocated")[0] for l in open(path) if l.startswith("rank ")]
    return lines


def kept_line():
    with open(TRAIN) as handle:
        return next(n for n, text in enumerate(handle, 1) if text.rstrip().endswith("# RANK1-KEPT"))


def kept_bytes():
    """What rank 1 keeps: STEPS outputs of BATCH x 1024 float32."""
    facts = {}
    with open(TRAIN) as handle:
        for text in handle:
            if text.startswith(("STEPS = ", "BATCH = ")):
                name, value = text.split(" = ")
                facts[name] = int(value)
    return facts["STEPS"] * facts["BATCH"] * 1024 * 4


def names_line(frames, line):
    return any((f.get("file") or "").endswith("ddp_train.py") and f.get("line") == line
               for f in frames)


untraced, traced = results("untraced"), results("traced")
check(len(untraced) == 2 and untraced == traced,
      f"results unchanged by the tracer:\n  untraced {untraced}\n  traced   {traced}")
backend = "nccl" if traced and " backend nccl " in traced[0] else "gloo"
print(f"backend: {backend}")
for rank in (0, 1):
    path = os.path.join(out, f"rank{rank}.json")
    if not os.path.exists(path):
        check(False, f"rank {rank}: report {path}")
        continue
    report = json.load(open(path))
    process = report["process"]
    devices = [d["device"] for d in report["devices"] if d["device"] is not None and
               d["counters"]["device_memory"]["allocation"]["allocated"]]
    tensors = [c for c in report.get("caches", []) if c["kind"] == "torch_tensor"]
    check(process["rank"] == rank and process["world_size"] == 2 and process["host"] and
          report.get("program_end") is not None and tensors and tensors[0]["view"] == "blocks",
          f"rank {rank}: rank {process['rank']} of {process['world_size']} on {process['host']}, "
          f"program end seen: {report.get('program_end')}, PyTorch's tensors traced one by one: "
          f"{[(c['view'], c['why']) for c in tensors]} (else: tools/build-torch-tracker.sh)")
    if backend != "nccl":
        continue
    # Device memory only on the rank's own GPU; NCCL's mappings of the peer's
    # buffers count on the peer's device, the one that owns that memory.
    peer = {d["device"]: d["counters"]["vmm_mapping"]["allocated_bytes"]["peak"]
            for d in report["devices"] if d["device"] not in (None, rank)}
    check(devices == [rank] and all(v > 0 for v in peer.values()) and list(peer) == [1 - rank],
          f"rank {rank}: device memory on {devices}, peer mappings (peak bytes) on {peer}")
    peak = {}
    for stack in report["stacks"]:
        peak[stack["label"]] = peak.get(stack["label"], 0) + stack["peak_live_bytes"]
    summary = ", ".join(f"{k or 'unlabelled'}: {v / 2**20:.1f} MiB at their peaks"
                        for k, v in sorted(peak.items(), key=lambda kv: str(kv[0])))
    check(peak.get("nccl", 0) > 0, f"rank {rank}: NCCL buffers labelled ({summary})")

merged = os.path.join(out, "merged.json")
if not os.path.exists(merged):
    check(False, f"merge: {merged} not written")
else:
    view = json.load(open(merged))
    print(open(os.path.join(out, "merged.txt")).read())
    line, expected = kept_line(), kept_bytes()
    first = (view.get("stacks") or [{}])[0]
    by_rank = dict(zip([r["rank"] for r in view["ranks"]], first.get("bytes_by_rank", [])))
    check(names_line(first.get("frames", []), line) and by_rank == {0: 0, 1: expected},
          f"merge's first stack is ddp_train.py:{line} (RANK1-KEPT), rank 0 0 B and rank 1 "
          f"{expected / 2**20:.0f} MiB: bytes by rank {by_rank}, frames "
          f"{[(f.get('file'), f.get('line')) for f in first.get('frames', [])][:3]}")
    check([r["at"] for r in view["ranks"]] == ["end", "end"],
          f"both ranks read at their program's end: {[(r['rank'], r['at']) for r in view['ranks']]}")
    check((view.get("divergent") or {}).get("rank") == 1,
          f"the merged view names rank 1 as divergent: {view.get('divergent')} ({view.get('rule')})")
    kept = [g for g in view.get("growing", []) if names_line(g["frames"], line)]
    check(kept and [f["rank"] for f in kept[0]["growth"]["fastest"]] == [1],
          f"the kept line grows on rank 1 alone: "
          f"{[(g['growth'], g['frames'][:1]) for g in view.get('growing', [])]}")
print("PASS" if not failures else f"FAIL ({failures} checks failed)")
sys.exit(1 if failures else 0)
