"""The stacks of PyTorch's tensors (the stand-in allocator, stand_ins.py):
the Python frames each tensor was made under, in threads, in the autograd
engine's thread, under each CPython found, across fork()."""

import glob
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

import support
from stand_ins import (MiB, marked_lines, torch_env, run_scenario, scenario, site_line,
                       check_verdicts, IMPORT_TORCH_BLOCKS, CUDA_CALL, run_program)
from support import check, device_counters


def test_torch_blocks_threads(traced):
    """Four threads allocating through the stand-in (its lock, then ours)
    while the main thread takes snapshots (ours only): no deadlock, and the
    counts stay exact."""
    start = time.time()
    out, _, reports, _ = scenario(traced, "threads_and_snapshots")
    check(time.time() - start < 60, "done in time")
    check("snapshots" in out, f"finished: {out!r}")
    report = reports["exit"][0]
    counters = device_counters(report, 0, "torch_tensor")
    check(counters["allocation"]["current"] == 0 and
          counters["allocation"]["allocated"] == counters["allocation"]["freed"],
          f"every tensor freed and seen freed: {counters}")
    check(report["tracer"]["lost"]["unknown_free"] == 0, "no free of an unknown tensor")


def native_and_nodes(stack):
    """A stack's native frames' function names (those before its first
    Python frame), and the backward nodes whose apply() is among them."""
    native = [f["function"] or "" for f in itertools.takewhile(lambda f: not f["python"], stack)]
    found = (re.search(r"(\w+)::apply\(", name) for name in native)
    return native, [m.group(1) for m in found if m]


@pytest.mark.parametrize("depth, unwound", [("0", False), ("32", True)],
                         ids=["node_alone", "unwound"])
def test_torch_blocks_backward(traced, depth, unwound):
    """Tensors of backward nodes, made on the autograd engine's thread (no
    Python there): by default each stack is the node's apply() and the main
    thread's Python frames, nothing unwound; growth names the line that ran
    the backward. With CUMEMTRACE_BLOCK_DEPTH at the full depth, the native
    frames are unwound as on any other thread."""
    leak = marked_lines("LEAK", "backward_nodes")
    _, err, reports, _ = scenario(traced, "backward_nodes", CUMEMTRACE_BLOCK_DEPTH=depth)
    report = reports["exit"][0]
    check_verdicts(report, "backward_nodes")
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: [frames[i] for i in s["frames"]] for s in report["stacks"]}
    groups = [g for g in report["live"] if g["kind"] == "torch_tensor" and
              site_line(report, g["stack"]) in leak]
    check(sorted(g["bytes"] for g in groups) == [30 * MiB, 30 * MiB],
          f"depth {depth}: two live groups of 30 MiB at the LEAK line: "
          f"{[(g['bytes'], site_line(report, g['stack'])) for g in report['live']]}")
    nodes = set()
    for group in groups:
        stack = stacks[group["stack"]]
        native, applies = native_and_nodes(stack)
        nodes.update(applies)
        marker = stack[len(native)] if len(native) < len(stack) else {}
        check(marker.get("function") == "[main thread, at that moment]",
              f"depth {depth}: the main thread's frames follow the native ones: {marker}")
        if unwound:
            check(len(applies) == 1 and any("gradient" in name for name in native),
                  f"depth {depth}: the unwound frames, apply() among them: {native}")
        else:
            check(len(native) == 1 and len(applies) == 1,
                  f"depth {depth}: the node's apply() alone, nothing unwound: {native}")
    check(nodes == {"SimMmBackward", "SimAddBackward"},
          f"depth {depth}: each node's tensors under its own apply(): {nodes}")
    # The marker is a placeholder: no command shows it as a frame (the JSON
    # keeps it, hidden); the text says in words whose frames follow it.
    path = glob.glob(os.path.join(traced.dir, "report-*.json"))[0]
    command = os.path.join(support.BUILD, "cumemtrace")
    outputs = {}
    for args in (["report", path], ["report", path, "--all-frames"], ["merge", path, path],
                 ["diff", path, path], ["merge", path, path, "--all-frames", "--format", "json"]):
        done = subprocess.run([command] + args, capture_output=True, text=True)
        check(done.returncode == 0, f"{args}: {done.stderr}")
        outputs[" ".join(args[:1] + args[3:])] = done.stdout
    folded = os.path.join(traced.dir, "exported.folded")
    subprocess.run([command, "export", "--format", "folded", path, "-o", folded, "--all-frames"],
                   check=True)
    outputs["folded"] = open(folded).read()
    for name, output in outputs.items():
        check("[main thread, at that moment]" not in output and "runs no Python:" not in output,
              f"{name}: no placeholder shown as a frame: {output[:3000]}")
    check("this thread runs no Python; the main thread's frames at that moment" in outputs["report"]
          and "this thread runs no Python; the main thread's frames" in outputs["merge"],
          f"said in words instead: {outputs['merge'][:3000]}")
    marker = next(f for f in report["frames"] if f["python"] and f["line"] == 0)
    check(all(s["hidden"] and s["frames"].index(marker["id"]) in s["hidden"]
              for s in report["stacks"] if marker["id"] in s["frames"]),
          "the JSON keeps the marker, hidden")


