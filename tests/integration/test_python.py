"""Python programs under the tracer: their frames in stacks (under every
CPython found here), fork, PyTorch's counters, and the pytest plugin."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import support
from support import python_stack, check, only, line_of


def test_pytest_plugin(traced):
    """python/cumemtrace_pytest in a suite run under the tracer: the leaking
    test fails naming its line, the growing one fails with --cuda-leaks-repeat,
    a cache filled once and a clean test pass; without the tracer, one line."""
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_leaks")
    script = os.path.join(suite, "test_gpu.py")
    tool_path = os.path.join(support.BUILD, "cumemtrace")

    def run_suite(*options, under_tracer=True):
        command = [tool_path, "run", "--quiet", "--format=none", "--"] if under_tracer else []
        command += [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "cumemtrace_pytest",
                    "-q", *options, suite]
        out, err, _, _ = traced.run(command[0], command[1:], preload=False, expect_rc=None,
                                    env={} if under_tracer else {"PYTHONPATH": os.path.join(support.SOURCE, "python")})
        return out + err

    allocate_line = line_of(script, "assert cuda.cudaMalloc")
    text = run_suite("--cuda-leaks")
    with open(os.path.join(support.BUILD, "pytest-leaks.txt"), "w") as handle:
        handle.write(text)
    check(f"test_leaks left 4.00 MiB of GPU memory held:\n  4.00 MiB from {script}:{allocate_line} in "
          f"allocate < test_leaks:{line_of(script, 'LEAK-LINE')} (device via cudaMalloc)" in text,
          f"the leaking test fails, naming its line:\n{text}")
    failures = text.split("FAILURES")[-1].split("cumemtrace: GPU memory at the end")[0]
    check("3 failed, 2 passed" in text and "FAILED" in text and "test_clean" not in failures and
          "test_fills_a_cache_once" not in failures,
          f"the clean test and the one within its allowance pass:\n{text}")
    check("assert (1 + 1) == 3" in text and "test_fails_on_its_own left" not in text,
          "a test failing on its own is reported as such")
    # At the session's end: what module globals keep (the leaking test's
    # list, the cache), by line, and the tracer's growth verdict.
    summary = text.split("cumemtrace: GPU memory at the end of the session", 1)[-1]
    check("held at the end of the session: 14.0 MiB:\n" in summary and
          f"  4.00 MiB from {script}:{allocate_line} in allocate < test_leaks:"
          f"{line_of(script, 'LEAK-LINE')} (device via cudaMalloc)" in summary and
          f"  8.00 MiB from {script}:{allocate_line} in allocate < workspace:"
          f"{line_of(script, 'CACHE-LINE')}" in summary and "\ngrowing: none" in summary,
          f"the session's summary: what globals keep at its end, by line:\n{text}")
    text = run_suite("--cuda-leaks-repeat=3")
    check(f"test_grows holds more GPU memory at each of 3 more runs: 1.00 MiB a run, 3.00 MiB in all:\n"
          f"  3.00 MiB from {script}:{allocate_line} in allocate < test_grows:{line_of(script, 'GROW-LINE')}"
          in text and "test_fills_a_cache_once holds" not in text and "3 failed, 2 passed" in text,
          f"--cuda-leaks-repeat: what grows at every run fails, a cache filled once does not:\n{text}")
    text = run_suite()
    check("1 failed, 4 passed" in text, f"no option: the plugin only watches:\n{text}")
    text = run_suite("--cuda-leaks", under_tracer=False)
    check("--cuda-leaks needs the tracer: run pytest under `cumemtrace run" in text and
          "no tests ran" not in text, f"without the tracer: one line:\n{text}")
    # What counts comes from the report: a framework's cache segments do not
    # where its blocks are recorded; they do where they are all there is.
    probe = (
        "import cumemtrace_pytest as p\n"
        "live = [{'stack': 1, 'kind': 'device', 'api': 'cudaMalloc', 'bytes': 100},\n"
        "        {'stack': 2, 'kind': 'torch_tensor', 'api': 'torch', 'bytes': 30},\n"
        "        {'stack': 3, 'kind': 'vmm_mapping', 'api': 'cuMemMap', 'bytes': 7}]\n"
        "stacks = [{'id': 1, 'cache_segment': 'torch_tensor'}, {'id': 2, 'cache_segment': None}]\n"
        "for view in ('blocks', 'segments'):\n"
        "    report = {'live': live, 'stacks': stacks, 'caches': [{'kind': 'torch_tensor', 'view': view}]}\n"
        "    print(view, sum(p.held(report).values()))\n"
        "print('old', sum(p.held({'live': live, 'stacks': [{'id': 1}]}).values()))\n"
        "ended = {'live': live, 'stacks': stacks, 'program_end': {'time_ms': 5},\n"
        "         'held_at_end': [{'stack': 2, 'kind': 'torch_tensor', 'api': 'torch', 'bytes': 500}]}\n"
        "print('end', sum(p.held(ended).values()))\n")
    counted = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(support.SOURCE, "python")))
    check(counted.stdout.split("\n")[:4] == ["blocks 30", "segments 130", "old 130", "end 500"],
          f"cache segments count only where blocks are unknown; a report of a program that "
          f"ended counts what it held at its end: {counted.stdout!r} {counted.stderr[-300:]!r}")
    # The growing sites' rates, as the reports say them.
    probe = (
        "import cumemtrace_pytest as p\n"
        "entry = {'stack': 9, 'rate': 3 << 30, 'live_bytes': 78 << 20, 'calls': 76,\n"
        "         'rate_per_call': 1 << 20}\n"
        "for mode, fields in (('work', {}), ('marks', {}), ('work', {'calls': None})):\n"
        "    growth = {'mode': mode, 'samples': 40, 'growing': [dict(entry, **fields)]}\n"
        "    print(p.session_summary({'growth': growth})[-1])\n")
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.join(support.SOURCE, "python")))
    check([l.split(", from")[0] for l in said.stdout.splitlines()] ==
          ["  +1.00 MiB a call over 76 calls, +3.00 GiB per second, 78.0 MiB now",
           "  +3.00 GiB per mark, 78.0 MiB now", "  +3.00 GiB per second, 78.0 MiB now"],
          f"the session's growing sites: per call, then per second; per mark; per second alone "
          f"(an earlier report): {said.stdout!r} {said.stderr[-300:]!r}")


def check_python_sites(report, script, line, err):
    """The site rule (src/report/frames.h) on a Python program calling the
    simulator's libcudart through ctypes: the site is the Python line of the
    cudaMalloc call, not libffi's frame; libffi, _ctypes and threading.py are
    hidden; the cudaMalloc frame and the user's lines are not."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    for group in report.get("live", []):
        stack = stacks[group["stack"]]
        site = frames[stack["frames"][stack["site"]]]
        if group["bytes"] in (3 << 20, 5 << 20, 7 << 20, 22 << 20, 13 << 20):
            check(site["python"] and site["file"] == script and site["line"] == line,
                  f"{group['bytes'] >> 20} MiB: the site is the ALLOCATE-LINE: {site}")
        hidden = [frames[stack["frames"][i]] for i in stack["hidden"]]
        shown = [frames[f] for i, f in enumerate(stack["frames"]) if i not in stack["hidden"]]
        check(shown[0]["function"] == "cudaMalloc" and shown[0]["origin"] == "cuda",
              f"the call into CUDA is shown: {shown[:1]}")
        check(all(f["origin"] == "user" or f is shown[0] for f in shown),
              f"only the user's frames besides it: {[(f['function'], f['origin']) for f in shown]}")
        # (a marker, line 0, is a placeholder: always hidden)
        check(all(f["origin"] in ("interpreter", "startup", "system") or
                  (f["python"] and f["line"] == 0) for f in hidden),
              f"hidden: the interpreter's, start-up: {[(f['function'], f['module'], f['origin']) for f in hidden]}")
        if group["bytes"] == 7 << 20:
            check(any(f["python"] and f["file"].endswith("threading.py") for f in hidden),
                  "threading.py's frames are Python's own, hidden")
    check(f"at {script}:{line} in allocate" in err, "the summary names the site first")
    check("frames hidden: interpreter" in err and "libffi" not in err,
          f"and hides libffi's and _ctypes' frames: {err[-1500:]}")


