"""The tracer and the command as a hostile or careless
user meets them: links planted where files are written, processes sharing a
name, forks beside busy threads, a program that reuses fd 2, dumps naming
FIFOs, signals the program relies on, bytes that are not UTF-8."""

import glob
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import support
from support import check, validate, device_counters, by_reason, tool


HOSTILE = "tests/hostile"


def start_waiting(directory, mode="wait", env=None):
    """Start `hostile wait` (or wait-segv); return (process, pid) once it
    holds its block and waits."""
    process = subprocess.Popen([os.path.join(support.BUILD, HOSTILE), mode], cwd=directory,
                               env=support.traced_environment(directory, **(env or {})),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    pid = int(process.stdout.readline())
    return process, pid


def release(processes):
    """Let every waiting process go at once; return their (rc, stderr)."""
    for process in processes:
        process.stdin.write("go\n")
    for process in processes:
        process.stdin.close()
    return [(process.wait(timeout=120), process.stderr.read()) for process in processes]


def test_symlink_planted(traced):
    """Links planted at every name the tracer used to write through (the
    temporary <path>.tmp.<pid>, the report's own name, the dump's name,
    after the program started): the file they point to is never written,
    and the reports and the dump are written all the same, beside them."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    victim = os.path.join(directory, "victim")
    with open(victim, "w") as handle:
        handle.write("precious\n")
    env = {"CUMEMTRACE_FORMAT": "text,json", "CUMEMTRACE_QUIET": "1"}
    process, pid = start_waiting(directory, env=env)
    planted = [f"report-{pid}.json.tmp.{pid}", f"report-{pid}.txt.tmp.{pid}",
               f"report-{pid}.txt"]
    for name in planted:
        os.symlink(victim, os.path.join(directory, name))
    (rc, err), = release([process])
    check(rc == 0, f"exit status {rc}: {err[-500:]}")
    process, crashing = start_waiting(directory, "wait-segv", env=env)
    os.symlink(victim, os.path.join(directory, f"report-{crashing}.dump"))
    (rc, err), = release([process])
    check(rc == -signal.SIGSEGV, f"died of SIGSEGV: {rc} {err[-500:]}")
    with open(victim) as handle:
        check(handle.read() == "precious\n", "the file the links point to is untouched")
    for name in planted + [f"report-{crashing}.dump"]:
        check(os.path.islink(os.path.join(directory, name)), f"{name} is still the link planted")
    written = {
        f"report-{pid}.json": "a JSON report", f"report-{pid}-{pid}.txt": "the text report, "
        "beside the link at its name", f"report-{crashing}-{crashing}.dump": "the dump, beside "
        "the link at its name"}
    for name, what in written.items():
        path = os.path.join(directory, name)
        check(os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) > 100,
              f"{what}: {name} in {sorted(os.listdir(directory))}")
    leftovers = [n for n in os.listdir(directory) if ".tmp" in n and n not in planted]
    check(not leftovers, f"no temporary left behind: {leftovers}")


def test_shared_template(traced):
    """Processes sharing a template without %p each keep their own report
    and their own dump: 12 exit at once, 4 crash at once."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    env = {"CUMEMTRACE_OUTPUT": os.path.join(directory, "shared"), "CUMEMTRACE_QUIET": "1"}
    waiting = [start_waiting(directory, env=env) for _ in range(12)]
    results = release([process for process, _ in waiting])
    check(all(rc == 0 for rc, _ in results), f"all exit 0: {[rc for rc, _ in results]}")
    pids = set()
    for path in glob.glob(os.path.join(directory, "shared*.json")):
        with open(path) as handle:
            pids.add(json.load(handle)["process"]["pid"])
    check(pids == {pid for _, pid in waiting},
          f"12 reports, one per process: {len(pids)} in {sorted(os.listdir(directory))}")
    waiting = [start_waiting(directory, "wait-segv", env=env) for _ in range(4)]
    results = release([process for process, _ in waiting])
    check(all(rc == -signal.SIGSEGV for rc, _ in results), f"all crash: {results}")
    dumps = glob.glob(os.path.join(directory, "shared*.dump"))
    dumped = set()
    for path in dumps:
        with open(path) as handle:
            for line in handle:
                if line.startswith("pid "):
                    dumped.add(int(line.split()[1]))
                    break
    check(dumped == {pid for _, pid in waiting}, f"4 dumps, one per process: {dumps}")
    said = [line for _, err in results for line in err.splitlines() if "crash dump written" in line]
    check(len(said) == 4 and len({line.split()[-1] for line in said}) == 4,
          f"each names its own file: {said}")


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_file_mode(traced):
    """Reports and dumps hold the command line: 0600 unless
    CUMEMTRACE_FILE_MODE says otherwise; the command's -o likewise."""
    out, err, reports, _ = traced.run(HOSTILE, ["leak"], env={"CUMEMTRACE_FORMAT": "text,json"})
    for path in glob.glob(os.path.join(traced.dir, "report-*")):
        check(mode_of(path) == 0o600, f"{os.path.basename(path)}: {oct(mode_of(path))}")
    traced.run("tests/crash", ["segv-threads"], expect_rc=-11)
    for path in glob.glob(os.path.join(traced.dir, "*.dump")):
        check(mode_of(path) == 0o600, f"the dump: {oct(mode_of(path))}")
    old = os.umask(0o022)
    try:
        traced.run(HOSTILE, ["leak"], env={"CUMEMTRACE_FILE_MODE": "0640"})
        written = glob.glob(os.path.join(traced.dir, "report-*.json"))
        check(written and mode_of(written[0]) == 0o640, "CUMEMTRACE_FILE_MODE=0640 is used")
        good = written[0]
        out, err, reports, _ = traced.run(HOSTILE, ["leak"], env={"CUMEMTRACE_FILE_MODE": "rw-r--r--"})
        lines = [line for line in err.splitlines() if "CUMEMTRACE_FILE_MODE" in line]
        written = glob.glob(os.path.join(traced.dir, "report-*.json"))
        check(len(lines) == 1 and "using 0600" in lines[0] and mode_of(written[0]) == 0o600,
              f"a bad value: one line, and 0600: {lines}")
        target = os.path.join(traced.dir, "copy.txt")
        completed = tool("report", good, "-o", target)
        check(completed.returncode == 0 and mode_of(target) == 0o600,
              f"the command's -o: 0600: {completed.stderr!r}")
    finally:
        os.umask(old)


def test_command_output_special(traced):
    """-o naming a FIFO, a pipe (/dev/fd/N, a shell's >(...)), a link to one
    (/dev/stdout) or a character device writes to it as it is, and leaves it
    what it was; a regular file is replaced whole."""
    traced.run(HOSTILE, ["leak"], env={"CUMEMTRACE_QUIET": "1"})
    good = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    expected = tool("report", good).stdout
    check(expected.startswith("==== cumemtrace"), "the text report to compare with")
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")

    fifo = os.path.join(directory, "fifo")
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()))
    reader.start()
    completed = tool("report", good, "-o", fifo)
    reader.join(30)
    check(completed.returncode == 0 and received == [expected],
          f"-o FIFO: written through it: {completed.returncode} {completed.stderr!r}")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is still a FIFO")

    for command in (["report", good], ["html", good], ["export", "--format", "folded", good]):
        read_end, write_end = os.pipe()
        # Read while it writes: the page is larger than a pipe holds.
        chunks = []
        drain = threading.Thread(target=lambda: chunks.append(os.fdopen(read_end, "rb").read()))
        drain.start()
        completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), *command,
                                    "-o", f"/dev/fd/{write_end}"], pass_fds=[write_end],
                                   capture_output=True, timeout=120)
        os.close(write_end)
        drain.join(30)
        data = chunks[0] if chunks else b""
        check(completed.returncode == 0 and len(data) > 30,
              f"{command[0]} -o /dev/fd/N (a pipe): {completed.returncode} {completed.stderr!r}")

    # What /dev/stdout is, in a directory of our own: a build that replaced
    # it would replace this link, never /dev/stdout itself.
    stdout = os.path.join(directory, "stdout")
    os.symlink("/proc/self/fd/1", stdout)
    completed = tool("report", good, "-o", stdout)
    check(completed.returncode == 0 and completed.stdout == expected and os.path.islink(stdout),
          f"-o a link to /proc/self/fd/1: {completed.returncode} {completed.stderr!r}")

    if os.geteuid() == 0:
        null = os.path.join(directory, "null")
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        completed = tool("report", good, "-o", null)
        check(completed.returncode == 0 and stat.S_ISCHR(os.lstat(null).st_mode),
              f"-o a character device: written to, still a device: {completed.stderr!r}")

    regular = os.path.join(directory, "regular.txt")
    with open(regular, "w") as handle:
        handle.write("old contents, longer than nothing\n" * 1000)
    completed = tool("report", good, "-o", regular)
    with open(regular) as handle:
        check(completed.returncode == 0 and handle.read() == expected,
              "-o a regular file: replaced whole")
    check(sorted(os.listdir(directory)) == sorted(["fifo", "regular.txt", "stdout"] +
                                                  (["null"] if os.geteuid() == 0 else [])),
          f"nothing else left behind: {os.listdir(directory)}")