def test_torch_blocks_backward_keyed(traced):
    """Many backward nodes to a call, run while the main thread waits at two
    places of different depths. After the engine thread's first tensors,
    each stack is found by its key (the node, and the reading of the main
    thread's frames it borrows), with no walk. Every kept gradient must still
    be under its own node's apply() and the line that ran it, with the calls
    around that line."""
    (near,), (far,) = marked_lines("NEAR", "backward_depths"), marked_lines("FAR",
                                                                           "backward_depths")
    _, err, reports, _ = scenario(traced, "backward_depths")
    report = reports["exit"][0]
    frames = {f["id"]: f for f in report["frames"]}
    stacks = {s["id"]: [frames[i] for i in s["frames"]] for s in report["stacks"]}
    found = {}
    for group in report["live"]:
        if group["kind"] != "torch_tensor":
            continue
        stack = stacks[group["stack"]]
        nodes = tuple(sorted(set(native_and_nodes(stack)[1])))
        calls = tuple(f["function"] for f in stack
                      if f["python"] and (f.get("file") or "").endswith("torch_blocks.py"))[:2]
        where = (site_line(report, group["stack"]), nodes, calls)
        found[where] = found.get(where, 0) + group["bytes"]
    want = {(near, ("SimMmBackward",), ("backward_depths", "<module>")): 20 * MiB,
            (near, ("SimAddBackward",), ("backward_depths", "<module>")): 20 * MiB,
            (far, ("SimMmBackward",), ("backward_deeper", "backward_depths")): 20 * MiB,
            (far, ("SimAddBackward",), ("backward_deeper", "backward_depths")): 20 * MiB}
    check(found == want, f"each gradient under its node and its line: {found}, {err[-300:]!r}")


def test_torch_threads_come_and_go(traced):
    """Two hundred short threads, each making its tensors from the same
    lines: the table of stacks known by their frames' key that each maps
    (some 200 KiB) is unmapped when it ends, and every tensor keeps its own
    line, found by the key or not. The tables touch some 12 KiB each: left
    behind, 200 threads grew the anonymous memory by some 3,000 KiB, against
    some 700 when they are not (the Python objects kept). Under a sanitizer,
    whose runtime keeps memory of its own for each thread, only the lines
    are checked."""
    out, _, reports, _ = scenario(traced, "threads_come_and_go")
    line = next(l for l in out.splitlines() if l.startswith("mapped: "))
    mapped = json.loads(line[len("mapped: "):])
    check(os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") or
          mapped["after"] - mapped["before"] < mapped["threads"] * 8,
          f"no table left behind by each of {mapped['threads']} threads (KiB): {mapped}")
    report = reports["exit"][0]
    by_line = {}
    for held in report["held_at_end"]:
        if held["kind"] == "torch_tensor":
            where = site_line(report, held["stack"])
            by_line[where] = by_line.get(where, 0) + held["blocks"]
    leak = marked_lines("LEAK", "threads_come_and_go")
    held = marked_lines("HELD", "threads_come_and_go")
    check(len(leak) == 1 and len(held) == 1 and
          by_line == {min(leak): 3 * 210, min(held): 210},
          f"3 tensors a thread at the LEAK line, 1 at the HELD line: {by_line}")


