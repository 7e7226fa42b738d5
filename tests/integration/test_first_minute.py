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


def reports_of_leak_loop(traced):
    """leak_loop's text and JSON reports: (directory, .txt path, .json path)."""
    traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_FORMAT": "text,json,html",
                                                 "CUMEMTRACE_QUIET": "1"})
    names = sorted(os.listdir(traced.dir))
    pick = lambda end: os.path.join(traced.dir, next(n for n in names if n.endswith(end)))
    return traced.dir, pick(".txt"), pick(".json"), pick(".html")


def test_report_says_what_a_file_is(traced):
    _, text, _, html = reports_of_leak_loop(traced)
    for path, words in ((text, "a text report (.txt), written to be read as it is"),
                        (html, "an HTML report: open it in a browser")):
        completed = tool("report", path)
        check(refused(completed, words) and "JSON" in completed.stderr and
              "unexpected character" not in completed.stderr,
              f"report {os.path.basename(path)}: {completed.returncode} {completed.stderr!r}")


def test_report_top(traced):
    traced.run("tests/all_entry_points", ["keep"], env={"CUMEMTRACE_QUIET": "1"})
    report = os.path.join(traced.dir, next(n for n in os.listdir(traced.dir)
                                           if n.endswith(".json")))
    full = tool("report", report)
    brief = tool("report", "--top", "1", report)
    check(brief.returncode == 0 and brief.stdout != full.stdout and
          f"full report: {report} (cumemtrace report {report} prints all of it)" in brief.stdout,
          f"report --top 1: the summary, naming the full report: {brief.stdout[-400:]!r}")
    entries = lambda text, n: [l for l in text.splitlines() if l.startswith(f"   #{n} ")]
    check(entries(full.stdout, 2) and not entries(brief.stdout, 2) and entries(brief.stdout, 1),
          f"one entry per section: {brief.stdout!r}")
    for bad in (["--top", "x"], ["--top", "0"], ["--top", "3", "--format", "json"]):
        completed = tool("report", *bad, report)
        check(completed.returncode == 1 and completed.stderr.count("\n") == 1,
              f"report {bad}: {completed.returncode} {completed.stderr!r}")


def test_commands_say_what_they_wrote(traced):
    directory, _, report, _ = reports_of_leak_loop(traced)
    for args, written, words in (
            (["export", "--format", "folded", report, "-o", os.path.join(directory, "stacks")],
             os.path.join(directory, "stacks.folded"), "(-o {} with the format's extension)"),
            (["html", report, "-o", os.path.join(directory, "page.html")],
             os.path.join(directory, "page.html"), ""),
            (["report", report, "-o", os.path.join(directory, "again.txt")],
             os.path.join(directory, "again.txt"), "")):
        completed = tool(*args)
        typed = args[args.index("-o") + 1]
        expected = f"cumemtrace: wrote {written}" + \
            (" " + words.format(typed) if words else "") + "\n"
        check(completed.returncode == 0 and completed.stderr == expected and
              os.path.exists(written),
              f"{args[0]}: {completed.stderr!r}, expected {expected!r}")
    completed = tool("report", report)
    check(completed.stderr == "", "to stdout: nothing said")


def test_live_and_doctor_name_what_is_missing():
    child = subprocess.Popen(["true"])
    child.wait()        # its pid is no process now
    completed = tool("live", str(child.pid), "--once")
    check(refused(completed, f"cannot watch pid {child.pid}: no such process"),
          f"live on a pid that is no process: {completed.returncode} {completed.stderr!r}")
    completed = tool("doctor", "--python", "/no/such/python", "--no-build")
    check(refused(completed, "cannot run --python '/no/such/python': No such file"),
          f"doctor --python /no/such: {completed.returncode} {completed.stderr!r}")
    check(completed.stdout == "", f"and no report about nothing: {completed.stdout!r}")


def test_diff_of_snapshots_says_so(traced):
    traced.run("tests/snapshots", ["{dir}"], env={"CUMEMTRACE_QUIET": "1"})
    first, second = (os.path.join(traced.dir, n) for n in ("first.json", "second.json"))
    completed = tool("diff", first, second)
    check(completed.returncode == 0 and
          "compared what was live when each snapshot was taken" in completed.stdout and
          "compared at exit" not in completed.stdout,
          f"diff of two snapshots: {completed.stdout[:600]!r}")


def test_live_keys():
    """cumemtrace live in tmux: h shows the keys, - lists fewer sites, p
    pauses, q quits."""
    import shutil
    import time
    from test_command import start_target
    tmux = shutil.which("tmux")
    if not check(tmux, "tmux is installed (scripts/setup.sh installs it)"):
        return
    directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
    process, pids = start_target(directory)
    if not pids:
        return
    server = f"cumemtrace-keys-{os.getpid()}"
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TMUX")}
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        environment["LD_PRELOAD"] = os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]
    tmux_command = [tmux, "-L", server, "-f", "/dev/null"]
    subprocess.run(tmux_command + ["new-session", "-d", "-x", "140", "-y", "40", "-s", "live",
                                   f"exec {os.path.join(support.BUILD, 'cumemtrace')} live "
                                   f"{pids[0]} --top 2"], env=environment)

    def screen_after(key):
        if key:
            subprocess.run(tmux_command + ["send-keys", "-t", "live", key])
        time.sleep(0.5)
        return subprocess.run(tmux_command + ["capture-pane", "-p", "-t", "live"],
                              capture_output=True, text=True).stdout

    def sites(screen):
        return [l for l in screen.split("Top sites", 1)[-1].split("Growing", 1)[0].splitlines()
                if l.strip().startswith(("1 ", "2 ", "3 "))]
    try:
        first = screen_after(None)
        check("h keys" in first and "keys: q quit" not in first, f"the keys offered:\n{first}")
        shown = screen_after("h")
        check("keys: q quit   p pause/resume   + more sites   - fewer sites" in shown,
              f"h shows the keys:\n{shown}")
        fewer = screen_after("-")
        check(len(sites(fewer)) == len(sites(shown)) - 1 and sites(shown),
              f"- lists one site fewer: {sites(shown)} -> {sites(fewer)}")
        paused = screen_after("p")
        check("paused (p resumes)" in paused, f"p pauses:\n{paused}")
        time.sleep(1.2)
        check(screen_after(None).split("\n", 1)[0] == paused.split("\n", 1)[0],
              "paused: the time shown stays")
        check("every second" in screen_after("p"), "p resumes")
        subprocess.run(tmux_command + ["send-keys", "-t", "live", "q"])
        time.sleep(0.5)
        check(subprocess.run(tmux_command + ["has-session", "-t", "live"],
                             capture_output=True).returncode != 0, "q quits")
    finally:
        subprocess.run(tmux_command + ["kill-server"], capture_output=True)
        process.kill()
        process.communicate(timeout=60)


