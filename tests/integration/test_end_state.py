"""The program's end, everywhere (kept_globals.py): buffers kept in a module
global until the interpreter's teardown frees them leave exit reports with
little live, so merge, diff, the exports and live read what was held when
the program ended."""

import glob
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile

import support
from stand_ins import MiB, script, torch_env, skip_without_torch, site_line
from support import check, symbolize, traced_environment, tool


def kept(traced, mode, keep_mib, directory, name, *extra, expect_rc=0, **env):
    """Run kept_globals.py; its exit report's path (directory/name.json)."""
    settings = torch_env() if mode == "torch" else {"LD_LIBRARY_PATH": os.path.join(support.BUILD, "sim")}
    if mode == "torch":
        skip_without_torch()
    settings.update({"CUMEMTRACE_OUTPUT": os.path.join(directory, name), "CUMEMTRACE_QUIET": "1",
                     "CUMEMTRACE_SAMPLE_MS": "20"})
    settings.update(env)
    traced.run(sys.executable, [script("kept_globals.py"), mode, str(keep_mib), *extra], env=settings,
               expect_rc=expect_rc)
    return os.path.join(directory, name + ".json")


def kept_line(tag="KEPT"):
    return min(marked_lines_of("kept_globals.py", tag))


def marked_lines_of(name, tag):
    with open(script(name)) as handle:
        return {n for n, text in enumerate(handle, 1) if text.rstrip().endswith(f"# {tag}")}


def has_line(frames, line, file="kept_globals.py"):
    """A list of frames ({file, line} dicts, or "function (file:line)"
    names) holds `file`:`line`."""
    for f in frames:
        if isinstance(f, dict) and (f.get("file") or "").endswith(file) and f.get("line") == line:
            return True
        if isinstance(f, str) and f.endswith(f"{file}:{line})"):
            return True
    return False


