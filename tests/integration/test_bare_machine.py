"""A run on a machine nobody prepared: the system's libunwind and libdw
hidden (an empty file bind-mounted over each, in a private mount namespace,
which needs root; skipped with the reason otherwise), native frames still
come with their function names and file:line, from a C program, a C++ one
and sixteen threads whose counts stay exact."""

import glob
import os
import shlex
import subprocess

import pytest

import support
from support import check, only, device_counters, entry_point, user_functions, line_of


HIDDEN = ("libunwind.so.8", "libdw.so.1")
LIBRARY_DIRECTORIES = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
                       "/usr/lib/aarch64-linux-gnu", "/usr/lib")


def hiding_command():
    """The shell words that run "$@" with every copy of HIDDEN covered by an
    empty file, in a mount namespace of its own, the tracer preloaded only
    into the program (not into unshare or the shell); or None, with why not."""
    if os.geteuid() != 0:
        return None, "hiding system libraries needs root (a private mount namespace)"
    unshare = "/usr/bin/unshare"
    if not os.path.exists(unshare):
        return None, "no unshare(1)"
    probe = subprocess.run([unshare, "-m", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return None, f"unshare -m refused here: {probe.stderr.strip()}"
    copies = sorted({os.path.realpath(p) for d in LIBRARY_DIRECTORIES for name in HIDDEN
                     for p in glob.glob(os.path.join(d, name))})
    mounts = "".join(f"mount --bind /dev/null {shlex.quote(p)} && " for p in copies)
    # Each hidden name fails to load in there, or the test proves nothing.
    checks = "".join(f"! python3 -c 'import ctypes; ctypes.CDLL(\"{name}\")' 2>/dev/null && "
                     for name in HIDDEN)
    first = [os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]] \
        if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") else []
    preload = " ".join(first + [os.path.join(support.BUILD, "libcumemtrace.so")])
    script = f"{mounts}{checks}exec env LD_PRELOAD={shlex.quote(preload)} \"$@\""
    return [unshare, "-m", "sh", "-c", script, "sh"], None


def run_bare(traced, program, args=()):
    command, why = hiding_command()
    if command is None:
        pytest.skip(why)
    path = os.path.join(support.BUILD, program)
    return traced.run(command[0], [*command[1:], path, *args], preload=False)


def frame_at(report, function, source, line):
    """Whether some native frame of the report is `function` at source:line."""
    return any(f["function"] == function and (f["file"] or "").endswith(source) and
               f["line"] == line for f in report.get("frames", []) if not f["python"])


def test_bare_c_program(traced):
    out, err, reports, _ = run_bare(traced, "examples/leak_loop", ["3"])
    report = only(reports)
    source = os.path.join(support.SOURCE, "examples", "leak_loop.c")
    leak = line_of(source, "never freed: the leak")
    check(frame_at(report, "leak_scratch_buffer", "examples/leak_loop.c", leak),
          f"the leak's frame named, at its line {leak}: {report.get('frames')}")
    leaked = [g for g in report.get("live", []) if g["bytes"] == 12 << 20]
    check(len(leaked) == 1 and
          user_functions(report, leaked[0]["stack"])[:3] == ["leak_scratch_buffer", "train_step",
                                                            "main"],
          f"the leaked blocks' stack, caller by caller: {leaked}")
    check(report["tracer"]["symbolizer"] == "built-in", f"symbolizer: {report['tracer']}")


def test_bare_cxx_program(traced):
    program = os.path.join(support.BUILD, "tests", "cxx_names")
    if not os.path.exists(program):
        pytest.skip("no C++ compiler at configure time")
    out, err, reports, _ = run_bare(traced, "tests/cxx_names", ["exit"])
    report = only(reports)
    source = os.path.join(support.SOURCE, "tests", "integration", "cxx_names.cc")
    line = line_of(source, "return cudaMalloc(&p, bytes)")
    names = [f for f in report.get("frames", []) if "4Pool4grab" in (f.get("mangled") or
                                                                      f["function"] or "")]
    check(len(names) == 1 and (names[0]["file"] or "").endswith("cxx_names.cc") and
          names[0]["line"] == line, f"Pool::grab named at cxx_names.cc:{line}: {names}")


def test_bare_threads(traced):
    out, err, reports, _ = run_bare(traced, "tests/threads")
    report = only(reports)
    counters = device_counters(report, 0, "device")
    check(counters["allocation"]["allocated"] == 160000 and
          counters["allocation"]["freed"] == 159984 and counters["allocation"]["current"] == 16,
          f"exact counts: {counters['allocation']}")
    check(entry_point(report, "cudaMalloc")["allocations"] == 160000, "all labelled cudaMalloc")
    source = os.path.join(support.SOURCE, "tests", "integration", "threads.c")
    line = line_of(source, "if (cudaMalloc(&p,")
    check(frame_at(report, "worker", "threads.c", line),
          f"the threads' frame named, at threads.c:{line}: {report.get('frames')}")
    check(all(value == 0 for value in report["tracer"]["lost"].values()),
          f"nothing lost: {report['tracer']['lost']}")


def test_library_loaded_by_descriptor(traced):
    """A library loaded by its descriptor (checked, then dlopen'ed as
    /proc/self/fd/N and the descriptor closed, as the PyTorch tracker is
    loaded from its cache): its frames are named by the file's real path,
    with function and file:line, never by the number ("46+0xafff")."""
    import sys
    library = os.path.join(support.BUILD, "tests", "libnative_thread.so")
    code = ("import ctypes, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "native = ctypes.CDLL(f'/proc/self/fd/{fd}')\n"
            "os.close(fd)\n"
            "native.allocate_in_native_thread.restype = ctypes.c_void_p\n"
            "print('kept', bool(native.allocate_in_native_thread(ctypes.c_size_t(3 << 20))))\n")
    out, err, reports, texts = traced.run(sys.executable, ["-c", code, library],
                                          env={"CUMEMTRACE_FORMAT": "text,json"})
    check(out.strip() == "kept True", f"the program ran: {out!r} {err[-500:]!r}")
    native = [f for f in only(reports)["frames"] if not f["python"]]
    named = [f for f in native if f["function"] == "allocate" and
             (f["file"] or "").endswith("native_thread.c")]
    check(named and named[0]["module"] == os.path.realpath(library),
          f"allocate at native_thread.c, in {library}: {named or native}")
    import re
    by_number = [l for t in texts.values() for l in t.splitlines() if re.search(r"[\[ ]\d+\+0x", l)]
    check(not by_number and not [f for f in native if "/fd/" in (f["module"] or "")],
          f"no frame named by the descriptor: {[f['module'] for f in native]} {by_number}")