def check_python_frames(traced, python):
    """python_frames.py's allocations under `python`, each with its Python frames."""
    script = os.path.join(support.SOURCE, "tests", "integration", "python_frames.py")
    with open(script) as handle:
        line = next(i for i, text in enumerate(handle, 1) if "ALLOCATE-LINE" in text)
    with open(script) as handle:
        marked = {text.split("# ")[-1].strip(): i for i, text in enumerate(handle, 1)
                  if "-LINE" in text or "-OF-TWO" in text}
    native_line = marked["NATIVE-THREAD-LINE"]
    out, err, reports, texts = traced.run(python, [script, os.path.join(support.BUILD, "tests", "x")],
                                          env={"CUMEMTRACE_FORMAT": "json,text"})
    text = "".join(texts.values())
    check("python frames: done" in out, f"{python} ran: {out!r} {err[-500:]!r}")
    check("not laid out as expected" not in err and "not as expected" not in err,
          f"{python}: layout accepted: {err[-300:]!r}")
    report = only(reports)
    expected = {3 << 20: ["allocate", "leak_in_python", "<module>"],       # GIL held
                5 << 20: ["allocate", "released", "<module>"],             # GIL released
                7 << 20: ["allocate", "in_thread", "run"],                 # another thread
                22 << 20: ["allocate", "produce", "<module>"],             # a generator
                13 << 20: ["allocate", "größe", "<module>"]}               # not ASCII
    for size, names in expected.items():
        python_frames = python_stack(report, size)
        seen = [f["function"].split(".")[-1] for f in python_frames]
        check(seen[:len(names)] == names, f"{python}: {size >> 20} MiB held by {names}: {seen}")
        check(python_frames and python_frames[0]["file"] == script and
              python_frames[0]["line"] == line,
              f"{python}: file and line of the cudaMalloc call: {python_frames[:1]}")
    # The same function at two lines: three blocks from each.
    for size, marker in ((3 * 29 << 20, "FIRST-OF-TWO"), (3 * 31 << 20, "SECOND-OF-TWO")):
        seen = [(f["function"].split(".")[-1], f["line"]) for f in python_stack(report, size)]
        check(seen[:2] == [("allocate", line), ("two_lines", marked[marker])],
              f"{python}: {size >> 20} MiB named by their own line of two_lines: {seen}")
    # A thread that runs no Python: the main thread's frames, after a marker.
    # (19 MiB: a thread holding a thread state it runs no Python in, as
    # PyTorch's autograd engine threads do.)
    for size, at in ((17 << 20, native_line), (19 << 20, native_line + 1)):
        python_frames = python_stack(report, size)
        seen = [(f["function"].split(".")[-1], f["line"]) for f in python_frames]
        check(seen[:2] == [("[main thread, at that moment]", 0),
                           ("waits_for_native_thread", at)] and
              len(seen) > 2 and seen[2][0] == "<module>",
              f"{python}: {size >> 20} MiB from a thread running no Python names the line "
              f"the main thread waits at: {seen}")
    check(f"in allocate < two_lines:{marked['FIRST-OF-TWO']} < <module>:" in err,
          f"the summary shows Python lines, the site's callers too: {err[-2500:]}")
    check("leak_in_python at " in text, "the text report shows every entry's frames")
    # The marker a thread that runs no Python borrows the main thread's
    # frames after is a placeholder: said in words, never a frame.
    check("[main thread, at that moment]" not in text + err and "runs no Python:" not in text and
          "this thread runs no Python; the main thread's frames" in text,
          f"no placeholder shown as a frame: {text[-2500:]}")
    check_python_sites(report, script, line, text)