def test_fork_stress(traced):
    """Forks beside four allocating threads and a SIGUSR2 every 2 ms: every
    child exits (fork_stress.c counts the ones that hang or crash)."""
    for attempt in range(2):
        # Text: every snapshot and child report symbolized as JSON would be,
        # without validating hundreds of JSON files afterwards.
        out, err, reports, _ = traced.run("tests/fork_stress", ["3"],
                                          env={"CUMEMTRACE_QUIET": "1", "CUMEMTRACE_FORMAT": "text"})
        check(out.startswith("forks ") and out.split()[1] != "0" and
              " hung 0 crashed 0" in out, f"run {attempt + 1}: {out.strip()!r} {err[-500:]!r}")
        print(out.strip())


def test_stderr_reused(traced):
    """A program that closes fd 2 and opens a data file there: the file holds
    its 13 bytes only, and the summary goes to the stderr it started with."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    data = os.path.join(directory, "data")
    out, err, reports, _ = traced.run(HOSTILE, ["stderr-data", data])
    with open(data, "rb") as handle:
        contents = handle.read()
    check(contents == b"program data\n", f"the program's data is its own: {len(contents)} bytes")
    check("cumemtrace exit report" in err and "exit report written to" in err,
          f"the summary on the original stderr: {err[-300:]!r}")
    check(len(reports) == 1, "and the report written")


def dump_with_maps(traced, extra_lines):
    """A crash dump whose maps section also names `extra_lines` (paths)."""
    traced.run("tests/crash", ["segv-threads"], expect_rc=-11)
    dump = glob.glob(os.path.join(traced.dir, "*.dump"))[0]
    with open(dump) as handle:
        text = handle.read()
    added = "".join(f"7f0000{i:02x}0000-7f0000{i:02x}8000 r-xp 00000000 00:00 0 {path}\n"
                    for i, path in enumerate(extra_lines))
    with open(dump, "w") as handle:
        handle.write(text.replace("end-maps\n", added + "end-maps\n"))
    return dump


def test_dump_names_fifo(traced):
    """A dump whose maps name a FIFO or a device: every command that reads
    it finishes (the FIFO is never opened); reads are bounded."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    fifo = os.path.join(directory, "library.so")
    os.mkfifo(fifo)
    dump = dump_with_maps(traced, [fifo, "/dev/zero"])
    commands = [["report", dump], ["symbolize", dump], ["html", dump, "-o",
                os.path.join(directory, "page")],
                ["export", "--format", "folded", dump, "-o", os.path.join(directory, "f")]]
    for command in commands:
        try:
            completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), *command],
                                       capture_output=True, text=True, timeout=60)
            check(completed.returncode == 0, f"{command[0]}: {completed.stderr[-300:]!r}")
        except subprocess.TimeoutExpired:
            check(False, f"{command[0]} of a dump naming a FIFO hangs")
    sparse = os.path.join(directory, "huge.json")
    with open(sparse, "w") as handle:
        handle.truncate(5 << 30)
    completed = tool("report", sparse)
    check(completed.returncode == 2 and "larger than" in completed.stderr and
          completed.stderr.count("\n") == 1, f"a 5 GiB input: {completed.stderr!r}")