LEAKER = """import ctypes
cuda = ctypes.CDLL("libcudart.so.13")
kept = []


def allocate(size):
    pointer = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0
    kept.append(pointer)


allocate(3 << 20)
"""


def test_diff_matches_a_script_by_its_folder(traced):
    """The same script launched as ../train.py from a folder below it, and as
    /elsewhere/proj/train.py from another checkout: diff finds the same
    lines unchanged, not one new and one vanished."""
    checkouts = []
    for name in ("one", "two"):
        project = os.path.join(tempfile.mkdtemp(prefix=f"cumemtrace-{name}-"), "proj")
        os.makedirs(os.path.join(project, "sub"))
        with open(os.path.join(project, "train.py"), "w") as handle:
            handle.write(LEAKER)
        checkouts.append(project)
    reports = []
    for project, command in ((checkouts[0], ["../train.py"]),
                             (checkouts[1], [os.path.join(checkouts[1], "train.py")])):
        directory = os.path.join(project, "sub")
        completed = bare([sys.executable, *command], directory, CUMEMTRACE_QUIET="1",
                         CUMEMTRACE_OUTPUT=os.path.join(project, "report"))
        check(completed.returncode == 0, f"{command}: {completed.stderr[-500:]!r}")
        reports.append(os.path.join(project, "report.json"))
    completed = tool("diff", *reports, "--format", "json")
    if not check(completed.returncode == 0, f"diff: {completed.stderr!r}"):
        return
    import json
    diff = json.loads(completed.stdout)
    statuses = [s["status"] for s in diff["stacks"]]
    check("new" not in statuses and "vanished" not in statuses and diff["stacks_unchanged"] >= 1,
          f"the script's lines matched across the two paths: {statuses}, "
          f"{diff['stacks_unchanged']} unchanged")


CHDIR_LEAKER = LEAKER + """
import os
import sys

# A helper compiled from a path relative to where the program started, then
# the program moves away before its report: Python keeps the relative name.
helper = {"allocate": allocate}
exec(compile("def grab():\\n    allocate(5 << 20)\\n", "lib/helper.py", "exec"), helper)
os.chdir("/")
helper["grab"]()
"""


def test_frames_name_real_paths():
    """A script run as ../x/train.py from a sibling folder, or through a
    symbolic link, is named by its real absolute path in every report (no
    ".."); a file Python compiled from a path relative to where the program
    started is named absolute though the program moved away before its
    report; diff of a run launched by a relative path and one by the
    absolute path finds no new or vanished site."""
    base = os.path.realpath(tempfile.mkdtemp(prefix="cumemtrace-paths-"))
    for folder in ("x", "y", "y/lib"):
        os.makedirs(os.path.join(base, folder))
    script = os.path.join(base, "x", "train.py")
    with open(script, "w") as handle:
        handle.write(CHDIR_LEAKER)
    helper = os.path.join(base, "y", "lib", "helper.py")
    with open(helper, "w") as handle:
        handle.write("# stands for the code compiled under this name\n")
    os.symlink(os.path.join(base, "x"), os.path.join(base, "link"))
    directory = os.path.join(base, "y")
    reports = []
    for name, launched in (("relative", "../x/train.py"), ("linked", "./../link/train.py"),
                           ("absolute", script)):
        output = os.path.join(base, name)
        completed = bare([sys.executable, launched], directory, CUMEMTRACE_QUIET="1",
                         CUMEMTRACE_FORMAT="json,text", CUMEMTRACE_OUTPUT=output)
        if not check(completed.returncode == 0, f"{launched}: {completed.stderr[-800:]!r}"):
            return
        import json
        with open(output + ".json") as handle:
            report = json.load(handle)
        files = {f["file"] for f in report["frames"] if f["python"] and f.get("file")}
        check(script in files and helper in files and
              not any(".." in f or "/link/" in f or f == "lib/helper.py" for f in files),
              f"{launched}: the frames name real absolute paths: {sorted(files)}")
        with open(output + ".txt") as handle:
            text = handle.read()
        check(f"at {script}:" in text and f"grab at {helper}:2 " in text and
              ".." not in text.split("\n", 2)[2],
              f"{launched}: the text report names the real paths:\n{text[:2500]}")
        reports.append(output + ".json")
    completed = tool("diff", reports[0], reports[2], "--format", "json")
    if not check(completed.returncode == 0, f"diff: {completed.stderr!r}"):
        return
    import json
    diff = json.loads(completed.stdout)
    statuses = [s["status"] for s in diff["stacks"]]
    check("new" not in statuses and "vanished" not in statuses and diff["stacks_unchanged"] >= 2,
          f"the relative and the absolute launch match: {statuses}")