def test_python_frames(traced):
    script = os.path.join(support.SOURCE, "tests", "integration", "python_frames.py")
    check_python_frames(traced, sys.executable)
    # Every frame on request, unresolved ones named module+offset, never by address.
    out, err, reports, texts = traced.run(sys.executable, [script],
                                          env={"CUMEMTRACE_ALL_FRAMES": "1", "CUMEMTRACE_FORMAT": "text"})
    text = "".join(texts.values())
    check("libffi.so" in text and "frames hidden" not in text and
          not any(re.search(r"#\d+ +0x[0-9a-f]+ ", l) for l in text.splitlines()),
          f"CUMEMTRACE_ALL_FRAMES=1 shows libffi's frames by module+offset: {text[:2000]}")
    out, err, reports, _ = traced.run(sys.executable, [script], env={"CUMEMTRACE_PYTHON": "0"})
    report = only(reports)
    check(not any(f["python"] for f in report.get("frames", [])), "CUMEMTRACE_PYTHON=0: none")


def user_line_environment(directory):
    """A virtual environment in `directory` for user_line/serve.py: the
    stand-in package and the stand-in for PyTorch's Python installed in its
    site-packages, the user's own package
    installed editable (a .pth file naming its folder, as pip install -e
    writes). Its Python, and its site-packages folder."""
    source = os.path.join(support.SOURCE, "tests", "integration", "user_line")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", directory], check=True,
                   capture_output=True)
    python = os.path.join(directory, "bin", "python")
    packages = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    for package in ("stand_in_lib", "torch"):
        shutil.copytree(os.path.join(source, "installed", package), os.path.join(packages, package))
    with open(os.path.join(packages, "myproj.pth"), "w") as handle:
        handle.write(os.path.join(source, "editable") + "\n")
    return python, packages