def test_signal_refused(traced):
    """CUMEMTRACE_SIGNAL refuses signals whose default action the program
    relies on, in one line; the program then dies of them as it would."""
    for value, number in (("TERM", 15), ("15", 15), ("SIGINT", 2), ("2", 2), ("13", 13),
                          ("HUP", 1), ("QUIT", 3), ("SEGV", 11)):
        out, err, reports, _ = traced.run(HOSTILE, ["raise", str(number)],
                                          env={"CUMEMTRACE_SIGNAL": value}, expect_rc=-number)
        lines = [line for line in err.splitlines() if "CUMEMTRACE_SIGNAL" in line]
        check(len(lines) == 1 and f"'{value}'" in lines[0] and "using USR2" in lines[0],
              f"{value}: one line: {lines}")
    out, err, reports, _ = traced.run(HOSTILE, ["raise", "10"], env={"CUMEMTRACE_SIGNAL": "USR1"})
    check(out == "survived signal 10\n" and "CUMEMTRACE_SIGNAL" not in err and
          any(r["reason"] == "signal" for r in reports), "USR1 is still a snapshot signal")


def test_utf8_argv(traced):
    """Arguments that are not UTF-8, or carry terminal escapes: the JSON
    report is valid UTF-8 (a byte that is not is written as the character
    of the same number, \\u00XX), and no control character reaches the
    terminal or the text report unescaped (\\xNN)."""
    args = [b"caf\xe9", b"\x1b[31mred\x1b[0m", "naïve".encode(), b"\x9b2J"]
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    completed = subprocess.run([os.path.join(support.BUILD, HOSTILE).encode(), b"leak", *args],
                               cwd=directory, capture_output=True, timeout=120,
                               env=support.traced_environment(directory,
                                                              CUMEMTRACE_FORMAT="text,json"))
    check(completed.returncode == 0, f"exit status {completed.returncode}")
    check(b"\x1b" not in completed.stderr and b"\x9b" not in completed.stderr,
          "no escape sequence on the terminal")
    check(b"\\x1b[31mred\\x1b[0m" in completed.stderr,
          f"the escape shown escaped: {completed.stderr[:600]!r}")
    path = glob.glob(os.path.join(directory, "report-*.json"))[0]
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        report = json.loads(raw.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError) as error:
        check(False, f"the JSON report is not valid UTF-8 JSON: {error}")
        return
    validate(report, path)
    check(report["process"]["argv"][2:] == ["café", "\x1b[31mred\x1b[0m", "naïve", "\x9b2J"],
          f"argv as characters: {report['process']['argv']!r}")
    text_path = path[:-len(".json")] + ".txt"
    with open(text_path, "rb") as handle:
        text = handle.read()
    check(b"\x1b" not in text and b"\xc2\x9b" not in text and b"\\x9b2J" in text,
          "the text report escapes them too")
    again = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report", path],
                           capture_output=True, timeout=120)
    check(again.returncode == 0 and again.stdout == text,
          "cumemtrace report prints the very text the library wrote")


