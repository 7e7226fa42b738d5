"""What the integration tests share: a program run under libcumemtrace.so on
the CUDA simulator (Traced, which conftest.py's `traced` fixture gives a
test), soft checks, the schema every JSON report must match, the command,
and readers of a report's parts.

A test's check() calls collect their failures; conftest.py fails the test
at its end with all of them, so one run says everything that went wrong.
"""
import glob
import json
import os
import subprocess
import tempfile

# The checkout, and the build whose library, command and programs the tests
# run (conftest.py sets BUILD from --build).
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = None

FAILED = []


def check(condition, message):
    """A soft assertion: a false `condition` is a failure of the running
    test, reported at its end with the others; the test goes on."""
    if not condition:
        FAILED.append(message)
        print("FAIL:", message)
    return condition


class Traced:
    """Runs programs for one test: each in a fresh directory of its own
    (under the test's, which conftest.py keeps when the test fails), with
    the tracer preloaded or not; its reports are read and validated."""

    def __init__(self):
        self.dir = None     # the last run's directory

    def run(self, program, args=(), env=None, preload=True, extra_preload=(), expect_rc=0):
        """Run `program` (a path, or one relative to the build) in a fresh
        directory, `{dir}` in `args` and `env` standing for it; checks its
        exit status (unless `expect_rc` is None) and that no temporary file
        was left. (stdout, stderr, reports, {name: text of each .txt})."""
        directory = tempfile.mkdtemp(prefix="cumemtrace-case-")
        self.dir = directory
        args = [a.replace("{dir}", directory) for a in args]
        environment = traced_environment(directory, preload=preload,
                                         extra_preload=extra_preload,
                                         **{k: v.replace("{dir}", directory)
                                            for k, v in (env or {}).items()})
        path = program if os.path.isabs(program) else os.path.join(BUILD, program)
        completed = subprocess.run([path, *args], cwd=directory, env=environment,
                                   capture_output=True, text=True, timeout=300)
        check(expect_rc is None or completed.returncode == expect_rc,
              f"{program} {' '.join(args)}: exit status {completed.returncode}, expected "
              f"{expect_rc}\nstdout: {completed.stdout}\nstderr: {completed.stderr[-3000:]}")
        reports = []
        for name in sorted(glob.glob(os.path.join(directory, "*.json"))):
            if name.endswith(".trace.json"):    # the Chrome trace export, not a report
                continue
            with open(name) as handle:
                report = json.load(handle)
            validate(report, name)
            reports.append(report)
        texts = {}
        for name in sorted(glob.glob(os.path.join(directory, "*.txt"))):
            with open(name) as handle:
                texts[os.path.basename(name)] = handle.read()
        leftovers = glob.glob(os.path.join(directory, "*.tmp.*"))
        check(not leftovers, f"temporary files left behind: {leftovers}")
        return completed.stdout, completed.stderr, reports, texts


_validator = None


def validate(report, name):
    """Check `report` (read from the file `name`) against
    docs/report.schema.json. The validator is made once: checking the schema
    itself costs more than a report."""
    import jsonschema   # here, not above: slow to import, and not every test reads a report
    global _validator
    if _validator is None:
        with open(os.path.join(SOURCE, "docs", "report.schema.json")) as handle:
            schema = json.load(handle)
        jsonschema.Draft202012Validator.check_schema(schema)
        _validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(_validator.iter_errors(report))
    if error is not None:
        check(False, f"{name} does not match the schema: {error.message} at {list(error.path)}")


def only(reports):
    check(len(reports) == 1, f"expected one report, got {len(reports)}")
    return reports[0] if reports else {}


def device_counters(report, device, kind):
    for entry in report.get("devices", []):
        if entry["device"] == device:
            return entry["counters"][kind]
    return None


def entry_point(report, name):
    for entry in report.get("entry_points", []):
        if entry["name"] == name:
            return entry
    return {"name": name, "calls": 0, "allocations": 0, "failures": 0}


def stack_functions(report, stack_id):
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            return [frames[i]["function"] or "" for i in stack["frames"]]
    return []


def user_functions(report, stack_id):
    """The stack's functions without the CUDA libraries' own frames on top."""
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            names = []
            for i in stack["frames"]:
                module = os.path.basename(frames[i]["module"] or "")
                if not names and (module.startswith("libcudart") or module.startswith("libcuda")):
                    continue
                names.append(frames[i]["function"] or "")
            return names
    return []


def stack_files(report, stack_id):
    frames = {frame["id"]: frame for frame in report["frames"]}
    for stack in report["stacks"]:
        if stack["id"] == stack_id:
            return [f"{os.path.basename(frames[i]['file'] or '')}:{frames[i]['line']}"
                    for i in stack["frames"]]
    return []


