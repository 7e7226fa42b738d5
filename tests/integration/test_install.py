"""Installing cumemtrace, and the PyTorch tracker's cache, on the simulator.

install builds and installs with CMake and uses the installed command,
header and pkg-config file. pip_install installs the checkout with pip into
a fresh virtualenv, offline (--no-build-isolation --no-index, the
distribution's setuptools and wheel), and uses it as a user would: the
installed command, python -m cumemtrace, cumemtrace doctor and pytest
--cuda-leaks with no -p. PyTorch is played by a stand-in package made here
(stand_in_torch): tests/sim/c10's allocator and headers laid out as a
pip-installed torch, with CUDA's headers where pip's NVIDIA wheels put them
and the system's toolkit hidden from the builder
(CUMEMTRACE_NO_SYSTEM_CUDA=1), so the first run builds the real tracker from
them into the cache, and the report has PyTorch's blocks.

The tracker_* tests run python/cumemtrace/torch_tracker.py from the source
tree with a stand-in compiler (a script that counts its runs and copies the
tracker built for the stand-in), and the library against the cache it
fills."""

import glob
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import support
from support import check


SIM_VERSION = "0.0.0+sim"      # the stand-in's torch.__version__ (tests/sim/CMakeLists.txt)


def sim(*parts):
    return os.path.join(support.BUILD, "sim", *parts)


def need_stand_in():
    if not os.path.exists(sim("torch", "lib", "libc10_cuda.so")):
        pytest.skip("no C++ compiler: the stand-in for PyTorch was not built")


def cuda_include():
    """The CUDA toolkit's headers the build used."""
    for place in (os.environ.get("CUDAToolkit_ROOT", ""), "/usr/local/cuda",
                  os.path.dirname(os.path.dirname(shutil.which("nvcc") or "/x/x/x"))):
        if place and os.path.isfile(os.path.join(place, "include", "cuda_runtime_api.h")):
            return os.path.join(place, "include")
    raise SystemExit("CUDA's headers not found")


def stand_in_torch(site, version=SIM_VERSION, git="0123456789abcdef0123"):
    """A pip-like torch in the folder `site`: torch/{__init__,version}.py,
    lib/libc10_cuda.so (the stand-in allocator), include/ (its headers);
    and nvidia/cu13/include, where CUDA 13's wheels put CUDA's headers."""
    torch = os.path.join(site, "torch")
    os.makedirs(os.path.join(torch, "lib"), exist_ok=True)
    with open(os.path.join(torch, "__init__.py"), "w") as handle:
        handle.write(f"__version__ = {version!r}\n\n\nclass _C:\n"
                     "    _GLIBCXX_USE_CXX11_ABI = True\n")
    with open(os.path.join(torch, "version.py"), "w") as handle:
        handle.write(f"__version__ = '{version}'\ngit_version = '{git}'\n")
    shutil.copy(sim("torch", "lib", "libc10_cuda.so"), os.path.join(torch, "lib"))
    if not os.path.exists(os.path.join(torch, "include")):
        shutil.copytree(os.path.join(support.SOURCE, "tests", "sim", "c10", "include"),
                        os.path.join(torch, "include"))
    nvidia = os.path.join(site, "nvidia", "cu13")
    os.makedirs(nvidia, exist_ok=True)
    if not os.path.lexists(os.path.join(nvidia, "include")):
        os.symlink(cuda_include(), os.path.join(nvidia, "include"))
    return torch


def stand_in_compiler(folder):
    """A C++ compiler that takes a second, counts its runs in
    folder/compiled and writes the tracker built for the stand-in to -o;
    with STANDIN_FAIL set, fails as g++ does."""
    path = os.path.join(folder, "stand-in-c++")
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(f"""\
            #!/bin/sh
            echo $$ >> {folder}/compiled
            if [ -n "${{STANDIN_FAIL:-}}" ]; then
                echo "In file included from torch_tracker.cpp:28:" >&2
                echo "torch_tracker.cpp:70:5: error: 'snapshot' is not a member" >&2
                exit 1
            fi
            sleep 1
            while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
            cp {sim("torch", "libcumemtrace_torch.so")} "$out"
            """))
    os.chmod(path, 0o755)
    return path


