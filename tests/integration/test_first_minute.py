"""The first minute of a run: `cumemtrace run` (and `python -m cumemtrace
run`) refuse a bad option value or an unusable report location before the
program starts, and the library, preloaded bare, says what is wrong with its
settings when it loads, once for a tree of processes."""

import os
import subprocess
import sys
import tempfile

import support
from support import check, traced_environment, tool


def refused(completed, words):
    """A refusal: status 2, one line on stderr holding `words`."""
    return (completed.returncode == 2 and words in completed.stderr and
            completed.stderr.count("\n") == 1)


def test_run_refuses_before_starting():
    directory = tempfile.mkdtemp(prefix="cumemtrace-run-")
    marker = os.path.join(directory, "started")
    program = ["--", "sh", "-c", f"touch {marker}"]
    a_file = os.path.join(directory, "a-file")
    open(a_file, "w").close()
    for options, words in ((["-f", "htm"], "--format 'htm' is not a list of text, json"),
                           (["--events", "lots"], "--events 'lots' is not a count of events"),
                           (["--top", "abc"], "--top 'abc' is not a whole number from 1"),
                           (["--depth", "999"], "--depth '999' is not a whole number from 0 to 256"),
                           (["--signal", "TERM"], "--signal 'TERM' is a signal whose own action"),
                           (["--min-size", "big"], "--min-size 'big' is not a size"),
                           (["-o", "/nonexistent-cumemtrace/dir/rep"],
                            "--output '/nonexistent-cumemtrace/dir/rep' cannot hold the reports: "
                            "no directory '/nonexistent-cumemtrace/dir'"),
                           (["-o", directory], f"'{directory}' is a directory (end it with '/'"),
                           (["-o", a_file + "/rep"], f"'{a_file}' is not a directory"),
                           (["-o", ""], "--output '' is empty")):
        completed = tool("run", *options, *program)
        check(refused(completed, words),
              f"run {options}: status {completed.returncode}, {completed.stderr!r}")
        check(not os.path.exists(marker), f"run {options}: the program was not started")
    # A variable set outside run is checked as well, and named as typed.
    environment = dict(os.environ, CUMEMTRACE_TOP="many")
    environment.pop("LD_PRELOAD", None)
    completed = subprocess.run([os.path.join(support.BUILD, "cumemtrace"), "run", *program],
                               capture_output=True, text=True, env=environment)
    check(refused(completed, "CUMEMTRACE_TOP='many' is not a whole number"),
          f"CUMEMTRACE_TOP=many: {completed.returncode} {completed.stderr!r}")
    check(not os.path.exists(marker), "CUMEMTRACE_TOP=many: the program was not started")
    # Good values, a directory ending in '/': the program runs.
    completed = tool("run", "-o", directory + "/", "--top", "3", "-q", *program)
    check(completed.returncode == 0 and os.path.exists(marker),
          f"good values run the program: {completed.returncode} {completed.stderr!r}")


def test_run_format_none_says_snapshots_go():
    completed = tool("run", "-f", "none", "--", "true")
    check(completed.returncode == 0 and "--format none: the snapshot signal" in completed.stderr,
          f"-f none with the snapshot signal on: one line: {completed.stderr!r}")
    completed = tool("run", "-f", "none", "--signal", "off", "--", "true")
    check(completed.returncode == 0 and completed.stderr == "",
          f"-f none --signal off: nothing to say: {completed.stderr!r}")


def test_python_run_refuses_before_starting():
    """python -m cumemtrace run hands its options to the same checks."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-run-")
    marker = os.path.join(directory, "started")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import cumemtrace.__main__ as m; "
            "m.program = lambda: sys.argv[2]; "
            "m.main(['run', '--top', 'abc', '-c', 'open(sys.argv[3], \"w\")'], interpreter=True)")
    environment = dict(os.environ)
    environment.pop("LD_PRELOAD", None)
    completed = subprocess.run([sys.executable, "-c", code, os.path.join(support.SOURCE, "python"),
                                os.path.join(support.BUILD, "cumemtrace"), marker],
                               capture_output=True, text=True, env=environment, timeout=60)
    check(refused(completed, "--top 'abc' is not a whole number"),
          f"python -m cumemtrace run --top abc: {completed.returncode} {completed.stderr!r}")
    check(not os.path.exists(marker), "the script was not started")


def bare(command, directory, **settings):
    """`command` run with the library preloaded bare (no cumemtrace run)."""
    environment = traced_environment(directory, **settings)
    return subprocess.run(command, cwd=directory, env=environment, capture_output=True,
                          text=True, timeout=60)


def test_library_checks_at_load():
    directory = tempfile.mkdtemp(prefix="cumemtrace-load-")
    # No CUDA call at all: what is wrong is said when the library loads.
    completed = bare(["sh", "-c", "true; true; echo ran"], directory, CUMEMTRACE_QIUET="1",
                     CUMEMTRACE_TOP="abc", CUMEMTRACE_TEST_ANYTHING="1",
                     CUMEMTRACE_OUTPUT="/nonexistent-cumemtrace/rep")
    lines = completed.stderr.splitlines()
    check(completed.stdout == "ran\n", f"the program's output unchanged: {completed.stdout!r}")
    check(lines.count("cumemtrace: CUMEMTRACE_QIUET is not a setting (did you mean "
                      "CUMEMTRACE_QUIET?); ignored") == 1,
          f"a misspelt name, once for the tree of processes, with the closest: {lines}")
    check(sum("CUMEMTRACE_TOP='abc' is not a whole number" in line for line in lines) == 1,
          f"a malformed value named at load, once: {lines}")
    check(sum("no report can be written where CUMEMTRACE_OUTPUT says "
              "('/nonexistent-cumemtrace/rep'): no directory '/nonexistent-cumemtrace'" in line
              for line in lines) == 1, f"the unusable report location, at start: {lines}")
    check(len(lines) == 3, f"nothing else (CUMEMTRACE_TEST_* is the tests'): {lines}")
    check(os.listdir(directory) == [], "nothing written by a process without CUDA")
    # Settings that are right: not a word.
    completed = bare(["sh", "-c", "true; true"], directory, CUMEMTRACE_QUIET="1")
    check(completed.stderr == "", f"good settings: silent at load: {completed.stderr!r}")
    # A CUDA program: the bad value said once, not again at its first CUDA call.
    completed = bare([os.path.join(support.BUILD, "examples", "leak_loop"), "2"], directory,
                     CUMEMTRACE_TOP="abc", CUMEMTRACE_QUIET="1")
    lines = completed.stderr.splitlines()
    check(lines == ["cumemtrace: CUMEMTRACE_TOP='abc' is not a whole number from 1 to 100000; "
                    "using 5"], f"once per process: {lines}")