def test_oom_retry_many(traced):
    """CUMEMTRACE_OOM=every over 300 OOMs, each retried successfully: every
    report is rewritten in its own file with the outcome (past 256 too), and
    the exit report counts 300 OOMs, however close together: a refusal after
    a retry that succeeded is a new one."""
    out, err, reports, _ = traced.run(HOSTILE, ["oom-retry", "300"],
                                      env={"SIMCUDA_MEMORY": "64M", "CUMEMTRACE_OOM": "every",
                                           "CUMEMTRACE_QUIET": "1", "CUMEMTRACE_SAMPLE_MS": "0"})
    check(out == "retries 300 of 300\n", f"the program: {out!r}")
    ooms = [r for r in reports if r["reason"] == "oom"]
    check(len(ooms) == 300, f"300 OOM reports: {len(ooms)}")
    outcomes = {r["event"]["retry"] for r in ooms}
    check(outcomes == {"succeeded"}, f"each says its retry succeeded: {outcomes}")
    failures = [r for r in reports if r["reason"] == "exit"][0]["failures"]
    numbers = [f["oom_number"] for f in failures["recent"]]
    check(failures["ooms"] == 300 and numbers == list(range(237, 301)),
          f"300 OOMs, numbered: {failures['ooms']} {numbers}")


def test_exec_report(traced):
    """A process that execs writes its report first; when the exec fails,
    the report at exit takes its place."""
    out, err, reports, _ = traced.run(HOSTILE, ["exec", "/bin/true"])
    check(len(reports) == 1 and reports[0]["reason"] == "exec" and
          reports[0]["blocks"]["total"] == 1 and reports[0]["blocks"]["items"][0]["size"] == 2 << 20,
          f"the report before exec: {[(r['reason'], r['blocks']['total']) for r in reports]}")
    out, err, reports, _ = traced.run(HOSTILE, ["execlp", "true"])
    check([r["reason"] for r in reports] == ["exec"], "execlp (variadic) too")
    out, err, reports, _ = traced.run(HOSTILE, ["exec", "/nonexistent/program"], expect_rc=8)
    check([r["reason"] for r in reports] == ["exit"],
          f"a failed exec: one report, at exit: {[r['reason'] for r in reports]} "
          f"{os.listdir(traced.dir)}")


def test_fork_child_threads(traced):
    """A forked child gets the tracer's threads (the snapshot thread, the
    live view's) at its first CUDA call, never in the fork handler: a child
    that uses no CUDA has none, and one made there can hang (fork_stress.c)."""
    out, err, reports, _ = traced.run(HOSTILE, ["fork-threads"])
    words = out.split()
    if not check(len(words) == 4 and words[:2] == ["child", "threads"], f"the child: {out!r}"):
        return
    before, after = int(words[2]), int(words[3])
    check(before == 1, f"no thread of ours before the child's first CUDA call: {before}")
    check(after >= 3, f"its snapshot thread and live view after it: {after}")