def helper(command, site, cache, extra=None, python=sys.executable):
    """torch_tracker.py COMMAND... from the source tree, for the stand-in
    torch at `site`, the cache in `cache`: the finished process."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("CUMEMTRACE_", "CUDA_HOME"))}
    environment.update({"PYTHONPATH": site, "XDG_CACHE_HOME": cache,
                        "CUMEMTRACE_NO_SYSTEM_CUDA": "1", **(extra or {})})
    script = os.path.join(support.SOURCE, "python", "cumemtrace", "torch_tracker.py")
    return subprocess.Popen([python, script, *command], env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process):
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def compiled(folder):
    try:
        with open(os.path.join(folder, "compiled")) as handle:
            return len(handle.read().split())
    except FileNotFoundError:
        return 0


def trackers(cache):
    return sorted(glob.glob(os.path.join(cache, "cumemtrace", "libcumemtrace_torch-*.so")))


def torch_view(report):
    found = [c for c in report.get("caches", []) if c["kind"] == "torch_tensor"]
    return found[0]["view"] if found else None


def blocks_script():
    return os.path.join(support.SOURCE, "tests", "integration", "torch_blocks.py")


# ---- the tracker's cache ------------------------------------------------------

def test_tracker_key_mismatch(traced):
    """A tracker is built once per key: the same PyTorch finds it cached,
    another commit of it (git_version) or another version builds anew."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site, cache = os.path.join(scratch, "site"), os.path.join(scratch, "cache")
    stand_in_torch(site)
    cxx = {"CXX": stand_in_compiler(scratch)}
    rc, first, err = finish(helper(["ensure"], site, cache, cxx))
    check(rc == 0 and len(trackers(cache)) == 1 and first.strip() == trackers(cache)[0],
          f"built into the cache: {rc} {first!r} {err!r}")
    check("building libcumemtrace_torch.so for PyTorch 0.0.0+sim" in err,
          f"says it builds: {err!r}")
    rc, again, err = finish(helper(["ensure"], site, cache, cxx))
    check(rc == 0 and again == first and err == "" and compiled(scratch) == 1,
          f"the same PyTorch: cached, nothing built, nothing said: {again!r} {err!r}")
    stand_in_torch(site, git="fedcba9876543210")
    rc, other, err = finish(helper(["ensure"], site, cache, cxx))
    check(rc == 0 and other != first and compiled(scratch) == 2 and len(trackers(cache)) == 2,
          f"another commit: built anew: {other!r} {err!r}")
    stand_in_torch(site, version="0.0.1+sim")
    rc, third, err = finish(helper(["ensure"], site, cache, cxx))
    check(rc == 0 and "0.0.1+sim" in third and compiled(scratch) == 3,
          f"another version: built anew: {third!r} {err!r}")
    facts = open(first.strip()[:-3] + ".txt").read()
    check(f"cuda_headers: {site}/nvidia/cu13/include" in facts and "cxx11_abi: 1" in facts,
          f"its facts: the headers of pip's NVIDIA package, the ABI torch says: {facts!r}")


