"""Out of memory in PyTorch's cache (the stand-in allocator, stand_ins.py):
the OOM report's verdict in the cache's terms, at the line that asked, said
once."""

import glob
import os
import re
import subprocess

import support
from stand_ins import MiB, marked_lines, scenario, site_line, oom_reports
from support import check, device_counters


def oom_at(reports, scenario_name):
    """The OOM report of the framework's own failure at the scenario's OOM
    line (CUMEMTRACE_OOM=every also writes one for each failed cudaMalloc)."""
    lines = marked_lines("OOM", scenario_name)
    for report in reports:
        if site_line(report, report["event"]["stack"]) in lines and \
                report["event"]["kind"] == "torch_tensor":
            return report
    return None


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


def test_torch_blocks_exhaustion_oom(traced):
    out, _, _, _ = scenario(traced, "exhaustion_oom", SIMCUDA_MEMORY="1G", CUMEMTRACE_OOM="every")
    report = oom_at(oom_reports(traced.dir), "exhaustion_oom")
    if not check(report is not None, "an OOM report names the OOM line"):
        return
    check(report["event"]["verdict"] == "tensors_exhausted", f"verdict: {report['event']}")
    counters = device_counters(report, 0, "torch_tensor")
    check(counters["num_ooms"] >= 1, f"the tensors' OOMs counted: {counters}")