def test_live_escapes(traced):
    """What `cumemtrace live` shows of the watched process (its command
    line here) reaches the terminal with its control characters escaped."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    process = subprocess.Popen([os.path.join(support.BUILD, HOSTILE), "wait", "\x1b]0;owned\x07"],
                               cwd=directory, env=support.traced_environment(directory),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    pid = int(process.stdout.readline())
    try:
        shown = tool("live", str(pid), "--once")
    finally:
        release([process])
    check(shown.returncode == 0 and "\\x1b]0;owned\\x07" in shown.stdout and
          "\x1b" not in shown.stdout and "\x07" not in shown.stdout,
          f"escaped: {shown.returncode} {shown.stdout[:300]!r} {shown.stderr!r}")


def test_follow_long_preload(traced):
    """CUMEMTRACE_FOLLOW=0 takes the tracer out of a long LD_PRELOAD and
    keeps every other entry whole."""
    library = os.path.join(support.BUILD, "tests", "librtld_next_interposer.so")
    others = [os.path.dirname(library) + "/." * (400 + i) + "/" + os.path.basename(library)
              for i in range(12)]
    check(sum(map(len, others)) > 8192, "the list is longer than 8 KiB")
    env = {"CUMEMTRACE_FOLLOW": "0"}
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    environment_ = support.traced_environment(directory, **(env or {}))
    environment_["LD_PRELOAD"] += " " + " ".join(others)
    completed = subprocess.run(["/bin/sh", "-c", 'printf "%s" "$LD_PRELOAD"'], cwd=directory,
                               env=environment_, capture_output=True, text=True, timeout=60)
    kept = completed.stdout.split()
    check("libcumemtrace" not in completed.stdout and kept[-len(others):] == others,
          f"every other entry kept whole: {len(kept)} entries, "
          f"{sum(map(len, kept))} characters")


def test_run_output_dashdash(traced):
    """`cumemtrace run --output -- CMD`: --output has no value; nothing named --."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "run", "--output",
                                "--", os.path.join(support.BUILD, HOSTILE), "leak"],
                               cwd=directory, capture_output=True, text=True, timeout=60)
    check(completed.returncode == 1 and "missing value for: --output" in completed.stderr,
          f"a usage error: {completed.returncode} {completed.stderr!r}")
    check(os.listdir(directory) == [], f"no file written: {os.listdir(directory)}")