def test_tracker_concurrent(traced):
    """Two builds at once (two ranks starting together) build one library:
    the second waits for the first and finds it."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site, cache = os.path.join(scratch, "site"), os.path.join(scratch, "cache")
    stand_in_torch(site)
    cxx = {"CXX": stand_in_compiler(scratch)}
    results = [finish(p) for p in [helper(["ensure"], site, cache, cxx) for _ in range(3)]]
    paths = {out for _, out, _ in results}
    check(all(rc == 0 for rc, _, _ in results) and len(paths) == 1,
          f"every one has the same tracker: {results!r}")
    check(compiled(scratch) == 1, f"built once: {compiled(scratch)} compiler runs")
    check(len(trackers(cache)) == 1 and
          not glob.glob(os.path.join(cache, "cumemtrace", ".build-*")),
          f"one library, no partial file: {os.listdir(os.path.join(cache, 'cumemtrace'))}")
    check(sum("building" in err for _, _, err in results) == 1,
          f"one says it builds: {[err for _, _, err in results]!r}")


def test_tracker_build_fails(traced):
    """A failed build says why in one line (the compiler's first error and
    where all of it is); so do no compiler and no CUDA headers. The run
    goes on."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site, cache = os.path.join(scratch, "site"), os.path.join(scratch, "cache")
    stand_in_torch(site)
    cxx = {"CXX": stand_in_compiler(scratch), "STANDIN_FAIL": "1"}
    rc, out, err = finish(helper(["ensure"], site, cache, cxx))
    lines = [l for l in err.splitlines() if "building" not in l]
    check(rc == 1 and out == "" and len(lines) == 1 and "did not build" in lines[0] and
          "error: 'snapshot' is not a member" in lines[0] and ".log" in lines[0],
          f"one line, the first error, the log: {rc} {err!r}")
    log = glob.glob(os.path.join(cache, "cumemtrace", "*.log"))
    check(len(log) == 1 and "In file included" in open(log[0]).read(), f"the log: {log}")
    check(trackers(cache) == [], "nothing in the cache")

    rc, out, err = finish(helper(["ensure"], site, cache, {"CXX": "no-such-c++"}))
    check(rc == 1 and err.count("\n") == 1 and "install g++" in err,
          f"no compiler: one line naming the package: {err!r}")
    shutil.rmtree(os.path.join(site, "nvidia"))
    rc, out, err = finish(helper(["ensure"], site, cache, {"CXX": stand_in_compiler(scratch)}))
    check(rc == 1 and err.count("\n") == 1 and "CUDA's headers" in err and "CUDA_HOME" in err,
          f"no CUDA headers: one line saying where it looked: {err!r}")


def test_tracker_key_shared(traced):
    """The builder (torch_tracker.py) and the library (frameworks.c) name a
    version's tracker alike, for a long version and one with characters
    beyond ASCII too: the library finds what the builder made (and, the
    stand-in compiler's tracker being built for another version, says so)
    instead of saying none is cached."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    cxx = {"CXX": stand_in_compiler(scratch)}
    for version in ("2.7.0a0+" + "local" * 30, "2.7.0+caf\u00e9-\u00fcber"):
        site = tempfile.mkdtemp(dir=scratch)
        cache = tempfile.mkdtemp(dir=scratch)
        torch = stand_in_torch(site, version=version)
        rc, path, err = finish(helper(["ensure"], site, cache, cxx))
        check(rc == 0 and trackers(cache) == [path.strip()],
              f"{version!r}: built into the cache: {rc} {path!r} {err!r}")
        env = {"LD_LIBRARY_PATH": f"{sim()}:{torch}/lib", "XDG_CACHE_HOME": cache}
        _, err, _, _ = traced.run(sys.executable, [blocks_script(), "held_at_end"], env=env)
        lines = [line for line in err.splitlines() if "PyTorch's tensors are not traced" in line]
        check(len(lines) == 1 and "was built for PyTorch" in lines[0] and
              path.strip()[:120] in lines[0], f"{version!r}: the library found it: {lines}")


def test_tracker_cache_not_private(traced):
    """A cache directory another user can write, or owns, is refused: by the
    builder, and by the library, which never loads a tracker from it."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site, cache = os.path.join(scratch, "site"), os.path.join(scratch, "cache")
    torch = stand_in_torch(site)
    cxx = {"CXX": stand_in_compiler(scratch)}
    rc, path, _ = finish(helper(["ensure"], site, cache, cxx))
    folder = os.path.join(cache, "cumemtrace")
    check(rc == 0 and stat.S_IMODE(os.stat(folder).st_mode) == 0o700, "made private")
    env = {"LD_LIBRARY_PATH": f"{sim()}:{torch}/lib", "XDG_CACHE_HOME": cache,
           "CUMEMTRACE_QUIET": "1"}
    _, err, reports, _ = traced.run(sys.executable, [blocks_script(), "held_at_end"], env=env)
    check(reports and torch_view(reports[0]) == "blocks",
          f"the library loads the cached tracker: {err[-400:]!r}")

    os.chmod(folder, 0o777)
    rc, out, err = finish(helper(["ensure"], site, cache, cxx))
    check(rc == 1 and err.count("\n") == 1 and "writable by other users" in err,
          f"the builder refuses it, in one line: {err!r}")
    _, err, reports, _ = traced.run(sys.executable, [blocks_script(), "held_at_end"], env=env)
    lines = [l for l in err.splitlines() if "writable by other users; refused" in l]
    check(len(lines) == 1 and reports and torch_view(reports[0]) == "segments",
          f"the library refuses it, in one line: {err[-400:]!r}")
    os.chmod(folder, 0o700)
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)
        rc, out, err = finish(helper(["ensure"], site, cache, cxx))
        check(rc == 1 and err.count("\n") == 1 and "owned by uid 65534" in err,
              f"owned by another user: refused, in one line: {err!r}")
        _, err, reports, _ = traced.run(sys.executable, [blocks_script(), "held_at_end"], env=env)
        check(reports and torch_view(reports[0]) == "segments" and "owned by uid 65534" in err,
              f"the library too: {err[-400:]!r}")
        os.chown(folder, 0, 0)
    else:
        print("not root: a directory owned by another user cannot be made here; not tried")