def test_end_state_diff(traced):
    """Two runs that differ by 400 MiB kept in a global, freed by the
    teardown: diff compares what each held at the program's end (by
    default, and says so) and names the line; --at exit sees what the
    teardown left; --at peak each stack's highest; a report whose end was
    not seen makes the default exit, said in one line."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-end-")
    a, b = kept(traced, "ctypes", 0, directory, "a"), kept(traced, "ctypes", 400, directory, "b")
    completed = tool("diff", a, b, "--format", "json")
    result = json.loads(completed.stdout) if completed.returncode == 0 else {}
    first = (result.get("stacks") or [{}])[0]
    check(result.get("at") == "end" and result["a"]["at"] == result["b"]["at"] == "end" and
          first.get("status") == "new" and first.get("change") == 400 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"diff names the kept line, +400 MiB at the program's end: {completed.stderr} {result}")
    check(result.get("total", {}).get("change") == 400 * MiB,
          f"device memory at the end differs by 400 MiB: {result.get('total')}")
    text = tool("diff", a, b).stdout
    check("at the program's end, before the interpreter's teardown" in text and
          "   #1 +400 MiB new: 0 B -> 400 MiB" in text and
          f"kept_globals.py:{kept_line()}" in text and "Device memory at end" in text,
          f"the text says which moment, and names the line: {text}")
    at_exit = json.loads(tool("diff", a, b, "--at", "exit", "--format", "json").stdout)
    check(at_exit["at"] == "exit" and not any(s["change"] == 400 * MiB for s in at_exit["stacks"]),
          f"--at exit: what the teardown left, not the kept buffers: {at_exit['stacks']}")
    at_peak = json.loads(tool("diff", a, b, "--at", "peak", "--format", "json").stdout)
    check(at_peak["at"] == "peak" and at_peak["stacks"][0]["change"] == 400 * MiB and
          has_line(at_peak["stacks"][0]["frames"], kept_line()) and
          at_peak["total"]["change"] == 400 * MiB,
          f"--at peak: each stack at its own highest: {at_peak['stacks'][:1]} {at_peak['total']}")
    # A C program's report: no end to compare at; the default says so.
    traced.run("examples/leak_loop", ["2"], env={"CUMEMTRACE_QUIET": "1"})
    c_report = glob.glob(os.path.join(traced.dir, "*.json"))[0]
    mixed = tool("diff", c_report, b)
    check(mixed.returncode == 0 and "compared at exit: the program's end (a Python program's exit "
          "hooks) was not seen in both" in mixed.stdout,
          f"no end in A: compared at exit, said so: {mixed.stdout[:600]} {mixed.stderr}")
    bad = tool("diff", a, b, "--at", "middle")
    check(bad.returncode == 1 and "--at takes end, peak or exit: middle" in bad.stderr,
          f"--at checked: {bad.stderr!r}")


def test_end_state_merge(traced):
    """Two ranks of a PyTorch program (the stand-in, in caching mode), rank 1
    keeping 320 MiB of tensors in a global, which the teardown gives back to
    the cache: merge's first stack is that line with each rank's bytes, read
    at the program's end; rank 1 diverges; its growing site is the line."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-end-")
    files = [kept(traced, "torch", 320 * rank, directory, f"rank-{rank}", RANK=str(rank), WORLD_SIZE="2")
             for rank in (0, 1)]
    completed = tool("merge", *files, "--format", "json")
    merged = json.loads(completed.stdout) if completed.returncode == 0 else {}
    first = (merged.get("stacks") or [{}])[0]
    check(first.get("bytes_by_rank") == [0, 320 * MiB] and first.get("spread_bytes") == 320 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"the first stack is the kept line, with each rank's bytes: {completed.stderr} {first}")
    check([r["at"] for r in merged.get("ranks", [])] == ["end", "end"] and
          (merged.get("divergent") or {}).get("rank") == 1,
          f"both ranks read at the end, rank 1 diverges: {merged.get('ranks')} {merged.get('divergent')}")
    growing = merged.get("growing") or [{}]
    check([r.get("growing_sites") for r in merged.get("ranks", [])] == [0, 1] and
          has_line(growing[0].get("frames", []), kept_line()) and
          [f["rank"] for f in growing[0]["growth"]["fastest"]] == [1],
          f"the one growing site is the kept line, on rank 1 alone: {growing}")
    text = tool("merge", *files).stdout
    lines = text.splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith("   #1 ")), None)
    check(at is not None and lines[at].startswith("   #1 1 rank 0 B; rank 1 320 MiB (320 MiB between ranks") and
          any(f"kept_globals.py:{kept_line()}" in l for l in lines[at + 1:at + 4]) and
          "read at: every rank at its program's end" in text and
          "Divergent rank: 1 on " in text and "at its program's end" in text,
          f"the text: the kept line first, each rank's bytes, the moment: {text}")