def check_frames_reused(out, reports, minimum=81):
    """frames_reused's tracebacks (or another scenario's, printed the same
    way), as it printed them, are the report's tensors' stacks, each with as
    many live blocks; at least `minimum` of them (frames_reused's: above 80)."""
    line = next(l for l in out.splitlines() if l.startswith("frames_reused: "))
    expected = {tuple(tuple(f) for f in entry[:-1]): entry[-1]
                for entry in json.loads(line[len("frames_reused: "):])}
    report = reports["exit"][0]
    frames = {f["id"]: f for f in report["frames"]}
    found = {}
    for stack in report["stacks"]:
        if stack["kind"] == "torch_tensor":
            where = tuple((frames[i]["file"], frames[i]["function"], frames[i]["line"])
                          for i in stack["frames"] if frames[i]["python"])
            found[where] = found.get(where, 0) + stack["live_blocks"]
    wrong = sorted(str((where[:2], expected.get(where), found.get(where)))
                   for where in set(expected) | set(found)
                   if expected.get(where) != found.get(where))
    check(len(expected) >= minimum and not wrong,
          f"{len(expected)} tracebacks; {len(wrong)} with other counts: {wrong[:4]}")


def test_torch_blocks_frames(traced):
    """Frames that a walk remembering the last one's could take for another
    (the same call depth at another line or function, generators, recursion,
    code compiled again at a freed code object's address): every tensor's
    stack holds exactly the Python frames the program saw, in two threads."""
    out, _, reports, _ = scenario(traced, "frames_reused")
    check_frames_reused(out, reports)


def under_each_python(traced, versions, name, **env):
    """Scenario `name` of torch_blocks.py under each CPython of `versions`
    found here: [(python, stdout, stderr, {reason: [reports]})]. Skips where
    there is none (a clean Debian 12 has only its 3.11), or where the
    stand-in for PyTorch was not built."""
    pythons = [p for v in versions for p in support.interpreters(v)]
    if not pythons:
        pytest.skip(f"no CPython {' or '.join(versions)} on PATH or in pyenv")
    scenario(traced, "held_at_end")          # skips where the stand-in was not built
    runs = []
    for python in pythons:
        print(f"{name} under {python}")
        out, err, reports, _ = run_scenario(traced, "torch_blocks.py", name, (),
                                            torch_env(**env), python=python)
        runs.append((python, out, err, reports))
    return runs


def test_torch_blocks_frames_watched(traced):
    """The same under each CPython from 3.12 on found here, whose code
    objects the tracer watches being freed (PyCode_AddWatcher): its frames'
    keys then read no code object, and a code object compiled again where
    one was freed must still find its own stack."""
    for python, out, err, reports in under_each_python(traced, ("3.12", "3.13", "3.14"),
                                                       "frames_reused", CUMEMTRACE_DEBUG="1"):
        check("watching code objects" in err, f"{python}: code objects watched: {err[-800:]!r}")
        check_frames_reused(out, reports)


DIRECT = "thread states read from _PyRuntime"


def test_torch_blocks_state_read_directly(traced):
    """From 3.11 on a tensor's event reads its thread's state and whether the
    interpreter runs straight from _PyRuntime, once the key there gave a
    thread the state the interpreter's call gave it: one debug line says so,
    once, and every tensor of two threads still has its own stack."""
    for python, out, err, reports in under_each_python(traced, ("3.11", "3.12", "3.13"),
                                                       "frames_reused", CUMEMTRACE_DEBUG="1"):
        check(err.count(DIRECT) == 1 and "through PyGILState" not in err,
              f"{python}: read directly, checked once: {err[-800:]!r}")
        check_frames_reused(out, reports)


def test_torch_blocks_state_read_directly_after_fork(traced):
    """A forked child's interpreter may make its key anew: the child checks
    again (a second debug line), and the tensors it keeps are at its line."""
    if sys.version_info < (3, 11):
        pytest.skip("3.10's frames are not keyed: the state is asked for as before")
    scenario(traced, "held_at_end")          # skips where the stand-in was not built
    program = (
        "import os, sys\n" + IMPORT_TORCH_BLOCKS +
        "def make(n):\n"
        "    return [t.Tensor(1 << 20) for _ in range(n)]  # MADE\n"
        "parent = make(4)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    child = make(5)\n"
        "    sys.exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert status == 0, status\n")
    _, err, reports, _ = run_program(traced, "torch_state_fork.py", program,
                                     CUMEMTRACE_DEBUG="1")
    check(err.count(DIRECT) == 2, f"checked in the parent and in the child: {err[-800:]!r}")
    lines = program.splitlines()
    made = lines.index("    return [t.Tensor(1 << 20) for _ in range(n)]  # MADE") + 1
    callers = {lines.index("parent = make(4)") + 1: "parent",
               lines.index("    child = make(5)") + 1: "child"}
    found = []
    for report in reports:
        frames = {f["id"]: f for f in report["frames"]}
        for stack in report["stacks"]:
            at = {frames[i]["line"] for i in stack["frames"]
                  if frames[i]["python"] and frames[i]["file"].endswith("torch_state_fork.py")}
            if stack["kind"] == "torch_tensor" and made in at:
                found.append((report["process"]["pid"],
                              [callers[n] for n in sorted(at & set(callers))],
                              stack["allocations"]))
    check(len({pid for pid, _, _ in found}) == 2 and
          sorted((who, n) for _, who, n in found) == [(["child"], 5), (["parent"], 4)],
          f"the parent's 4 tensors and the child's 5, each in its own report: {found}")