def test_tracker_missing_says_command(traced):
    """A bare LD_PRELOAD run with nothing cached says in one line the
    command that builds it, for this very Python."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site = os.path.join(scratch, "site")
    torch = stand_in_torch(site)
    env = {"LD_LIBRARY_PATH": f"{sim()}:{torch}/lib",
           "XDG_CACHE_HOME": os.path.join(scratch, "cache"), "CUMEMTRACE_QUIET": "1"}
    _, err, reports, _ = traced.run(sys.executable, [blocks_script(), "held_at_end"], env=env)
    lines = [l for l in err.splitlines() if "no tracker for PyTorch 0.0.0+sim" in l]
    check(len(lines) == 1 and f"cumemtrace doctor --python {os.path.realpath(sys.executable)}"
          in lines[0], f"one line with the command: {err[-500:]!r}")
    check(reports and torch_view(reports[0]) == "segments", "the segment view")


def test_doctor_answers(traced):
    """doctor on one screen: a Python whose frames are read on any thread,
    one read only with the GIL (a stand-in Python that answers as 3.9), one
    that cannot be run; a PyTorch without a cached tracker (--no-build)."""
    need_stand_in()
    scratch = tempfile.mkdtemp()
    site = os.path.join(scratch, "site")
    stand_in_torch(site)
    command = os.path.join(support.BUILD, "cumemtrace")
    env = {"PYTHONPATH": site, "XDG_CACHE_HOME": os.path.join(scratch, "cache"),
           "CUMEMTRACE_NO_SYSTEM_CUDA": "1", "CUDA_HOME": ""}
    out, err, _, _ = traced.run(command, ["doctor", "--no-build", "--python", sys.executable], env=env,
                                preload=False)
    lines = out.splitlines()
    check(lines[0].startswith("cumemtrace ") and len(lines) == 9 and err == "",
          f"one line per part: {out!r} {err!r}")
    check(f"  library      {os.path.realpath(support.BUILD)}/libcumemtrace.so" in lines,
          f"the library: {out!r}")
    check(any(l.startswith("  stacks       built-in: ") and "libgcc_s.so.1" in l for l in lines) and
          any(l.startswith("  symbolizer   built-in: ") for l in lines),
          f"stacks and names from the tracer's own code, with libgcc's unwinder: {out!r}")
    check(any(l.startswith("  Python       3.") and "Python frames on every thread" in l
              for l in lines), f"this Python's frames: {out!r}")
    check(any(l.startswith("  PyTorch      0.0.0+sim ") and "cache segments only" in l and
              "no tracker: none cached" in l for l in lines), f"PyTorch, nothing cached: {out!r}")
    check("  CUDA driver  CUDA " in out, f"the simulator's driver: {out!r}")
    old = os.path.join(scratch, "python3.9")
    with open(old, "w") as handle:
        handle.write("#!/bin/sh\nprintf 'python 3.9.18 /usr/bin/python3.9\\ntorch none\\n"
                     "cupy none\\njax none\\n'\n")
    os.chmod(old, 0o755)
    out, err, _, _ = traced.run(command, ["doctor", "--python", old], preload=False)
    check(any("3.9.18" in l and "only where the allocating thread holds the GIL" in l
              for l in out.splitlines()), f"a Python read only with the GIL: {out!r}")
    out, err, _, _ = traced.run(command, ["doctor", "--python", "/nonexistent/python3"],
                                preload=False, expect_rc=2)
    check(out == "" and err == "cumemtrace doctor: cannot run --python '/nonexistent/python3': "
          "No such file or directory\n", f"a Python that is not there: one line: {out!r} {err!r}")


# ---- cmake --install ------------------------------------------------------------

def test_install(traced):
    """cmake --install into a prefix: the command finds the library there,
    and pkg-config gives flags that build a program against the header and
    the API-only library, which finds it at run time without
    LD_LIBRARY_PATH, does nothing untraced and reaches the tracer traced."""
    prefix = tempfile.mkdtemp(prefix="cumemtrace-prefix-")
    completed = subprocess.run(["cmake", "--install", support.BUILD, "--prefix", prefix],
                               capture_output=True, text=True, timeout=300)
    check(completed.returncode == 0, f"cmake --install: {completed.stderr[-1000:]}")
    for path in ("lib/libcumemtrace.so", "lib/libcumemtrace_api.so", "bin/cumemtrace",
                 "include/cumemtrace.h", "lib/pkgconfig/cumemtrace.pc",
                 "share/cumemtrace/python/cumemtrace/torch_tracker.py",
                 "share/cumemtrace/torch_tracker/torch_tracker.cpp"):
        check(os.path.isfile(os.path.join(prefix, path)), f"installed: {path}")
    installed = os.path.join(prefix, "bin", "cumemtrace")
    out, err, reports, _ = traced.run(installed, ["run", "--format", "json", "--",
                                                  os.path.join(support.BUILD, "examples", "leak_loop"), "2"],
                                      preload=False)
    check(len(reports) == 1 and reports[0]["live"] and
          reports[0]["live"][0]["bytes"] == 2 * (4 << 20),
          f"the installed command traces with the installed library: {err[-500:]!r}")
    out, err, _, _ = traced.run(installed, ["run", "--", sys.executable, "-c",
                                            "import cumemtrace_pytest, cumemtrace, os; "
                                            "print(cumemtrace_pytest.__file__, cumemtrace.traced(), "
                                            "os.environ['PYTEST_ADDOPTS'])"],
                                preload=False)
    check(out.startswith(os.path.join(prefix, "share", "cumemtrace", "python", "cumemtrace_pytest")) and
          out.endswith(" True -p cumemtrace_pytest\n"),
          f"run puts the installed Python packages on PYTHONPATH, the plugin in pytest's: "
          f"{out!r} {err[-300:]!r}")
    # Moved after installing: pkg-config's paths follow the .pc file.
    moved = prefix + "-moved"
    os.rename(prefix, moved)
    environment = dict(os.environ, PKG_CONFIG_PATH=os.path.join(moved, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "cumemtrace"], capture_output=True,
                           text=True, env=environment)
    check(flags.returncode == 0 and "/include" in flags.stdout and
          "-lcumemtrace_api" in flags.stdout and "-Wl,-rpath," in flags.stdout and
          moved in flags.stdout, f"pkg-config: {flags.returncode} {flags.stdout!r} {flags.stderr!r}")
    source = os.path.join(moved, "uses_api.c")
    with open(source, "w") as handle:
        handle.write('#include <stdio.h>\n#include <cumemtrace.h>\n'
                     'int main(void) { cumemtrace_mark("start");\n'
                     '  const char *version = cumemtrace_version();\n'
                     '  printf("version %s snapshot %d\\n", version ? version : "(not traced)",\n'
                     '         cumemtrace_snapshot(NULL)); return 0; }\n')
    program = os.path.join(moved, "uses_api")
    built = subprocess.run(["cc", "-Wall", "-Werror", source, "-o", program,
                            *flags.stdout.split()], capture_output=True, text=True)
    check(built.returncode == 0, f"compiled against the installed header: {built.stderr}")
    if built.returncode == 0:
        out, err, reports, _ = traced.run(program, preload=False, env={"LD_LIBRARY_PATH": ""})
        check(out == "version (not traced) snapshot -1\n" and not reports,
              f"linked, untraced: found without LD_LIBRARY_PATH, does nothing: {out!r} {err!r}")
        out, err, reports, _ = traced.run(os.path.join(moved, "bin", "cumemtrace"),
                                          ["run", "-f", "json", "--", program], preload=False)
        check(out == "version 0.1.0 snapshot 0\n" and
              "snapshot" in [r["reason"] for r in reports],
              f"traced: the calls reach the tracer: {out!r} {err[-300:]!r}")


# ---- pip install ----------------------------------------------------------------

def checkout_copy(target):
    """The checkout's files (what git has, or the tree without builds)."""
    source = support.SOURCE
    listed = subprocess.run(["git", "-C", source, "ls-files", "-co", "--exclude-standard"],
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.splitlines():
            if os.path.isfile(os.path.join(source, name)):
                os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
                shutil.copy2(os.path.join(source, name), os.path.join(target, name))
    else:
        shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True,
                        ignore=shutil.ignore_patterns("build", "build-*", ".git"))


