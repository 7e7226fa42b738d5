"""The program's descriptors stay the program's: the files libdw keeps open
between reports sit above the program's range, close-on-exec, and are never
closed once the program has put files of its own at their numbers; no
descriptor of the tracer reaches an exec'd image or a child; a program with
few descriptors gets its CUDA calls answered as untraced, and its report."""

import os

import support
from support import check

PROGRAM = "tests/descriptors"


def library():
    """A library the test program has not loaded: dlopen changes its modules."""
    return os.path.join(support.BUILD, "tests", "libnative_thread.so")


def read(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return handle.read()


def test_reused_descriptor_kept(traced):
    """Reports, a program that closes 3..63 and writes its own file at fd 3,
    a dlopen, a report: the file holds both parts (the second report read
    the modules again and ended the first's libdw handles)."""
    settings = {"CUMEMTRACE_OOM": "every", "CUMEMTRACE_QUIET": "1"}
    out, err, reports, _ = traced.run(PROGRAM, ["reuse", library()], env=settings)
    check("write part2 ok" in out and read(traced.dir, "data.txt") == "part1\npart2\n",
          f"the program's file is whole: {out!r} {err[-500:]!r} "
          f"{read(traced.dir, 'data.txt')!r}")
    check(len(reports) == 3, f"two OOM reports and the exit report: {len(reports)}")


def test_squatted_descriptors_kept(traced):
    """A program that closed every descriptor up to 2047 and put its own file
    at all of those numbers: the next report, which reads the modules again,
    closes none of them."""
    settings = {"CUMEMTRACE_OOM": "every", "CUMEMTRACE_QUIET": "1"}
    out, err, reports, _ = traced.run(PROGRAM, ["squat", library()], env=settings)
    check(out.strip() == "lost 0", f"none of the program's descriptors closed: {out!r} "
                                   f"{err[-500:]!r}")


def test_exit_flush_kept(traced):
    """An OOM report, the program's stdio file at fd 3, a dlopen, exit: the
    exit report runs before stdio's last flush and must leave fd 3 open."""
    out, err, reports, _ = traced.run(PROGRAM, ["exit-stdio", library()],
                                      env={"CUMEMTRACE_QUIET": "1"})
    check(read(traced.dir, "results.txt") == "results of the run\n",
          f"the program's results: {read(traced.dir, 'results.txt')!r} {err[-500:]!r}")
    check(len(reports) == 2, f"the OOM and exit reports: {len(reports)}")


def numbers(line, label):
    words = line.split()
    check(words[:1] == [label], f"{label}: {line!r}")
    return [int(word) for word in words[1:]]


def test_exec_chain_descriptors(traced):
    """40 execs, each image with a report: the last holds the descriptors
    the first did (none piles up), and below the tracer's own the same ones
    as untraced."""
    lists = {}
    for generations in (0, 40):
        for tracer in (True, False):
            out, err, _, _ = traced.run(PROGRAM, ["exec", str(generations)], preload=tracer,
                                        env={"CUMEMTRACE_QUIET": "1"})
            lists[generations, tracer] = numbers(out.strip(), "fds")
    print(lists)
    check(lists[40, True] == lists[0, True],
          f"40 execs leave what one image holds: {lists[40, True]} vs {lists[0, True]}")
    untraced = lists[40, False]
    check([fd for fd in lists[40, True] if fd <= max(untraced)] == untraced,
          f"the program's range as untraced: {lists[40, True]} vs {untraced}")


def test_child_inherits_nothing(traced):
    """After a report, a child started with system() (not traced itself:
    CUMEMTRACE_FOLLOW=0) holds the descriptors it holds untraced."""
    lists = {}
    for tracer in (True, False):
        out, err, _, _ = traced.run(PROGRAM, ["system"], preload=tracer,
                                    env={"CUMEMTRACE_QUIET": "1", "CUMEMTRACE_FOLLOW": "0"})
        lists[tracer] = numbers(out.strip(), "child-fds")
    check(lists[True] == lists[False], f"the child's descriptors: {lists}")



def test_few_descriptors(traced):
    """RLIMIT_NOFILE 4 to 8 set before the first CUDA call: cudaMalloc
    answers as untraced (the tracer takes nothing the driver needs), and the
    block is on record (the exit report, or the dump in its place)."""
    for limit in (4, 5, 6, 7, 8, 16):
        out, err, _, _ = traced.run(PROGRAM, ["nofile", str(limit)], preload=False)
        untraced = out.strip()
        out, err, reports, _ = traced.run(PROGRAM, ["nofile", str(limit)], expect_rc=None,
                                          env={"CUMEMTRACE_QUIET": "1"})
        check(untraced == "cudaMalloc 0" and out.strip() == untraced,
              f"RLIMIT_NOFILE {limit}: {out.strip()!r} traced, {untraced!r} untraced; "
              f"{err[-400:]!r}")
        on_record = [name for name in os.listdir(traced.dir)
                     if name.endswith(".json") or name.endswith(".dump")]
        check(len(on_record) == 1, f"RLIMIT_NOFILE {limit}: the report or a dump: "
                                   f"{os.listdir(traced.dir)} {err[-400:]!r}")
        lines = [line for line in err.splitlines() if line.startswith("cumemtrace:")]
        check(len(lines) <= 2, f"RLIMIT_NOFILE {limit}: a line or two, not more: {lines}")


def test_exhausted_table_keeps_the_exit_report(traced):
    """A program that takes every descriptor it may (RLIMIT_NOFILE 64, then
    /dev/null until EMFILE) and returns: the exit report is written all the
    same (the tracer kept one descriptor for it), with the block held."""
    out, err, reports, _ = traced.run(PROGRAM, ["exhaust"], env={"CUMEMTRACE_QUIET": "1"})
    check(out.startswith("taken "), f"the program took what was left: {out!r}")
    exits = [r for r in reports if r["reason"] == "exit"]
    dumps = [name for name in os.listdir(traced.dir) if name.endswith(".dump")]
    check(len(exits) == 1 and not dumps, f"the exit report, not a dump: {os.listdir(traced.dir)} "
                                          f"{err[-400:]!r}")
    if exits:
        live = sum(g["bytes"] for g in exits[0]["live"])
        check(live >= 1 << 20, f"the 1 MiB block on record: {live}")
