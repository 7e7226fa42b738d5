"""The cumemtrace command: its errors, report, symbolize, diff and merge on
the reports traced programs write, a report read back the same as it was
written, malformed input, and `cumemtrace live` on a running program (in
tmux)."""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

import support
from support import check, validate, only, one_dump, traced_environment, line_of, tool, rank_reports


def test_command_errors(traced):
    tool = os.path.join(support.BUILD, "cumemtrace")
    for args, status, words in ((["symbolize", "/nonexistent.dump"], 2, "cannot read dump"),
                                (["frobnicate"], 1, "unknown command"),
                                (["run"], 1, "no command to run")):
        completed = subprocess.run([tool, *args], capture_output=True, text=True)
        check(completed.returncode == status and words in completed.stderr and
              completed.stderr.count("\n") == 1,
              f"{args}: status {completed.returncode}, {completed.stderr!r}")
    out, err, reports, _ = traced.run(tool, ["run", "--format", "json", "--",
                                             os.path.join(support.BUILD, "examples", "leak_loop"), "2"],
                                      preload=False)
    check(len(reports) == 1 and reports[0]["live"], "cumemtrace run traces the command")


def test_report_reads_right(traced):
    """What a newcomer meets: no driver found (the simulator's libcudart
    without its libcuda), VMM sites, several kinds of memory on one device."""
    lonely = tempfile.mkdtemp(prefix="cumemtrace-nodriver-")
    os.symlink(os.path.join(support.BUILD, "sim", "libcudart.so.13"),
               os.path.join(lonely, "libcudart.so.13"))
    out, err, reports, texts = traced.run("examples/leak_loop", ["2"], expect_rc=1,
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
    json_path = glob.glob(os.path.join(traced.dir, "*.json"))[0]
    hidden, shown = tool("report", json_path).stdout, tool("report", json_path, "--all-frames").stdout
    check("_start" not in hidden and "(3 frames hidden: start-up)" in hidden and
          "_start" in shown and "frames hidden" not in shown,
          f"report --all-frames shows the start-up frames the default hides:\n{shown[-800:]}")

    out, err, reports, texts = traced.run("examples/vmm_unreleased", env={"CUMEMTRACE_FORMAT": "text,json"})
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
    out, err, reports, texts = traced.run("tests/all_entry_points", ["keep"],
                                          env={"CUMEMTRACE_FORMAT": "text"})
    text = "".join(texts.values())
    check(text.count("    all device memory ") >= 1, "several kinds: the total row, named as one")


def live_sockets():
    with open("/proc/net/unix") as handle:
        return [line.split()[-1] for line in handle if "@cumemtrace-live-" in line]


def start_target(directory, *args, watched=True):
    """live_target.py under the tracer; its pids once it holds its weights."""
    ready = os.path.join(directory, "ready")
    script = os.path.join(support.SOURCE, "tests", "integration", "live_target.py")
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


def test_live_view(traced):
    """cumemtrace live in tmux: the view, q, nothing left behind, the
    process's results unchanged, fork, another user refused."""
    import time
    tmux = shutil.which("tmux")
    if not check(tmux, "tmux is installed (scripts/setup.sh installs it)"):
        return
    tool_path = os.path.join(support.BUILD, "cumemtrace")
    script = os.path.join(support.SOURCE, "tests", "integration", "live_target.py")
    remember_line = line_of(script, "REMEMBER-LINE")
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
    # w: who holds the memory (its pointers are ctypes', no framework's arrays).
    time.sleep(1.4)
    subprocess.run(tmux_command + ["send-keys", "-t", "live", "w"], capture_output=True)
    time.sleep(1.2)
    capture = subprocess.run(tmux_command + ["capture-pane", "-p", "-t", "live"],
                             capture_output=True, text=True).stdout
    with open(os.path.join(support.BUILD, "live-view.txt"), "w") as handle:
        handle.write(capture)
    check(f"cumemtrace live: pid {pid}" in capture and "q quits" in capture and
          "Top sites by live bytes" in capture and f"< remember:{remember_line}" in capture,
          f"the view in tmux:\n{capture}")
    check("Held by (request 1:" in capture and "(no tensor or array is held)" in capture,
          f"w asks who holds the memory:\n{capture}")
    growing = capture.split("Growing", 1)[-1]
    check(f"< remember:{remember_line}" in growing and "load_weights" not in growing,
          f"remember() is growing, the weights are not:\n{capture}")
    # remember() keeps 1 MiB a call, unmarked: its rate per call, then per second.
    rows = [l.split() for l in growing.splitlines() if f"< remember:{remember_line}" in l]
    check(rows and rows[0][1:3] == ["+1.00", "MiB"] and rows[0][3].startswith("+"),
          f"remember()'s rate per call, 1 MiB, then per second:\n{capture}")
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
    check(gone.returncode == 2 and "no such process" in gone.stderr and gone.stderr.count("\n") == 1,
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
    open(os.path.join(directory, "ready.stop"), "w").close()
    process.communicate(timeout=60)
    check(not any(f"@cumemtrace-live-{p}" in live_sockets() for p in pids),
          f"none left after both: {live_sockets()}")


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
# symbolizer), not what the report is about. On reading back it is the
# reading command's own: tracer.symbolizer; and blocks.total becomes the
# number of blocks listed, the only ones the file holds.
REWRITTEN = {("tracer", "symbolizer"),
             ("blocks", "total"), ("tracer", "live_blocks")}


def without_rewritten(report):
    report = json.loads(json.dumps(report))
    for section, key in REWRITTEN:
        if isinstance(report.get(section), dict):
            report[section].pop(key, None)
    return report


def test_report_roundtrip(traced):
    """`cumemtrace report FILE.json` prints the very text the library wrote.

    The text report is made only of what the JSON report holds, so no line may
    differ: the comparison is byte for byte, for reports covering every
    section (leaks with file:line, counters of every kind, pools and VMM
    holes, OOM events with retries, failures, growth by marks and by time
    (with its rate per call),
    implicit frees, signal snapshots, marks). The JSON read back and written
    again is the same but for REWRITTEN: the run's own settings (a run
    with CUMEMTRACE_DEPTH=12 and CUMEMTRACE_MIN_SIZE=4K among them) are
    written back as the run had them, not as the reading command's."""
    runs = [("examples/leak_loop", ["20"], {}, 0),
            ("examples/leak_loop", ["3"], {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, 0),
            ("tests/all_entry_points", ["keep"], {}, 0),
            ("tests/oom", ["retry"], {"SIMCUDA_MEMORY": "64M"}, 0),
            ("tests/oom", ["fragmented"], {"SIMCUDA_MEMORY": "64M"}, 0),
            ("tests/implicit_free", [], {}, 0), ("tests/growth", ["leak-marks"], {}, 0),
            ("tests/growth", ["leak-beside"], {}, 0),
            ("tests/growth", ["leak-time"], {"CUMEMTRACE_DEPTH": "12", "CUMEMTRACE_MIN_SIZE": "4K"}, 0),
            ("examples/async_leak", [], {}, 0), ("tests/api", ["{dir}/snap-%p"], {}, 0),
            ("tests/crash", ["usr2-chained"], {}, 0), ("tests/nccl_label", [], {}, 0),
            (sys.executable, [os.path.join(support.SOURCE, "tests", "integration", "torch_counters.py")],
             {"CUMEMTRACE_SAMPLE_MS": "50"}, 0),
            (sys.executable, [os.path.join(support.SOURCE, "tests", "integration", "python_frames.py")],
             {}, 0)]
    compared = 0
    for program, args, env, rc in runs:
        env = dict(env, CUMEMTRACE_FORMAT="text,json")
        traced.run(program, args, env=env, expect_rc=rc)
        pairs = text_and_json_pairs(traced.dir)
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
    text_path, json_path = text_and_json_pairs(traced.dir)[0]
    out = os.path.join(traced.dir, "again.txt")
    completed = tool("report", json_path, "-o", out)
    with open(text_path) as a, open(out) as b:
        check(completed.returncode == 0 and completed.stdout == "" and a.read() == b.read(),
              f"report -o writes the same text: {completed.stderr!r}")


def test_report_dump(traced):
    """`cumemtrace report` on a crash dump: what `symbolize` prints."""
    traced.run("tests/crash", ["segv-threads"], expect_rc=-11)
    dump = one_dump(traced)
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


def test_diff_snapshots(traced):
    traced.run("tests/snapshots", ["{dir}"], env={"CUMEMTRACE_QUIET": "1"})
    first, second = (os.path.join(traced.dir, n) for n in ("first.json", "second.json"))
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
          and lines[first_stack + 1].startswith("      at ")
          and "snapshots.c:" in lines[first_stack + 1] and lines[first_stack + 1].endswith(" in grow_cache")
          and lines[first_stack + 2].startswith("      grow_cache at ")
          and "snapshots.c:" in lines[first_stack + 2],
          f"the text names grow_cache first, its site as every report says it, then its frames: "
          f"{lines[first_stack:first_stack + 3]}")
    check("1 grew, 1 new, 0 shrank, 1 vanished, 1 unchanged" in text, f"counts: {text[:600]}")
    check("    device 0             13.0 MiB   22.0 MiB   +9.00 MiB" in lines, "device line")
    # Two runs: the same stacks match although their addresses differ
    # (ASLR): nothing changed between the two runs' first snapshots.
    other_dir = traced.dir
    traced.run("tests/snapshots", ["{dir}"], env={"CUMEMTRACE_QUIET": "1"})
    completed = tool("diff", os.path.join(other_dir, "first.json"),
                     os.path.join(traced.dir, "first.json"), "--format", "json")
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


def test_merge_ranks(traced):
    MiB = 1 << 20
    directory = rank_reports(traced, [(0, 5), (1, 20), (2, 5)])
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
    check(re.search(r"Divergent rank: 1 on \S+ holds 80.0 MiB live, the median of the other ranks "
                    r"20.0 MiB\n +80.0 MiB here, 20.0 MiB on the others: \S*leak_loop.c:\d+ in leak_scratch_buffer",
                    text) and
          "rule: a rank diverges when" in text,
          f"the text names rank 1, its host, its line and the rule: {text[:1500]}")
    check("   #1 2 ranks 20.0 MiB; rank 1 80.0 MiB (60.0 MiB between ranks, 120 MiB in all)" in text,
          f"the usual ranks and the outlier in the text: {text[:1500]}")
    check(merged["stacks"][0]["spread_bytes"] == 60 * MiB and
          all(r["at"] == "exit" for r in merged["ranks"]) and
          "read at: every rank live at its report" in text,
          f"a C program's ranks are read at exit, and the text says so: {merged['ranks']}")
    check("Growing (leak suspects), by site" in text and
          re.search(r"on 3 ranks: .*rank 1 \+4.00 MiB a call, \+[0-9.]+ [KMG]iB per second, "
                    r"80.0 MiB now.*\n\s+leak_scratch_buffer at ", text),
          f"the growing site, rank 1 on it, 4 MiB a call: {text[-1200:]}")
    fastest = merged["growing"][0]["growth"]["fastest"] if merged.get("growing") else []
    check(sorted(f["rank"] for f in fastest) == [0, 1, 2] and
          all(f["rate_per_call"] == 4 * MiB for f in fastest) and
          [f["calls"] for f in fastest if f["rank"] == 1][0] >= 15,
          f"each rank's rate per call in the JSON, 4 MiB: {fastest}")
    # Two ranks, the brief's case: RANK=0 and RANK=1, rank 0 the larger.
    directory = rank_reports(traced, [(0, 12), (1, 3)])
    merged = json.loads(tool("merge", os.path.join(directory, "rank-1.json"),
                             os.path.join(directory, "rank-0.json"), "--format", "json").stdout)
    check((merged["divergent"] or {}).get("rank") == 0, f"rank 0 diverges: {merged['divergent']}")
    # Balanced ranks: none diverges.
    directory = rank_reports(traced, [(0, 4), (1, 4)])
    merged = json.loads(tool("merge", *sorted(glob.glob(os.path.join(directory, "*.json"))),
                             "--format", "json").stdout)
    check(merged["divergent"] is None, f"balanced: none diverges: {merged['divergent']}")
    # Ranks using two devices each, with NCCL's buffers: labelled in the merge.
    directory = tempfile.mkdtemp(prefix="cumemtrace-ranks-")
    for rank in (0, 1):
        traced.run("tests/nccl_label", env={"RANK": str(rank), "CUMEMTRACE_QUIET": "1",
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
    directory = rank_reports(traced, [(None, 2), (None, 9)])
    files = [os.path.join(directory, "steps-9.json"), os.path.join(directory, "steps-2.json")]
    completed = tool("merge", *files)
    check("numbered by the order of the files" in completed.stdout and
          re.search(r"Divergent rank: 0 on \S+ holds 36.0 MiB live", completed.stdout),
          f"file order: {completed.stdout[:800]}")


def merge_job(traced, ranks, **generated):
    """A job of `ranks` rank reports made by job_reports.py from one real
    exit report of examples/leak_loop (RANK=0, 3 steps): (folder, the
    outliers' site as file:line, the source report)."""
    import job_reports
    source = os.path.join(rank_reports(traced, [(0, 3)]), "rank-0.json")
    folder = tempfile.mkdtemp(prefix="cumemtrace-job-")
    _, _, site = job_reports.make(source, folder, ranks, **generated)
    return folder, site, source


def test_merge_job(traced):
    """A job of 64 ranks on 8 hosts, made from one real report: rank 37 holds
    200 MiB more at one line, rank 12 left an OOM report in place of its
    exit report, rank 40 nothing, every rank up to 200 KiB more or less at
    another line. The text's first 15 lines say the OOM, the missing ranks
    and the divergent rank with its host and its line; the identical ranks
    are one row; each stack lists its outliers and the rest as a
    distribution, never every rank; the JSON says the same."""
    MiB = 1 << 20
    folder, site, _ = merge_job(traced, 64, outliers={37: 200}, missing=[40], oom=[12],
                                jitter_kib=200)
    with open(os.path.join(folder, "node-002", "merged.json"), "w") as handle:
        handle.write('{"format": "cumemtrace-merge"}\n')    # in the tree, not a report
    completed = tool("merge", folder)
    check(completed.returncode == 0, f"merge FOLDER: {completed.returncode} {completed.stderr!r}")
    lines = completed.stdout.splitlines()
    head = "\n".join(lines[:15])
    check(lines[0] == "==== cumemtrace merge: 63 ranks on 8 hosts ====", f"the title: {lines[:1]}")
    check(re.search(r"^  OOM: rank 12 on node-001 \(local rank 4\), its OOM report \S+rank-12-oom.json$",
                    head, re.M) and
          "  missing: ranks 12, 40 of the world of 64 left no exit report; rank 40 left no report at all"
          in head, f"the OOM and the missing ranks said first: {head}")
    divergent = re.search(r"^  Divergent rank: 37 on node-004 \(local rank 5\) holds (\S+ \S+) live, "
                          r"the median of the other ranks (\S+ \S+)\n +(\S+ \S+) here, (\S+ \S+) on "
                          r"the others: (\S+) in ", head, re.M)
    check(divergent and divergent.group(5).endswith(site) and divergent.group(3).startswith("212"),
          f"rank 37, its host and its line ({site}) in the first 15 lines: {head}")
    check(re.search(r"^  The others: 62 ranks 12.\d MiB ± \d+.\d KiB \(median", head, re.M),
          f"the others as a distribution: {head}")
    check("1 file in the folders not a report, left out" in completed.stdout,
          f"the merged view in the tree left out: {head}")
    at = lines.index("  Ranks (identical ones in one row):") if "  Ranks (identical ones in one row):" in lines else 0
    rows = lines[at + 2:lines.index("", at)] if at else []
    check(len(rows) <= 12 and rows[-1].startswith("  (memory and peak") and
          [l for l in rows if l.startswith("  37 ") and l.endswith("<- diverges")] and
          len([l for l in rows if "<- diverges" in l]) == 1,
          f"alike ranks in few rows, rank 37 alone in its own: {rows}")
    stack_lines = [l for l in lines if re.match(r"   #\d+ ", l)]
    check(stack_lines and re.match(r"   #1 62 ranks 12.\d MiB ± [\d.]+ KiB; rank 37 212 MiB \(", stack_lines[0]) and
          all(l.count("rank ") <= 8 for l in stack_lines),
          f"each stack: the usual ranks' distribution and the outliers: {stack_lines}")
    merged = json.loads(tool("merge", folder, "--format", "json").stdout)
    check(merged["version"] == 2 and merged["world_size"] == 64 and merged["missing_ranks"] == [40] and
          merged["no_exit_report"] == [12, 40] and [f["rank"] for f in merged["oom_reports"]] == [12] and
          merged["skipped_files"] == 1, f"the job's shape: {dict((k, merged[k]) for k in ('world_size', 'missing_ranks', 'no_exit_report', 'oom_reports'))}")
    check([(d["rank"], d["host"], d["local_rank"]) for d in merged["divergent_ranks"]] ==
          [(37, "node-004", 5)] and merged["divergent"]["rank"] == 37 and
          merged["divergent_ranks"][0]["stacks"][0]["stack"] == 0 and
          merged["divergent_ranks"][0]["stacks"][0]["site"].split(" in ")[0].endswith(site),
          f"rank 37 diverges, at the first stack: {merged['divergent_ranks']}")
    first = merged["stacks"][0]
    by_rank = dict(zip([r["rank"] for r in merged["ranks"]], first["bytes_by_rank"]))
    check(first["outliers"] == [{"rank": 37, "bytes": by_rank[37], "held_by": None}] and
          first["usual"]["ranks"] == 62 and
          abs(by_rank[37] - first["usual"]["median_bytes"] - 200 * MiB) <= 200 << 10,
          f"the first stack's one outlier and the distribution of the rest: {first['outliers']} {first['usual']}")
    others = [r["live_bytes"] for r in merged["ranks"] if r["rank"] != 37]
    check(merged["distribution"]["ranks"] == 62 and
          merged["distribution"]["min_bytes"] == min(others) and
          merged["distribution"]["max_bytes"] == max(others) and
          [r["rank"] for r in merged["ranks"] if r["verdict"] != "usual"] == [37],
          f"the other ranks' distribution: {merged['distribution']}")


def test_merge_holders(traced):
    """Who holds a divergent rank's memory, read from that rank's own report
    as it streams by: a job of 8 ranks made from a Python program's exit
    report that names its holders (torch_holders.py on the stand-in for
    PyTorch), rank 3 holding 64 MiB more at the list's line: its line in the
    answer says who holds it there, as the JSON does (the divergent rank's
    stacks, the stack's outliers); with the holders taken out of rank 3's
    report, none is said."""
    sim = os.path.join(support.BUILD, "sim")
    if not os.path.exists(os.path.join(sim, "torch", "lib", "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")
    import job_reports
    script = os.path.join(support.SOURCE, "tests", "integration", "torch_holders.py")
    env = {"LD_LIBRARY_PATH": f"{sim}:{sim}/torch/lib", "CUMEMTRACE_QUIET": "1",
           "CUMEMTRACE_TORCH_TRACKER": f"{sim}/torch/libcumemtrace_torch.so"}
    _, _, reports, _ = traced.run(sys.executable, [script, "everything"], env=env)
    end = [r for r in reports if r["reason"] == "exit"]
    if not check(len(end) == 1, f"one exit report: {[r['reason'] for r in reports]}"):
        return
    source = os.path.join(traced.dir, "exit.json")
    with open(source, "w") as handle:
        json.dump(end[0], handle)
    folder = tempfile.mkdtemp(prefix="cumemtrace-job-")
    job_reports.make(source, folder, 8, outliers={3: 64})
    words = "model.outs, a list of 30 tensors"
    completed = tool("merge", folder)
    answer = completed.stdout.split("\n\n")[0]
    outs = line_of(script, "HOLD-outs")
    check(re.search(r"^  Divergent rank: 3 on node-000 .*\n +\S+ \S+ here, \S+ \S+ on the others: "
                    rf".* < everything:{outs} — held by " + re.escape(words) + "$", answer, re.M),
          f"rank 3's line says who holds it: {answer}")
    merged = json.loads(tool("merge", folder, "--format", "json").stdout)
    stack = merged["divergent_ranks"][0]["stacks"][0]
    check(stack["held_by"] == words and merged["stacks"][0]["outliers"][0]["held_by"] == words,
          f"the JSON says it: {stack}, {merged['stacks'][0]['outliers']}")
    rank_3 = os.path.join(folder, "node-000", "rank-3.json")
    with open(rank_3) as handle:
        report = json.load(handle)
    report["holders"]["paths"] = []
    with open(rank_3, "w") as handle:
        json.dump(report, handle)
    completed = tool("merge", folder)
    merged = json.loads(tool("merge", folder, "--format", "json").stdout)
    check("held by" not in completed.stdout and
          merged["divergent_ranks"][0]["stacks"][0]["held_by"] is None,
          f"rank 3's own report names no holder: none said: {completed.stdout}")


def test_merge_identical(traced):
    """Ranks alike but for a few hundred KiB: no rank diverges, no stack has
    an outlier; one rank alone does not diverge; 300 ranks are merged in
    little memory (the merge keeps no rank's report)."""
    folder, _, source = merge_job(traced, 300, jitter_kib=300)
    completed = tool("merge", folder, "--format", "json")
    merged = json.loads(completed.stdout)
    check(merged["divergent"] is None and merged["divergent_ranks"] == [] and
          all(s["outliers"] == [] and s["bytes_by_rank"] is None for s in merged["stacks"]),
          f"no outlier among alike ranks: {[s['outliers'] for s in merged['stacks']]}")
    alone = tool("merge", source).stdout
    check("No rank diverges (one rank: nothing to compare)" in alone,
          f"one rank: nothing to diverge from: {alone[:600]}")
    # The merge keeps no rank's report: 300 ranks in 48 MiB of address
    # space (the merge that loaded them all needed twice that). Not under a
    # sanitizer, whose shadow memory is terabytes of address space.
    if "ASAN_OPTIONS" in os.environ or os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        return
    import resource
    capped = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "merge", folder],
                            capture_output=True, text=True, timeout=120,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (48 << 20, 48 << 20)))
    check(capped.returncode == 0 and "No rank diverges" in capped.stdout and
          "  The ranks: 300 ranks " in capped.stdout,
          f"300 ranks merged in 48 MiB of address space: {capped.returncode} {capped.stderr!r} "
          f"{capped.stdout[:600]}")


def test_merge_world(traced):
    """The world checked against what was found: a report re-indented (jq .),
    its command line longer than the first bytes a survey reads, is read
    like the others; one naming a rank past the world size is said;
    a report cut short in the tree fails the merge in one line naming it."""
    folder, _, _ = merge_job(traced, 16)
    with open(os.path.join(folder, "node-001", "rank-9.json")) as handle:
        report = json.load(handle)
    report["process"]["rank"] = 20
    report["process"]["argv"].append("--config=" + "x" * 6000)
    with open(os.path.join(folder, "node-001", "rank-20.json"), "w") as handle:
        json.dump(report, handle, indent=2)
    completed = tool("merge", folder)
    check(completed.returncode == 0 and completed.stdout.startswith(
              "==== cumemtrace merge: 17 ranks on 2 hosts ====\n"
              "  world size 16, yet the reports name rank 20\n"),
          f"rank 20 read and said: {completed.returncode} {completed.stderr!r} {completed.stdout[:400]}")
    merged = json.loads(tool("merge", folder, "--format", "json").stdout)
    check(merged["ranks_beyond_world"] == [20] and merged["missing_ranks"] == [] and
          [r["rank"] for r in merged["ranks"]][-2:] == [15, 20], f"the JSON: {merged['ranks_beyond_world']}")
    cut = os.path.join(folder, "node-000", "rank-3.json")
    with open(cut) as handle:
        text = handle.read()
    with open(cut, "w") as handle:
        handle.write(text[:len(text) * 2 // 3])
    completed = tool("merge", folder)
    check(completed.returncode == 2 and completed.stderr.count("\n") == 1 and
          f"cannot read '{cut}': line 1, column" in completed.stderr,
          f"a report cut short: one line naming it, status 2: {completed.returncode} {completed.stderr!r}")


def test_command_inputs(traced):
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
    traced.run("examples/leak_loop", ["2"], env={"CUMEMTRACE_QUIET": "1"})
    good = glob.glob(os.path.join(traced.dir, "*.json"))[0]
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
    out, err, reports, _ = traced.run(os.path.join(support.BUILD, "cumemtrace"),
                                      ["run", "--format=json", "--depth=2", "--quiet", "--",
                                       os.path.join(support.BUILD, "examples", "leak_loop"), "2"],
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
    with open(os.path.join(support.SOURCE, "README.md")) as handle:
        readme = handle.read()
    block = readme.split("<!-- cumemtrace --help -->\n```\n", 1)[-1].split("```", 1)[0]
    check(block.splitlines() == synopses,
          f"README's commands are cumemtrace --help's:\n{block}\nvs\n" + "\n".join(synopses))


def test_report_malformed(traced):
    """Reports cut short or with sections that do not fit together: status 2
    and one line each, never a crash (the ASan build runs this too)."""
    traced.run("tests/oom", ["retry"], env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_QUIET": "1"})
    path = glob.glob(os.path.join(traced.dir, "*-oom.json"))[0]
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