def test_torch_blocks_frames_no_watcher_left(traced):
    """A program that took every code watcher before the tracer could
    (3.12 on): one debug line says so, the keys take the code objects'
    filenames again, and every tensor still finds its own stack."""
    for python, out, err, reports in under_each_python(
            traced, ("3.12", "3.13", "3.14"), "frames_reused", CUMEMTRACE_DEBUG="1",
            TORCH_BLOCKS_TAKE_CODE_WATCHERS="1"):
        check("no code watcher left" in err and "watching code objects" not in err,
              f"{python}: no watcher left: {err[-800:]!r}")
        check_frames_reused(out, reports)


def test_torch_blocks_same_file_again(traced):
    """Code compiled again and again under one file name where the last
    one's code objects were freed, at one line or the next: each tensor's
    stack has its own line, under each CPython 3.12 or 3.13 found here, whose
    code objects' versions (co_version) tell the new ones from the freed.
    Not 3.14 on: the offsets those publish do not include co_version. 3.10
    and 3.11 have none, and may show the freed one's line."""
    for _, out, _, reports in under_each_python(traced, ("3.12", "3.13"), "same_file_again"):
        check_frames_reused(out, reports, minimum=2)


def test_torch_blocks_fork(traced):
    """fork() while threads allocate through the stand-in (a child inherits
    its lock as it was, as with PyTorch, so the child only makes CUDA calls
    of its own): every child exits, and writes its own report.

    Under AddressSanitizer the forks wait until no thread is inside an
    allocation: GCC 12's ASan has no fork handler for its allocator, so a
    child forked while a thread is in malloc waits for ever at its own next
    malloc of that size, traced or not (seen: the child's exit report,
    in libdw's strdup, 2 runs in 37)."""
    gate = "threading.Lock()" if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") \
        else "contextlib.nullcontext()"
    program = (
        "import contextlib, ctypes, os, signal, sys, threading, time\n" + IMPORT_TORCH_BLOCKS +
        "cudart = ctypes.CDLL('libcudart.so.13')\n"
        "# The first CUDA calls load libraries: a fork during a dlopen leaves the\n"
        "# child's loader inconsistent, traced or not (python_fork.py says so too).\n"
        "first = t.Tensor(1 << 20)\n" + CUDA_CALL +
        "del first  # a child's exit frees no tensor under a lock held at the fork\n"
        f"gate = {gate}\n"
        "stop = time.time() + 1.0\n"
        "def churn():\n"
        "    while time.time() < stop:\n"
        "        with gate:\n"
        "            x = [t.Tensor(64 << 10) for _ in range(4)]\n"
        "            del x\n"
        "workers = [threading.Thread(target=churn) for _ in range(3)]\n"
        "[w.start() for w in workers]\n"
        "children = 0\n"
        "while time.time() < stop:\n"
        "    with gate:\n"
        "        pid = os.fork()\n"
        "    if pid == 0:\n"
        "        signal.alarm(20)\n" + textwrap.indent(CUDA_CALL, " " * 8) +
        "        sys.exit(0)\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    assert status == 0, status\n"
        "    children += 1\n"
        "[w.join() for w in workers]\n"
        "print('children', children)\n")
    start = time.time()
    out, err, _, _ = run_program(traced, "torch_blocks_fork.py", program)
    check(out.startswith("children ") and int(out.split()[1]) > 0, f"children exited: {out!r}")
    check(time.time() - start < 60, "done in time")