def test_user_line(traced, tmp_path):
    """The site is the line a user can act on (src/report/frames.h): a
    package installed in a virtual environment's site-packages allocates on
    behalf of the user's line, which is the site, the package named beside
    it; one helper class allocating for two callers gives each finding its
    caller; the user's own package installed editable is theirs; and
    CUMEMTRACE_USER_PACKAGES makes the installed package the user's."""
    source = os.path.join(support.SOURCE, "tests", "integration", "user_line")
    script = os.path.join(source, "serve.py")
    python, packages = user_line_environment(str(tmp_path / "venv"))
    library = os.path.join(packages, "stand_in_lib", "__init__.py")
    editable = os.path.join(source, "editable", "myproj", "__init__.py")
    lines = {marker: line_of(path, marker) for path, marker in
             [(script, "SERVE-LINE"), (script, "BUF-LINE"), (script, "HOARD-LINE"),
              (script, "SCRATCH-LINE"), (library, "LIBRARY-LINE"), (editable, "EDITABLE-LINE")]}
    out, err, reports, texts = traced.run(python, [script], env={
        "CUMEMTRACE_SAMPLE_MS": "10", "CUMEMTRACE_FORMAT": "json,text"})
    check("user line: done" in out, f"the program ran: {out!r} {err[-800:]!r}")
    report = only(reports)
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}

    def site_of(size):
        group = next((g for g in report.get("live", []) if g["bytes"] == size), None)
        check(group is not None, f"a live group of {size} bytes: {report.get('live')}")
        stack = stacks[group["stack"]] if group else {"frames": [0], "site": 0}
        return stack, frames[stack["frames"][stack["site"]]]

    mib = 1 << 20
    stack, site = site_of(36 * mib)
    check((site["file"], site["line"], site["function"]) == (script, lines["SERVE-LINE"], "serve"),
          f"the installed package's allocation is sited at the user's line: {site}")
    library_frames = [frames[f] for f in stack["frames"] if frames[f]["file"] == library]
    check(library_frames and all(f["origin"] == "library" for f in library_frames),
          f"the package's frames are a library's: {library_frames}")
    via = (f"{script}:{lines['SERVE-LINE']} in serve (via stand_in_lib: generate -> "
           f"DynamicLayer.update:{lines['LIBRARY-LINE']})")
    _, editable_site = site_of(5 * mib)
    check((editable_site["file"], editable_site["line"], editable_site["origin"]) ==
          (editable, lines["EDITABLE-LINE"], "user"),
          f"the user's package installed editable is theirs: {editable_site}")

    findings = [f for f in report.get("findings", []) if f.get("site")]
    hoard = f"{script}:{lines['BUF-LINE']} in Buf.__init__ < hoard_buffers:{lines['HOARD-LINE']}"
    scratch = f"{script}:{lines['BUF-LINE']} in Buf.__init__ < keep_scratch:{lines['SCRATCH-LINE']}"
    growing = [f["site"] for f in findings if f["verdict"] == "growing"]
    check(sorted(growing) == sorted([via, hoard, scratch]),
          f"each growing finding names its caller, the package beside the user's line: {growing}")
    summary = err.split("Findings:", 1)[-1].split("\n\n", 1)[0]
    for words in (via, hoard, scratch):
        check(f"growing at {words}: " in summary and f"      at {words}: " in summary,
              f"the findings block says {words!r}:\n{summary}")
    by_stack = {}
    for f in findings:
        by_stack.setdefault(f["site"], set()).add(f["stack"])
    check(all(len(ids) == 1 for ids in by_stack.values()),
          f"no two stacks' findings read alike: {by_stack}")
    check(all(s.get("site_text") for s in stacks.values()) and
          stacks[site_of(12 * mib)[0]["id"]]["site_text"].startswith(hoard + " < main:"),
          f"the stacks' site_text, two callers at least: {[s.get('site_text') for s in stacks.values()]}")
    # Read back, the report says the same.
    path = os.path.join(traced.dir, next(n for n in os.listdir(traced.dir) if n.endswith(".json")))
    again = support.tool("report", path)
    check(f"growing at {via}: " in again.stdout and f"growing at {hoard}: " in again.stdout,
          f"cumemtrace report names the same sites: {again.stdout[:2500]} {again.stderr}")

    # The setting: the installed package is the user's own.
    out, err, reports, _ = traced.run(python, [script], env={
        "CUMEMTRACE_SAMPLE_MS": "10", "CUMEMTRACE_USER_PACKAGES": "numpy, stand_in_lib"})
    report = only(reports)
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    stack, site = site_of(36 * mib)
    check((site["file"], site["line"], site["origin"]) == (library, lines["LIBRARY-LINE"], "user"),
          f"CUMEMTRACE_USER_PACKAGES=stand_in_lib: the package's line is the site: {site}")
    check(report.get("tracer", {}).get("user_packages") == "numpy, stand_in_lib" and
          f"growing at {library}:{lines['LIBRARY-LINE']} in DynamicLayer.update" in err,
          f"the report says which packages were the user's: {report.get('tracer')} {err[-1500:]}")