def test_two_copies(traced):
    """Two copies of the library in one process (an LD_PRELOAD exported from
    one installation, `cumemtrace run` of another; or both preloaded): one
    traces and reports, the other stands aside in one line."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-copies-")
    copy = os.path.join(directory, "copy", "libcumemtrace.so")
    os.makedirs(os.path.dirname(copy))
    with open(os.path.join(support.BUILD, "libcumemtrace.so"), "rb") as source, \
            open(copy, "wb") as target:
        target.write(source.read())
    environment = support.traced_environment(directory, preload=False)
    environment["LD_PRELOAD"] = " ".join(filter(None, [environment.get("LD_PRELOAD"), copy]))
    completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "run", "-o", "run",
                                "--", os.path.join(support.BUILD, "examples", "leak_loop"), "3"],
                               cwd=directory, env=environment, capture_output=True, text=True,
                               timeout=60)
    lines = [line for line in completed.stderr.splitlines() if line.startswith("cumemtrace:")]
    reports = sorted(name for name in os.listdir(directory) if name.endswith(".json"))
    check(completed.returncode == 0 and reports == ["run.json"],
          f"`run` beside a preloaded copy: one report: {completed.returncode} {reports} {lines}")
    check(sum("stands aside" in line for line in lines) == 1 and
          not any("live view" in line for line in lines),
          f"one line from the copy that stands aside, none about itself: {lines}")
    with open(os.path.join(directory, "run.json")) as handle:
        report = json.load(handle)
    check(report["blocks"]["total"] == 3, f"every block once: {report['blocks']['total']}")
    os.unlink(os.path.join(directory, "run.json"))
    environment["LD_PRELOAD"] += " " + os.path.join(support.BUILD, "libcumemtrace.so")
    environment["CUMEMTRACE_OUTPUT"] = os.path.join(directory, "both")
    completed = subprocess.run([os.path.join(support.BUILD, "examples", "leak_loop"), "3"],
                               cwd=directory, env=environment, capture_output=True, text=True,
                               timeout=60)
    reports = sorted(name for name in os.listdir(directory) if name.endswith(".json"))
    check(completed.returncode == 0 and reports == ["both.json"],
          f"both preloaded: one report: {completed.returncode} {reports} {completed.stderr!r}")


def test_report_duplicate_key(traced):
    """A report with a key twice in one object is refused in one line that
    names the key (which of the two would the reader mean?)."""
    out, err, reports, _ = traced.run("examples/leak_loop", ["2"], env={"CUMEMTRACE_QUIET": "1"})
    path = os.path.join(traced.dir, "twice.json")
    with open(path, "w") as handle:
        handle.write(json.dumps(reports[0])[:-1] + ', "reason": "oom"}')
    completed = tool("report", path)
    check(completed.returncode != 0 and completed.stderr.count("\n") == 1 and
          'the key "reason" appears twice' in completed.stderr,
          f"refused, naming the key: {completed.returncode} {completed.stderr!r}")


def test_huge_malloc(traced):
    """cudaMalloc(SIZE_MAX) fails on the simulator (out of memory, as on a
    GPU), and the counters stay exact."""
    out, err, reports, _ = traced.run(HOSTILE, ["huge"])
    check(out == "SIZE_MAX: cudaErrorMemoryAllocation\n", f"refused: {out!r}")
    report = by_reason(reports, "exit")
    device = device_counters(report, 0, "device")
    check(device and device["allocated_bytes"]["current"] == 1 << 20 and
          device["allocated_bytes"]["allocated"] == 1 << 20,
          f"1 MiB live, nothing wrapped: {device and device['allocated_bytes']}")


def test_exit_in_malloc(traced):
    """exit() from a SIGALRM handler that interrupted malloc: every run exits
    with the handler's status (never waits on malloc's lock), and what the
    program held is on record, in the dump that stands in for the report."""
    runs, hung, statuses = 30, 0, set()
    for attempt in range(runs):
        directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
        try:
            completed = subprocess.run([os.path.join(support.BUILD, HOSTILE), "exit-in-malloc"],
                                       cwd=directory, env=support.traced_environment(directory),
                                       capture_output=True, text=True, timeout=20)
            statuses.add(completed.returncode)
        except subprocess.TimeoutExpired:
            hung += 1
            continue
        dumps = glob.glob(os.path.join(directory, "*.dump"))
        check(len(dumps) == 1 and "a dump written in its place" in completed.stderr,
              f"run {attempt}: the dump, said in one line: {os.listdir(directory)} "
              f"{completed.stderr[-300:]!r}")
    check(hung == 0 and statuses == {3}, f"{runs} runs: {hung} hung, statuses {statuses}")


def test_output_descriptor(traced):
    """-o /dev/stdout, /dev/fd/1, /proc/self/fd/1 (or a link to one) with
    stdout redirected to a regular file: the report goes into that file,
    through the descriptor; no name is replaced."""
    traced.run(HOSTILE, ["leak"], env={"CUMEMTRACE_QUIET": "1"})
    good = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    expected = tool("report", good).stdout
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    link = os.path.join(directory, "stdout")
    os.symlink("/proc/self/fd/1", link)
    names = ["/dev/fd/1", "/proc/self/fd/1", link] + (["/dev/stdout"] if os.geteuid() != 0 else [])
    for name in names:
        target = os.path.join(directory, "file.txt")
        with open(target, "w") as handle:
            handle.write("before\n")
            handle.flush()
            completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "report",
                                        good, "-o", name], stdout=handle, stderr=subprocess.PIPE,
                                       text=True, timeout=60)
        with open(target) as handle:
            written = handle.read()
        check(completed.returncode == 0 and written == "before\n" + expected,
              f"-o {name} with stdout a file: {completed.returncode} {completed.stderr!r} "
              f"{len(written)} bytes")
        check(os.path.islink(link) and os.readlink(link) == "/proc/self/fd/1",
              f"-o {name}: the link is still the link")
    check(sorted(os.listdir(directory)) == ["file.txt", "stdout"],
          f"nothing else made: {os.listdir(directory)}")
    completed = tool("report", good, "-o", "/dev/fd/57")
    check(completed.returncode != 0 and completed.stderr.count("\n") == 1 and
          "/dev/fd/57" in completed.stderr, f"a descriptor not open: one line: {completed.stderr!r}")


def test_daemon_detached(traced):
    """A traced program that daemonizes (daemon(3), or fork + setsid +
    /dev/null on 0-2): whoever reads its output to the end (a $(...), a
    subprocess.run) is done when the program is, not when the daemon is."""
    for mode in ("daemon", "detach"):
        directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
        started = time.monotonic()
        completed = subprocess.run([os.path.join(support.BUILD, HOSTILE), mode], cwd=directory,
                                   env=support.traced_environment(directory),
                                   capture_output=True, timeout=60)
        took = time.monotonic() - started
        check(completed.returncode == 0 and took < 2.5,
              f"{mode}: the output ends with the program: {took:.2f} s (the daemon lives 3 s), "
              f"status {completed.returncode}")
        print(f"{mode}: {took:.2f} s")
    time.sleep(3)


def test_snapshot_wakeup(traced):
    """A program that closes every descriptor above 2 after its first CUDA
    call and opens its own: 1,000 SIGUSR2 write nothing into its files, and
    snapshots are still written."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    completed = subprocess.run([os.path.join(support.BUILD, HOSTILE), "close-fds", "1000"],
                               cwd=directory,
                               env=support.traced_environment(directory, CUMEMTRACE_QUIET="1",
                                                              CUMEMTRACE_FORMAT="text"),
                               capture_output=True, text=True, timeout=120)
    check(completed.returncode == 0 and completed.stdout == "bytes 0\n",
          f"nothing in the program's files: {completed.stdout!r} {completed.stderr[-300:]!r}")
    snapshots = glob.glob(os.path.join(directory, "report-*-signal-*.txt"))
    check(len(snapshots) >= 1, f"snapshots written: {sorted(os.listdir(directory))}")
    print(completed.stdout.strip(), f"under 1000 SIGUSR2; {len(snapshots)} snapshots")