def by_reason(reports, reason):
    found = [r for r in reports if r["reason"] == reason]
    check(len(found) == 1, f"one {reason} report (got {[r['reason'] for r in reports]})")
    return found[0] if found else {}


def symbolize(dump, formats="json"):
    """Run `cumemtrace symbolize` on a dump; return (exit status, stdout, JSON report)."""
    base = dump[:-len(".dump")] + "-symbolized"
    completed = subprocess.run([os.path.join(BUILD, "cumemtrace"), "symbolize", dump,
                                "--output", base, "--format", formats],
                               capture_output=True, text=True, timeout=120)
    report = None
    if os.path.exists(base + ".json"):
        with open(base + ".json") as handle:
            report = json.load(handle)
        validate(report, base + ".json")
    return completed.returncode, completed.stdout + completed.stderr, report


def one_dump(traced):
    dumps = glob.glob(os.path.join(traced.dir, "*.dump"))
    check(len(dumps) == 1, f"one crash dump: {dumps}")
    return dumps[0] if dumps else None


def python_stack(report, size):
    """The Python frames (function, file, line) of the one live group of `size` bytes."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stacks = {s["id"]: s for s in report.get("stacks", [])}
    held = [g for g in report.get("live", []) if g["bytes"] == size]
    check(len(held) == 1, f"one live group of {size} bytes: {report.get('live')}")
    return [frames[i] for i in stacks[held[0]["stack"]]["frames"] if frames[i]["python"]]


def traced_environment(directory, preload=True, extra_preload=(), **settings):
    """The environment a traced program runs in (Traced.run's, and for one a
    test starts with Popen): this one's without the tracer's and the
    simulator's settings, the simulator's libraries, reports to
    `directory`/report-PID, the tracer preloaded (after a sanitizer's runtime
    when the tests run under one) unless `preload` is false, then
    `settings`."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("CUMEMTRACE_") and not k.startswith("SIMCUDA_")}
    environment["LD_LIBRARY_PATH"] = os.path.join(BUILD, "sim")
    environment["CUMEMTRACE_OUTPUT"] = os.path.join(directory, "report-%p")
    first = [os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]] \
        if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST") else []
    libraries = first + ([os.path.join(BUILD, "libcumemtrace.so")] + list(extra_preload)
                         if preload else [])
    if libraries:
        environment["LD_PRELOAD"] = " ".join(libraries)
    else:
        environment.pop("LD_PRELOAD", None)
    if "ASAN_OPTIONS" in environment:
        # Fatal signals are the tracer's to dump and then the default action's.
        environment["ASAN_OPTIONS"] += ":handle_segv=0:handle_sigbus=0:handle_abort=0"
    environment.update(settings)
    return environment


def line_of(script, marker):
    """The number of the first line of `script` that holds `marker`."""
    with open(script) as handle:
        return next(i for i, text in enumerate(handle, 1) if marker in text)


def tool(*args, output=None):
    """Run the cumemtrace command; return the CompletedProcess (text)."""
    environment = dict(os.environ)
    environment.pop("LD_PRELOAD", None)
    if os.environ.get("CUMEMTRACE_TEST_PRELOAD_FIRST"):
        environment["LD_PRELOAD"] = os.environ["CUMEMTRACE_TEST_PRELOAD_FIRST"]
    return subprocess.run([os.path.join(BUILD, "cumemtrace"), *args], capture_output=True,
                          text=True, timeout=120, env=environment)


def rank_reports(traced, ranks, world_size=True):
    """One exit report per (rank, leak_loop steps), in one directory."""
    directory = tempfile.mkdtemp(prefix="cumemtrace-ranks-")
    for rank, steps in ranks:
        env = {"CUMEMTRACE_OUTPUT": os.path.join(directory, "rank-%r"), "CUMEMTRACE_QUIET": "1",
               "CUMEMTRACE_SAMPLE_MS": "10"}
        if rank is not None:
            env["RANK"] = str(rank)
            if world_size:
                env["WORLD_SIZE"] = str(len(ranks))
        else:
            env["CUMEMTRACE_OUTPUT"] = os.path.join(directory, f"steps-{steps}")
        traced.run("examples/leak_loop", [str(steps)], env=env)
    return directory


def interpreters(version):
    """Every CPython `version` ("3.12") here: python3.12 on PATH and pyenv's
    builds of it (not its shims), each once."""
    found = [os.path.join(d, f"python{version}") for d in os.environ.get("PATH", "").split(":") if d]
    found = [p for p in found if os.access(p, os.X_OK)]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python3")))
    seen, pythons = set(), []
    for python in found:
        if "/shims/" not in python and os.path.realpath(python) not in seen:
            seen.add(os.path.realpath(python))
            pythons.append(python)
    return pythons