def test_library_path(traced, tmp_path):
    """The library path beside the user's line (src/report/frames.h), as a
    transformers server showed it on the GPU: the installed package's
    generate() runs its model under PyTorch's Module call, and its layer
    asks for keys and values on two lines. Each finding reads the user's
    line, then "(via PACKAGES: outer -> inner:line)", PyTorch's frames folded
    into it and named, nothing after it (no "-> Module._call_impl:N"); the
    standard library on the way is named "stdlib" like a package."""
    source = os.path.join(support.SOURCE, "tests", "integration", "user_line")
    script = os.path.join(source, "serve.py")
    python, packages = user_line_environment(str(tmp_path / "venv"))
    library = os.path.join(packages, "stand_in_lib", "__init__.py")
    lines = {marker: line_of(path, marker) for path, marker in
             [(script, "CACHE-LINE"), (script, "STDLIB-LINE"), (library, "KEYS-LINE"),
              (library, "VALUES-LINE")]}
    out, err, reports, _ = traced.run(python, [script, "library-path"], env={
        "CUMEMTRACE_SAMPLE_MS": "10", "CUMEMTRACE_FORMAT": "json,text"})
    check("user line: done" in out, f"the program ran: {out!r} {err[-800:]!r}")
    report = only(reports)
    frames = {f["id"]: f for f in report.get("frames", [])}
    torch_frames = [f for f in frames.values() if f["function"] == "Module._call_impl"]
    check(torch_frames and all(f["origin"] == "framework" for f in torch_frames),
          f"the path goes through PyTorch's Module call: {torch_frames}")
    exit_wrapper = next((f for f in frames.values() if (f["function"] or "").endswith("_exit_wrapper")),
                        {"function": "?", "line": 0})
    cache = (f"{script}:{lines['CACHE-LINE']} in serve_cached (via stand_in_lib, torch: "
             f"generate_cached -> DynamicLayer.update_kv:")
    sites = [cache + f"{lines['KEYS-LINE']})", cache + f"{lines['VALUES-LINE']})",
             f"{script}:{lines['STDLIB-LINE']} in allocate_on_exit (via stdlib: ExitStack.__exit__ -> "
             f"{exit_wrapper['function']}:{exit_wrapper['line']})"]
    growing = [f["site"] for f in report.get("findings", []) if f["verdict"] == "growing"]
    check(sorted(growing) == sorted(sites), f"the findings' sites: {growing}")
    summary = err.split("Findings:", 1)[-1].split("\n\n", 1)[0]
    for words in sites:
        check(f"growing at {words}: " in summary and f"      at {words}: " in summary,
              f"the findings block says {words!r}, nothing after the via part:\n{summary}")
    check("_call_impl" not in summary and ") -> " not in summary,
          f"no PyTorch frame after the via part:\n{summary}")
    path = os.path.join(traced.dir, next(n for n in os.listdir(traced.dir) if n.endswith(".json")))
    again = support.tool("report", path)
    check(all(f"growing at {words}: " in again.stdout for words in sites),
          f"cumemtrace report names the same sites: {again.stdout[:2500]} {again.stderr}")