def test_live_squatted(traced):
    """Another process holds the live view's name before the traced one
    starts it: the traced one says so in one line; `cumemtrace live PID`
    refuses whoever answers there (not PID), in one line."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    process, pid = start_waiting(directory, "wait-first")
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(f"\0cumemtrace-live-{pid}")
    squatter.listen(4)
    fake = json.dumps({"format": "cumemtrace-live", "version": 1, "pid": pid, "time_ms": 1,
                       "growth": {"mode": "time", "samples": 0}, "devices": [], "caches": [],
                       "stacks": [], "top": [], "growing": []}) + "\n"

    def answer():
        try:
            while True:
                connection, _ = squatter.accept()
                connection.sendall(fake.encode())
                connection.close()
        except OSError:
            pass

    server = threading.Thread(target=answer, daemon=True)
    server.start()
    try:
        process.stdin.write("go\n")
        process.stdin.flush()
        check(process.stdout.readline() == "ready\n", "the program made its first CUDA call")
        shown = tool("live", str(pid), "--once")
    finally:
        squatter.close()
        (rc, err), = release([process])
    lines = [line for line in err.splitlines() if "live view" in line]
    check(rc == 0 and len(lines) == 1 and f"cumemtrace-live-{pid}" in lines[0],
          f"the traced process says its name is taken: {lines} {err[-300:]!r}")
    check(shown.returncode != 0 and shown.stdout == "" and shown.stderr.count("\n") == 1 and
          f"pid {os.getpid()}" in shown.stderr,
          f"live refuses the impostor, naming it: {shown.returncode} {shown.stdout[:200]!r} "
          f"{shown.stderr!r}")


def test_live_peer(traced):
    """`cumemtrace live PID` still shows the process itself, its peer
    checked (SO_PEERCRED: PID, of PID's owner)."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    process, pid = start_waiting(directory)
    try:
        shown = tool("live", str(pid), "--once")
    finally:
        release([process])
    check(shown.returncode == 0 and f"pid {pid}" in shown.stdout, f"shown: {shown.stderr!r}")


def test_small_altstack(traced):
    """The program's SIGSEGV handler on a 4 KiB alternate stack, and a stack
    overflow: its handler runs (status 3) and the dump is written, on a
    stack of the tracer's own. As untraced: where the program's own handler
    cannot run there even untraced (ASan's frames are larger), the traced
    one must end the same way."""
    untraced = traced.run(HOSTILE, ["small-altstack"], preload=False, expect_rc=None)
    if untraced[0] != "handler ran\n":
        traced.run(HOSTILE, ["small-altstack"], expect_rc=-signal.SIGSEGV)
        print("the program's handler does not run untraced either: the same end checked")
        return
    out, err, reports, _ = traced.run(HOSTILE, ["small-altstack"], expect_rc=3)
    check(out == "handler ran\n", f"the program's handler ran: {out!r} {err[-300:]!r}")
    dumps = glob.glob(os.path.join(traced.dir, "*.dump"))
    check(len(dumps) == 1 and "crash dump written" in err, f"the dump: {os.listdir(traced.dir)}")
    with open(dumps[0]) as handle:
        check(handle.read().endswith("end\n"), "the dump is whole")


def test_descriptors(traced):
    """The tracer's descriptors sit above the program's: its first free one
    is the same before and after its first CUDA call. A program that takes
    every descriptor there is still leaves its memory on record: the dump,
    made ahead, in place of the report it left no descriptor for."""
    out, err, reports, _ = traced.run(HOSTILE, ["fds"], env={"CUMEMTRACE_QUIET": "1"})
    words = out.split()
    check(len(words) == 3 and words[1] == words[2],
          f"the first free descriptor is the program's: {out!r}")
    print(out.strip())
    dumps = glob.glob(os.path.join(traced.dir, "*.dump"))
    lines = [line for line in err.splitlines() if "cumemtrace" in line]
    check(len(reports) == 1 or (len(dumps) == 1 and any("a dump written in its place" in line
                                                         for line in lines)),
          f"the report or the dump: {os.listdir(traced.dir)} {lines}")


def test_settings_that_did_nothing(traced):
    """CUMEMTRACE_SIGNAL=32 or 33 (the C library's): one line, USR2 used.
    CUMEMTRACE_OUTPUT=dir/: the default name inside dir, not dir/.json."""
    for value in ("32", "33"):
        out, err, reports, _ = traced.run(HOSTILE, ["raise", "12"], env={"CUMEMTRACE_SIGNAL": value})
        lines = [line for line in err.splitlines() if "CUMEMTRACE_SIGNAL" in line]
        check(len(lines) == 1 and f"'{value}'" in lines[0] and "using USR2" in lines[0],
              f"{value}: one line: {lines}")
        check(out == "survived signal 12\n" and any(r["reason"] == "signal" for r in reports),
              f"{value}: USR2 takes snapshots")
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    inside = os.path.join(directory, "reports")
    os.mkdir(inside)
    completed = subprocess.run([os.path.join(support.BUILD, HOSTILE), "leak"], cwd=directory,
                               env=support.traced_environment(directory,
                                                              CUMEMTRACE_OUTPUT=inside + "/"),
                               capture_output=True, text=True, timeout=60)
    names = sorted(os.listdir(inside))
    check(completed.returncode == 0 and len(names) == 1 and
          names[0].startswith("cumemtrace-") and names[0].endswith(".json"),
          f"CUMEMTRACE_OUTPUT=dir/: {names}")


def test_pytest_marker_true(traced):
    """@pytest.mark.cuda_leaks(True): checked, nothing allowed (a 1-byte
    leak fails); cuda_leaks(False): not checked."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    with open(os.path.join(directory, "test_marker.py"), "w") as handle:
        handle.write(
            "import ctypes\nimport pytest\ncuda = ctypes.CDLL('libcudart.so.13')\nkept = []\n\n"
            "def allocate():\n    pointer = ctypes.c_void_p()\n"
            "    assert cuda.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(1)) == 0\n"
            "    kept.append(pointer)\n\n"
            "@pytest.mark.cuda_leaks(True)\ndef test_true():\n    allocate()\n\n"
            "@pytest.mark.cuda_leaks(False)\ndef test_false():\n    allocate()\n")
    out, err, _, _ = traced.run("cumemtrace", ["run", "--quiet", "--format=none", "--", sys.executable, "-m",
                                               "pytest", "-p", "no:cacheprovider", "-p", "cumemtrace_pytest",
                                               "-q", "--cuda-leaks", directory],
                                preload=False, expect_rc=None)
    text = out + err
    check("1 failed, 1 passed" in text and "test_true left" in text and "test_false left" not in text,
          f"cuda_leaks(True) allows nothing:\n{text[-2000:]}")


def run_in_directory(mode, tracer=True):
    """`hostile MODE` in a directory of its own, traced or not (a
    sanitizer's runtime preloaded either way); (completed, directory)."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-hostile-")
    env = support.traced_environment(directory, preload=tracer)
    completed = subprocess.run([os.path.join(support.BUILD, HOSTILE), mode], cwd=directory,
                               env=env, capture_output=True, text=True, timeout=120)
    return completed, directory


def test_address_cap(traced):
    """A program that caps its address space and then takes all of it: it
    ends as it does untraced, and its memory is on record: the dump, made
    ahead and written without memory, in place of the report there was no
    memory for (said in one line). Where it cannot end well untraced, the
    traced one ends the same way. Not under a sanitizer: its allocator has
    its address space reserved ahead, and the cap never bites."""
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        pytest.skip("under a sanitizer's allocator an address-space cap does not bite")
    untraced, _ = run_in_directory("address-cap", tracer=False)
    with_tracer, directory = run_in_directory("address-cap")
    check(with_tracer.returncode == untraced.returncode,
          f"exit status {with_tracer.returncode}, untraced {untraced.returncode}")
    if untraced.returncode != 0:
        print(f"untraced it ends with {untraced.returncode}: the same end checked")
        return
    names = os.listdir(directory)
    lines = [line for line in with_tracer.stderr.splitlines() if "exit report" in line]
    check(any(n.endswith(".json") for n in names) or
          (any(n.endswith(".dump") for n in names) and
           any("a dump written in its place" in line for line in lines)),
          f"the report or the dump in its place: {names} {lines}")