def test_pip_install(traced):
    """pip install of the checkout into a fresh virtualenv, then the
    installed command, python -m cumemtrace (building the tracker on its
    first run only), cumemtrace doctor and pytest --cuda-leaks."""
    need_stand_in()
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        # pip builds its own library, never this build's sanitized one.
        pytest.skip("a sanitizer build: pip's own build would be tried again, unsanitized; not run")
    scratch = tempfile.mkdtemp()
    checkout, venv = os.path.join(scratch, "checkout"), os.path.join(scratch, "venv")
    checkout_copy(checkout)
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                          capture_output=True, text=True)
    if made.returncode != 0:
        check(False, f"python3 -m venv (python3-venv): {made.stderr[-500:]}")
        return
    python, command = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "cumemtrace")
    # The C build without optimization or debug information: the quickest.
    environment = dict(os.environ, CMAKE_BUILD_TYPE="Quick", CMAKE_BUILD_PARALLEL_LEVEL="2")
    environment.pop("LD_PRELOAD", None)
    started = time.monotonic()
    installed = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation",
                                "--no-index", checkout], capture_output=True, text=True,
                               env=environment, timeout=600)
    print(f"pip install: {time.monotonic() - started:.1f} s")
    if not check(installed.returncode == 0 and os.access(command, os.X_OK),
                 f"pip install: {installed.stdout[-1500:]} {installed.stderr[-1500:]}"):
        return
    site = subprocess.run([python, "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True).stdout.strip()
    cache = os.path.join(scratch, "cache")
    path = f"{os.path.join(venv, 'bin')}:{os.environ.get('PATH', '')}"
    # The installed command, with its own library.
    env = {"PATH": path, "XDG_CACHE_HOME": cache, "CUMEMTRACE_NO_SYSTEM_CUDA": "1",
           "CUDA_HOME": ""}
    out, err, reports, _ = traced.run(command, ["run", "-f", "json", "--",
                                                os.path.join(support.BUILD, "examples", "leak_loop"),
                                                "2"], env=env, preload=False)
    check(len(reports) == 1 and reports[0]["live"] and
          reports[0]["live"][0]["bytes"] == 2 * (4 << 20), f"cumemtrace run: {err[-500:]!r}")
    torch = stand_in_torch(site)

    # python -m cumemtrace run SCRIPT: this Python, the tracker built first.
    env.update({"LD_LIBRARY_PATH": f"{sim()}:{torch}/lib", "CUMEMTRACE_QUIET": "1"})
    out, err, reports, _ = traced.run(python, ["-m", "cumemtrace", "run", "-f", "json", blocks_script(),
                                               "held_at_end"], env=env, preload=False)
    check("building libcumemtrace_torch.so for PyTorch 0.0.0+sim" in err and
          len(trackers(cache)) == 1, f"the first run builds the tracker: {err[-800:]!r}")
    check(len(reports) == 1 and torch_view(reports[0]) == "blocks",
          f"and records PyTorch's blocks: {err[-800:]!r}")
    out, err, reports, _ = traced.run(command, ["run", "-f", "json", "--", python, blocks_script(),
                                                "held_at_end"], env=env, preload=False)
    check("building" not in err and len(reports) == 1 and torch_view(reports[0]) == "blocks",
          f"the second builds nothing, and records the blocks: {err[-800:]!r}")
    out, err, reports, _ = traced.run(python, ["-c", "import cumemtrace; print(cumemtrace.traced(), "
                                               "cumemtrace.mark('m'), cumemtrace.snapshot())"],
                                      env=env, preload=False)
    check(out == "False None False\n", f"mark() and snapshot() untraced do nothing: {out!r}")

    # doctor: one screen, the installed library, the cached tracker.
    out, err, _, _ = traced.run(command, ["doctor"], env=env, preload=False)
    print(out)
    check(f"library      {os.path.realpath(site)}/cumemtrace/_prefix/lib/libcumemtrace.so" in out,
          f"doctor: the installed library: {out!r}")
    check("tracker cached" in out and f"CUDA headers from {site}/nvidia/cu13/include" in out,
          f"doctor: the cached tracker and its headers: {out!r} {err!r}")
    check("CUDA driver  CUDA " in out and "Python       3." in out and len(out.splitlines()) < 24,
          f"doctor: the driver, the Python, one screen: {out!r}")

    # pytest --cuda-leaks, no -p: the entry point; and its ini setting.
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_leaks")
    out, err, _, _ = traced.run(command, ["run", "-f", "none", "--", python, "-m", "pytest", "-q",
                                          "-p", "no:cacheprovider", "--cuda-leaks", suite],
                                env=env, preload=False, expect_rc=1)
    check("test_leaks left 4.00 MiB of GPU memory held" in out,
          f"pytest --cuda-leaks: {out[-1500:]!r} {err[-500:]!r}")
    tests = os.path.join(scratch, "suite")
    shutil.copytree(suite, tests)
    with open(os.path.join(tests, "pytest.ini"), "w") as handle:
        handle.write("[pytest]\ncuda_leaks = true\n")
    out, err, _, _ = traced.run(python, ["-m", "cumemtrace", "run", "-f", "none", "-m", "pytest", "-q",
                                         "-p", "no:cacheprovider", tests], env=env, preload=False,
                                expect_rc=1)
    check("test_leaks left 4.00 MiB of GPU memory held" in out,
          f"cuda_leaks = true in pytest.ini: {out[-1500:]!r} {err[-500:]!r}")


def test_wheel_without_wheel():
    """A Python with neither the wheel package nor a setuptools that makes
    wheels itself (pyenv's, conda's, uv's): setup.py says in one line what to
    install, not a traceback of its imports; `build` still works there."""
    blocker = tempfile.mkdtemp(prefix="cumemtrace-nowheel-")
    # What such a Python has: no wheel, no setuptools.command.bdist_wheel.
    with open(os.path.join(blocker, "sitecustomize.py"), "w") as handle:
        handle.write("import sys\n"
                     "sys.modules['wheel'] = sys.modules['wheel.bdist_wheel'] = None\n"
                     "sys.modules['setuptools.command.bdist_wheel'] = None\n")
    environment = dict(os.environ, PYTHONPATH=blocker)
    environment.pop("LD_PRELOAD", None)
    completed = subprocess.run([sys.executable, os.path.join(support.SOURCE, "setup.py"),
                                "bdist_wheel"], cwd=blocker, capture_output=True, text=True,
                               env=environment, timeout=120)
    check(completed.returncode == 1 and "Traceback" not in completed.stderr and
          completed.stderr.count("\n") <= 1 and
          f"{sys.executable} -m pip install wheel" in completed.stderr,
          f"one line naming what to install: {completed.returncode} {completed.stderr!r}")
    # The way users meet it: pip, which asks for the metadata first.
    completed = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                                "--no-deps", "--no-index", "-w", blocker, support.SOURCE],
                               cwd=blocker, capture_output=True, text=True, env=environment,
                               timeout=300)
    said = completed.stdout + completed.stderr
    check(completed.returncode != 0 and f"{sys.executable} -m pip install wheel" in said and
          "invalid command" not in said and "Traceback" not in said,
          f"pip wheel says what to install: {completed.returncode} {said[-1500:]!r}")
    completed = subprocess.run([sys.executable, os.path.join(support.SOURCE, "setup.py"),
                                "--version"], cwd=blocker, capture_output=True, text=True,
                               env=environment, timeout=120)
    check(completed.returncode == 0 and completed.stdout.strip()[:1].isdigit(),
          f"setup.py itself loads without wheel: {completed.stdout!r} {completed.stderr[-300:]!r}")