def test_python_fork(traced):
    check_python_fork(traced, sys.executable)


def check_python_fork(traced, python):
    """python_fork.py under `python`: each forked child reports its own block and line."""
    script = os.path.join(support.SOURCE, "tests", "integration", "python_fork.py")
    with open(script) as handle:
        line = next(i for i, text in enumerate(handle, 1) if "CHILD-LINE" in text)
    children = 20
    out, err, reports, _ = traced.run(python, [script, str(children)])
    check(f"{children} of {children} children exited cleanly" in out,
          f"no child hung or failed: {out!r} {err[-500:]!r}")
    pids = {r["process"]["pid"] for r in reports}
    kids = [r for r in reports if r["process"]["ppid"] in pids]
    check(len(kids) == children, f"a report from each child: {len(kids)} of {children}")
    for report in kids:
        check(report["blocks"]["total"] == 1,
              f"child {report['process']['pid']}: only its own block: {report['blocks']['total']}")
        frames = python_stack(report, 3 << 20)
        check(frames and frames[0]["function"].split(".")[-1] == "in_child" and
              frames[0]["line"] == line,
              f"child {report['process']['pid']}: its own Python line: {frames[:1]}")


def check_python_version(traced, version):
    """The Python-frame cases under each CPython `version` found here; where
    none is, the case is skipped (a clean Debian has only its python3.11).
    Each also says where its frame layout came from: from 3.13 on, the
    offsets the interpreter publishes; before, the table."""
    pythons = support.interpreters(version)
    if not pythons:
        pytest.skip(f"no python{version} on PATH or in pyenv")
    program = ("import ctypes\n"
               "p = ctypes.c_void_p()\n"
               "assert ctypes.CDLL('libcudart.so.13').cudaMalloc(ctypes.byref(p), 1 << 20) == 0\n")
    source = ("Python frames at the offsets it publishes" if tuple(map(int, version.split("."))) >= (3, 13) else
              "Python frames at the offsets known for it")
    for python in pythons:
        print(f"python {version}: {python}")
        out, err, reports, _ = traced.run(python, ["-c", program], env={"CUMEMTRACE_DEBUG": "1"})
        check(f"CPython {version}: {source}" in err, f"{python}: {source}: {err[-1500:]!r}")
        check_python_frames(traced, python)
        check_python_fork(traced, python)