def test_end_state_exports(traced):
    """The exports of a program whose teardown freed 400 MiB kept in a
    global: folded stacks and memory_viz's snapshot are of the program's
    end and hold the kept line; the Chrome trace marks the end with it; the
    command's exports of the JSON report say the same."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-end-")
    report = kept(traced, "ctypes", 400, directory, "b", CUMEMTRACE_FORMAT="json,folded,perfetto,memviz")
    base = report[:-len(".json")]
    line = kept_line()

    def folded_of(path):
        found = {}
        for text in open(path):
            stack, count = text.rstrip("\n").rsplit(" ", 1)
            found[stack] = found.get(stack, 0) + int(count)
        return found

    def check_folded(path, who):
        found = folded_of(path)
        kept_stacks = {k: v for k, v in found.items() if f"kept_globals.py:{line})" in k}
        check(list(kept_stacks.values()) == [400 * MiB] and
              all(k.startswith("[device, at the program's end];") for k in found),
              f"{who}: the kept line, 400 MiB, at the program's end: {found}")

    def check_trace(path, who):
        with open(path) as handle:
            events = json.load(handle)["traceEvents"]
        end = [e for e in events if e["name"].startswith("program end")]
        held = end[0]["args"]["held"] if end else []
        check(len(end) == 1 and held and held[0]["bytes"] == 400 * MiB and
              has_line(held[0]["stack"], line),
              f"{who}: the program's end, the kept line first: {end}")

    def check_memviz(path, who):
        with open(path, "rb") as handle:
            snapshot = pickle.load(handle)
        kept_segments = [s for s in snapshot["segments"] if any(
            f["filename"].endswith("kept_globals.py") and f["line"] == line for f in s["frames"])]
        check(snapshot.get("cumemtrace", {}).get("moment") == "program_end" and
              len(kept_segments) == 20 and sum(s["total_size"] for s in kept_segments) == 400 * MiB,
              f"{who}: the snapshot at the program's end holds the 20 kept buffers: "
              f"{snapshot.get('cumemtrace')} {len(kept_segments)}")
        trace = snapshot["device_traces"][0]
        check(trace and not any(e["action"] == "segment_free" and e["size"] == 20 * MiB for e in trace),
              f"{who}: the traces stop at the program's end (no teardown frees)")

    check_folded(base + ".folded", "folded")
    check_trace(base + ".trace.json", "perfetto")
    check_memviz(base + ".pickle", "memviz")
    for name, suffix, checker in (("folded", ".folded", check_folded),
                                  ("perfetto", ".trace.json", check_trace),
                                  ("memviz", ".pickle", check_memviz)):
        out = os.path.join(directory, "again-" + name)
        completed = tool("export", "--format", name, report, "-o", out)
        if check(completed.returncode == 0, f"export {name}: {completed.stderr}"):
            checker(out + suffix, f"cumemtrace export --format {name}")


def test_end_state_crash_dump(traced):
    """A crash in the interpreter's teardown, after the program ended: the
    dump keeps what was held at the end, so its report, diff and merge read
    the kept line there as from an exit report."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-end-")
    a = kept(traced, "ctypes", 0, directory, "a")
    kept(traced, "ctypes", 400, directory, "b", "crash", expect_rc=-signal.SIGSEGV)
    dump = os.path.join(directory, "b.dump")
    rc, text, report = symbolize(dump)
    held = [g for g in (report or {}).get("held_at_end", []) if g["bytes"] == 400 * MiB]
    check(rc == 0 and report and report["program_end"] is not None and held and
          site_line(report, held[0]["stack"], "kept_globals.py") == kept_line() and
          held[0]["freed_at_teardown_bytes"] == 400 * MiB,
          f"the dump's report: held at the end, the kept line, freed by the teardown: "
          f"{(report or {}).get('program_end')} {(report or {}).get('held_at_end')}")
    result = json.loads(tool("diff", a, dump, "--format", "json").stdout or "{}")
    first = (result.get("stacks") or [{}])[0]
    check(result.get("at") == "end" and first.get("change") == 400 * MiB and
          has_line(first.get("frames", []), kept_line()),
          f"diff of an exit report and the dump, at the program's end: {result}")


def test_end_state_live(traced):
    """cumemtrace live on a program that has ended, its teardown under way:
    the sites are ranked by what they held at the end, and it says so."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
    environment = traced_environment(directory, CUMEMTRACE_QUIET="1")
    environment["LD_LIBRARY_PATH"] = os.path.join(support.BUILD, "sim")
    process = subprocess.Popen([sys.executable, "-u", script("kept_globals.py"), "ctypes", "400", "3"],
                               cwd=directory, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    ended = process.stdout.readline()
    view = tool("live", str(process.pid), "--once") if ended.startswith("ended") else None
    process.communicate(timeout=60)
    text = view.stdout if view else ""
    top = text.split("Top sites", 1)[-1].split("Growing", 1)[0]
    rows = [l for l in top.splitlines() if l.strip().startswith("1 ")]
    check(view and view.returncode == 0 and "its interpreter's teardown is freeing" in text and
          "Top sites by bytes held at the program's end" in text and rows and
          rows[0].split()[1:3] == ["400", "MiB"] and f":{kept_line()}" in rows[0],
          f"live after the program's end: the kept line first, 400 MiB at the end: {ended!r} {text}")