def test_python_3_10(traced):
    check_python_version(traced, "3.10")


def test_python_3_11(traced):
    check_python_version(traced, "3.11")


def test_python_3_12(traced):
    check_python_version(traced, "3.12")


def test_python_3_13(traced):
    check_python_version(traced, "3.13")


def test_python_3_14(traced):
    check_python_version(traced, "3.14")


def test_torch_counters(traced):
    script = os.path.join(support.SOURCE, "tests", "integration", "torch_counters.py")
    out, err, reports, texts = traced.run(sys.executable, [script],
                                          env={"CUMEMTRACE_SAMPLE_MS": "50", "CUMEMTRACE_FORMAT": "text,json"})
    check(out.strip() == "torch counters: done the program's own exception True",
          f"the program's own output and exceptions are untouched: {out!r} {err[-500:]!r}")
    by_reason = {r["reason"]: r for r in reports}
    check(set(by_reason) == {"exit", "signal"}, f"an exit report and a snapshot: {sorted(by_reason)}")
    mib = 1 << 20
    final = by_reason.get("exit", {}).get("torch") or {}
    check(final.get("read") == "python_exit" and final.get("now"),
          f"the exit report has the atexit reading: {final}")
    devices = final.get("devices", [])
    check(len(devices) == 2, f"both devices: {devices}")
    if len(devices) == 2:
        d0, d1 = devices
        check(d0["allocated_bytes"] == 256 * mib and d0["reserved_bytes"] == 1024 * mib and
              d0["allocated_peak"] == 512 * mib and d0["inactive_split_bytes"] == 256 * mib and
              d0["num_alloc_retries"] == 3 and d0["num_ooms"] == 1 and
              d0["inactive_split_blocks"] == 20,
              f"device 0 as memory_stats() said at exit: {d0}")
        check(all(v is None for k, v in d1.items() if k != "device"),
              f"device 1's memory_stats() raised: its figures are null: {d1}")
    snapshot = by_reason.get("signal", {}).get("torch") or {}
    check(snapshot.get("read") == "report" and snapshot.get("now") and
          snapshot["devices"][0]["allocated_bytes"] == 64 * mib,
          f"the snapshot asked for a reading of its own: {snapshot}")
    classes = by_reason.get("signal", {}).get("classes") or {}
    check(not classes.get("known") and "torch.nn or torch.optim is not loaded" in classes["why"],
          f"a torch without nn: the split is not known, and why: {classes}")
    fragmentation = by_reason.get("exit", {}).get("fragmentation", {})
    check(fragmentation.get("verdict") == "fragmented" and
          fragmentation.get("torch_inactive_split_bytes") == 256 * mib and
          fragmentation.get("torch_cached_bytes") == 768 * mib,
          f"inactive split bytes a quarter of the reserve in 20 small holes: fragmented: {fragmentation}")
    text = next((t for name, t in texts.items() if "signal" not in name), "")
    check("PyTorch (torch.cuda.memory_stats, at Python's exit): allocated_bytes 256 MiB" in text,
          f"the text report shows PyTorch's counters: {text[:1500]}")
    # Without torch in sys.modules nothing is read, and the report says null.
    out, err, reports, _ = traced.run(sys.executable, ["-c", "import ctypes; p = ctypes.c_void_p(); "
                                                       "ctypes.CDLL('libcudart.so.13').cudaMalloc(ctypes.byref(p), 4096)"],
                                      env={"CUMEMTRACE_SAMPLE_MS": "20"})
    check(only(reports)["torch"] is None, "no PyTorch: torch is null")
