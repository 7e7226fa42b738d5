"""cumemtrace_pytest - fail the tests that leave GPU memory held, or keep growing it.

The GPU counterpart of pytest-memray's limits, for a test suite run under the
tracer:

    cumemtrace run -- python -m pytest --cuda-leaks tests/

(`cumemtrace run` puts this package's folder on PYTHONPATH and has pytest
load it; `pip install` registers it with pytest, so `-p` is not needed there;
with LD_PRELOAD instead, add python/ of the source tree, or
share/cumemtrace/python of an installation, to PYTHONPATH and `-p
cumemtrace_pytest` yourself.)

--cuda-leaks
    A test fails when memory it allocated is still held after it: live after
    the test's call minus live before it (its fixtures are set up before,
    torn down after), naming each site that holds more, by its line.
--cuda-leaks-repeat=N
    Each passing test runs N more times (its fixtures kept); it fails when
    what it holds grows at every one of them: a cache or a workspace it fills
    once is forgiven, a list it appends to every time is not.
--cuda-leaks-below=SIZE
    Less than SIZE per test is not a leak (default 0; "64K", "1 MiB", ...).
Each can also be set in pytest.ini ([pytest]), pyproject.toml
([tool.pytest.ini_options]), tox.ini or setup.cfg: cuda_leaks = true,
cuda_leaks_repeat = N, cuda_leaks_below = SIZE; the command line wins.
At the end of the session (with either option), a summary: what the session
holds then by site, tests or not (module globals, session fixtures, caches),
and the sites the tracer calls growing (its leak suspects: live bytes rising
at most of its samples over the session).
@pytest.mark.cuda_leaks(allowed="8 MiB")
    This much is allowed to one test; @pytest.mark.cuda_leaks(False) leaves a
    test unchecked; @pytest.mark.cuda_leaks(True) (or no argument) checks it
    with nothing allowed beyond --cuda-leaks-below.
@pytest.mark.cuda_limit(peak="512 MiB", leaks=0)
    Limits of one test, checked whenever the tracer is there (no option
    needed): `peak`, the most device memory live during the test beyond what
    was live before it; `leaks`, what it may leave held. The peak comes from
    the tracer's counters (of the framework's tensors or arrays where they
    are recorded, else of the device memory): exact when the test raised the
    process's peak or allocated no more than it left held, and otherwise
    known to be within the limit only while the earlier peak is (a test that
    cannot be told passes with a warning that says so).
With either option, the session's summary also names the tests that held
the most GPU memory at their end (what each left held, as `leaks` counts
it; its peak beside it); a test that left nothing held is not among them,
but apart, by its peak, with the others' highest peaks.

Failure messages name each site once, by its line and two callers (frames
of this plugin and of pytest left out), and, in a Python program whose
arrays the tracer can name, what holds its memory ("— held by
test_model.kept, a list of 3 tensors"): asked of the tracer only for a test
that fails, since it walks every Python object (CUMEMTRACE_HOLDERS_MS). The tracer's own exit report is not
written (CUMEMTRACE_FORMAT=none, for this process only) unless
CUMEMTRACE_FORMAT or CUMEMTRACE_OUTPUT (`cumemtrace run -f`, `-o`) asks for
one: no cumemtrace-PID.json left in the working directory by every run.

What counts is read from the tracer's JSON report
(docs/report.schema.json), never assumed: every live group but the VMM
address space (vmm_mapping, vmm_reservation: the memory behind them is
counted as vmm_physical) and page-locked host memory (not GPU memory: the
session's summary lists it); and where a framework's own blocks are recorded
(caches[].view "blocks": PyTorch's tensors, CuPy's and JAX's arrays), not the
cache segments it took from the driver (stacks[].cache_segment), which it
keeps and hands out again: its blocks count instead, for the peaks too. A report of a program
that has ended (program_end, written after Python's exit hooks) is read at
that end (held_at_end), not after the interpreter's teardown.

The tracer is asked through its public C API (include/cumemtrace.h):
cumemtrace_write_json(fd) writes the report to a temporary file, read back
here; stacks keep their ids for the life of the process, so two reports
compare site by site. cumemtrace_write_json_holders(fd), called with the GIL
held (ctypes.PyDLL), adds who holds the arrays.
"""
import ctypes
import json
import os
import re
import tempfile

import pytest

ADDRESS_SPACE = {"vmm_mapping", "vmm_reservation"}
# Page-locked host memory is not GPU memory, and a framework's host cache
# keeps it by design: PyTorch's first .item() or .cpu() leaves a pinned
# staging buffer of a few bytes held for the rest of the process. Tests are
# not failed for it; the session's summary lists what is held at its end.
HOST = {"pinned_host", "registered_host"}
UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
         "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_size(text):
    """4096, "64K", "1 MiB", "2GiB" -> bytes (powers of 1024)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in UNITS:
        raise ValueError(f"not a size: {text!r} (4096, 64K, 1 MiB, 2GiB)")
    return int(match.group(1)) * UNITS[match.group(2).lower()]


def format_bytes(count):
    value, unit = float(abs(count)), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and unit < 4:
        value /= 1024
        unit += 1
    text = f"{int(value)} B" if unit == 0 else \
        f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f} {units[unit]}"
    return ("-" if count < 0 else "") + text


def pytest_addoption(parser):
    group = parser.getgroup("cumemtrace", "GPU memory held by tests (cumemtrace)")
    group.addoption("--cuda-leaks", action="store_true", default=None,
                    help="fail a test after which GPU memory it allocated is still held")
    group.addoption("--cuda-leaks-repeat", type=int, default=None, metavar="N",
                    help="run each test N more times; fail it if what it holds grows every time")
    group.addoption("--cuda-leaks-below", default=None, metavar="SIZE",
                    help="less than SIZE per test is not a leak (default 0)")
    parser.addini("cuda_leaks", "as --cuda-leaks", type="bool", default=False)
    parser.addini("cuda_leaks_repeat", "as --cuda-leaks-repeat", default="0")
    parser.addini("cuda_leaks_below", "as --cuda-leaks-below", default="0")


def setting(config, name):
    """--NAME on the command line, else NAME in pytest.ini, pyproject.toml's
    [tool.pytest.ini_options], tox.ini or setup.cfg."""
    given = config.getoption("--" + name.replace("_", "-"))
    return given if given is not None else config.getini(name)


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda_leaks(allowed=SIZE): GPU memory a test may leave "
                            "held (cuda_leaks(False): not checked; cuda_leaks(True): none)")
    config.addinivalue_line("markers", "cuda_limit(peak=SIZE, leaks=SIZE): the most GPU memory "
                            "a test may have live beyond what was before it, and leave held")
    try:
        repeat = int(setting(config, "cuda_leaks_repeat"))
    except ValueError:
        raise pytest.UsageError("cuda_leaks_repeat takes a count, 0 or more")
    checking = setting(config, "cuda_leaks") or repeat > 0
    if not checking:
        tracer = Tracer.find()
        if tracer is not None:      # the per-test limits need no option
            config.pluginmanager.register(LimitChecker(tracer, False), "cumemtrace-limits")
        return
    if repeat < 0:
        raise pytest.UsageError("--cuda-leaks-repeat takes a count, 0 or more")
    try:
        below = parse_size(setting(config, "cuda_leaks_below"))
    except ValueError as error:
        raise pytest.UsageError(f"--cuda-leaks-below: {error}")
    tracer = Tracer.find()
    if tracer is None:
        raise pytest.UsageError("--cuda-leaks needs the tracer: run pytest under "
                                "`cumemtrace run -- python -m pytest ...` (or with "
                                "LD_PRELOAD=libcumemtrace.so)")
    tracer.without_exit_report()
    limits = LimitChecker(tracer, True)
    config.pluginmanager.register(limits, "cumemtrace-limits")
    config.pluginmanager.register(LeakChecker(tracer, config, below, repeat, limits),
                                  "cumemtrace-leaks")


class Tracer:
    """libcumemtrace.so, preloaded in this process, through its public API."""

    def __init__(self, library):
        self.write_json = library.cumemtrace_write_json
        self.write_json.argtypes = [ctypes.c_int]
        self.write_json.restype = ctypes.c_int
        # With the GIL held, the walk runs on this thread: no wait for the
        # tracer's own to get the GIL.
        held_by = getattr(ctypes.PyDLL(None), "cumemtrace_write_json_holders", None)
        if held_by is not None:
            held_by.argtypes = [ctypes.c_int]
            held_by.restype = ctypes.c_int
        self.write_json_holders = held_by

    @classmethod
    def find(cls):
        library = ctypes.CDLL(None)
        return cls(library) if hasattr(library, "cumemtrace_write_json") else None

    def without_exit_report(self):
        """No report file at the process's exit unless one was asked for:
        the tracer reads its settings once, at its first use, which this
        is when no CUDA call came before (then a report is written as
        asked). The environment is left as it was, for what the tests run."""
        if os.environ.get("CUMEMTRACE_FORMAT") or os.environ.get("CUMEMTRACE_OUTPUT"):
            return
        os.environ["CUMEMTRACE_FORMAT"] = "none"
        try:
            self.report()
        finally:
            del os.environ["CUMEMTRACE_FORMAT"]

    def report(self, holders=False):
        """The tracer's JSON report of now; with `holders`, who holds the
        arrays too (None if this tracer cannot say)."""
        write = self.write_json_holders if holders else self.write_json
        if write is None:
            return None
        with tempfile.TemporaryFile() as handle:
            if write(handle.fileno()) != 0:
                raise RuntimeError("cumemtrace could not write its report")
            handle.seek(0)
            return json.load(handle)


def held(report, host=False):
    """Bytes of GPU memory held per (stack, kind, api), as counted (see the
    module's text): live now, or at the program's end once it has ended;
    with `host`, the page-locked host memory held instead."""
    blocks_known = {c["kind"] for c in report.get("caches") or [] if c.get("view") == "blocks"}
    segments = {s["id"] for s in report.get("stacks", [])
                if s.get("cache_segment") and s["cache_segment"] in blocks_known}
    counted = {}
    groups = report.get("held_at_end", []) if report.get("program_end") else report.get("live", [])
    for group in groups:
        if group["kind"] in ADDRESS_SPACE or group["stack"] in segments or \
                (group["kind"] in HOST) != host:
            continue
        key = (group["stack"], group["kind"], group["api"])
        counted[key] = counted.get(key, 0) + group["bytes"]
    return counted


# Frames that are the test runner's, not the test's: this plugin's (it runs
# the test again for --cuda-leaks-repeat), pytest's and pluggy's; by their
# real paths, as the reports name the frames' files.
RUNNER = (os.path.dirname(os.path.realpath(__file__)) + os.sep,
          os.path.dirname(os.path.realpath(pytest.__file__)) + os.sep,
          os.sep + "_pytest" + os.sep, os.sep + "pluggy" + os.sep)


def runner_frame(frame):
    return frame.get("python") and any(part in os.path.realpath(frame.get("file") or "")
                                       for part in RUNNER)


def site(report, stack_id):
    """The site of a stack as the reports name it, "file:line in function",
    with the two frames shown after it, its callers ("< test_leaks:40"), which
    tell apart sites that share a helper (the report's own words where it has
    them: more callers where two stacks need them, the packages its call went
    through, which fold the test runner's frames); the test runner's frames are
    not among them."""
    frames = {f["id"]: f for f in report.get("frames", [])}
    stack = next((s for s in report.get("stacks", []) if s["id"] == stack_id), None)
    if not stack or not stack["frames"]:
        return "(no stack recorded: CUMEMTRACE_DEPTH=0 or below CUMEMTRACE_MIN_SIZE)"
    if stack.get("site_text"):
        text = stack["site_text"]
        for frame in (frames[i] for i in stack["frames"]):
            if runner_frame(frame):
                text = text.replace(f" < {frame.get('function') or '?'}:{frame.get('line')}", "")
        return text
    first = stack.get("site") or 0
    hidden = set(stack.get("hidden", []))
    shown = [i for i in range(first + 1, len(stack["frames"]))
             if i not in hidden and not runner_frame(frames[stack["frames"][i]])][:2]
    names = []
    for i in [first] + shown:
        frame = frames[stack["frames"][i]]
        if frame.get("file") and i == first:
            names.append(f"{frame['file']}:{frame['line']} in {frame['function'] or '?'}")
        elif frame.get("file"):
            names.append(f"{frame['function'] or '?'}:{frame['line']}")
        elif frame.get("function"):
            names.append(frame["function"])
        else:
            names.append(f"{os.path.basename(frame.get('module') or '?')}"
                         f"+0x{frame.get('module_offset', 0):x}")
    return " < ".join(names)


def gained(before, after):
    """What each (stack, kind, api) holds more in `after`, and the net change."""
    keys = set(before) | set(after)
    change = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    return {k: v for k, v in change.items() if v > 0}, sum(change.values())


def holder_texts(report):
    """{stack: "— held by ..."}: what holds most of each stack's arrays, in
    a report made with cumemtrace_write_json_holders (its paths come most
    bytes first)."""
    texts = {}
    for path in ((report or {}).get("holders") or {}).get("paths") or []:
        texts.setdefault(path["stack"], f" — held by {path['text']}")
    return texts


def describe(report, grown, limit=5, holders=None):
    """A line per site, largest first: stacks that differ only in frames
    not shown (the runner's) are one site, their bytes summed; with
    `holders` (a report that names them), who holds each."""
    sites = {}
    held_by = holder_texts(holders)
    for (stack, kind, api), count in grown.items():
        line = f"from {site(report, stack)} ({kind} via {api}){held_by.get(stack, '')}"
        sites[line] = sites.get(line, 0) + count
    lines = [f"  {format_bytes(count)} {line}"
             for line, count in sorted(sites.items(), key=lambda item: (-item[1], item[0]))[:limit]]
    if len(sites) > limit:
        lines.append(f"  ... and {len(sites) - limit} more sites")
    return "\n".join(lines)


def session_summary(report, limit=5):
    """The lines of the session's summary: what it holds at its end by site,
    and the tracer's growing sites, fastest first, with their rates as the
    reports say them (per call of the site, then per second; or per mark)."""
    counted = held(report)
    lines = [f"held at the end of the session: {format_bytes(sum(counted.values()))}"
             + (":" if counted else "")]
    lines += describe(report, counted, limit).splitlines() if counted else []
    host = held(report, host=True)
    if host:
        lines.append(f"page-locked host memory held at the end of the session (not counted "
                     f"against tests): {format_bytes(sum(host.values()))}:")
        lines += describe(report, host, limit).splitlines()
    growth = report.get("growth") or {}
    growing = growth.get("growing") or []
    per = "mark" if growth.get("mode") == "marks" else "second"
    if not growth:
        lines.append("growing: not known")
    elif not growing:
        lines.append(f"growing: none (over {growth.get('samples', 0)} observations)")
    else:
        lines.append(f"growing (leak suspects: what the site kept rose all along, over {growth['samples']} "
                     "observations):")
        for entry in growing[:limit]:
            rate = f"+{format_bytes(int(entry['rate']))} per {per}"
            calls = entry.get("calls") or 0   # absent from reports of earlier versions
            if per == "second" and calls and entry.get("rate_per_call", 0) >= 1:
                rate = (f"+{format_bytes(int(entry['rate_per_call']))} a call over {calls} "
                        f"call{'' if calls == 1 else 's'}, {rate}")
            lines.append(f"  {rate}, {format_bytes(entry['live_bytes'])} "
                         f"now, from {site(report, entry['stack'])}")
    return lines


def device_memory(report):
    """{device: (live bytes, peak bytes, bytes ever allocated)} of the device
    memory tests make, from the counters: where a framework's blocks are
    recorded (caches[].view "blocks"), its blocks' (PyTorch's tensors: a
    tensor carved from a cached segment raises no figure of the device's);
    else the device memory's."""
    blocks_known = {c["kind"] for c in report.get("caches") or [] if c.get("view") == "blocks"}
    figures = {}
    for device in report.get("devices", []):
        counters = device.get("counters") or {}
        kinds = sorted(k for k in blocks_known if k in counters) or ["device_memory"]
        live = peak = made = 0
        for kind in kinds:
            counted = (counters.get(kind) or {}).get("allocated_bytes") or {}
            live += counted.get("current", 0)
            peak += counted.get("peak", 0)
            made += counted.get("allocated", 0)
        figures[device.get("device")] = (live, peak, made)
    return figures


def peak_between(before, after):
    """The most device memory live between two reports beyond what was live
    at the first, on the device where it is most, and whether that is exact.
    It is where the process's peak rose in between (the new peak was reached
    then); elsewhere it is at most the earlier peak's margin and at most what
    was allocated in between, and at least what is live more at the end:
    exact where those meet (a test that allocated nothing: 0)."""
    first, then = device_memory(before), device_memory(after)
    most, exact = 0, True
    for device in set(first) | set(then):   # a device first used by the test: from nothing
        live, peak, made = first.get(device, (0, 0, 0))
        later_live, later_peak, later_made = then.get(device, (live, peak, made))
        if later_peak > peak:
            value, known = later_peak - live, True
        else:
            value = max(0, min(peak - live, later_made - made))
            known = value <= max(0, later_live - live)
        if value > most or (value == most and not known):
            most, exact = value, known
    return most, exact


class LimitChecker:
    """@pytest.mark.cuda_limit(peak=SIZE, leaks=SIZE) on any test, and with
    `measure_all` (--cuda-leaks, --cuda-leaks-repeat) every test's peak and
    what it left held, for the session's summary of the tests that held the
    most."""

    def __init__(self, tracer, measure_all):
        self.tracer = tracer
        self.measure_all = measure_all
        self.measured = {}                # nodeid -> (bytes left held, peak, peak exact)
        self.problems = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        marker = item.get_closest_marker("cuda_limit")
        if marker is None and not self.measure_all:
            yield
            return
        try:
            peak_limit = parse_size(marker.kwargs["peak"]) \
                if marker and marker.kwargs.get("peak") is not None else None
            leak_limit = parse_size(marker.kwargs["leaks"]) \
                if marker and marker.kwargs.get("leaks") is not None else None
        except ValueError as error:
            raise pytest.UsageError(f"{item.nodeid}: cuda_limit: {error}")
        before = self.tracer.report()
        outcome = yield
        if outcome.excinfo is not None:
            return
        after = self.tracer.report()
        peak, exact = peak_between(before, after)
        grown, net = gained(held(before), held(after))
        self.measured[item.nodeid] = (max(0, net), peak, exact)
        problems = []
        if peak_limit is not None and peak > peak_limit and exact:
            problems.append(f"{item.name} had {format_bytes(peak)} of GPU memory live beyond "
                            f"what was before it (limit: {format_bytes(peak_limit)})")
        elif peak_limit is not None and peak > peak_limit:
            item.warn(pytest.PytestWarning(
                f"cuda_limit(peak={format_bytes(peak_limit)}) cannot be told: the test did not "
                f"raise the process's peak, which an earlier test set {format_bytes(peak)} above "
                f"what was live before it"))
        if leak_limit is not None:
            if net > leak_limit:
                problems.append(f"{item.name} left {format_bytes(net)} of GPU memory held "
                                f"(limit: {format_bytes(leak_limit)}):\n" +
                                describe(after, grown, holders=self.tracer.report(holders=True)))
        if problems:
            self.problems[item.nodeid] = "\n".join(problems)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        problem = self.problems.pop(item.nodeid, None)
        if call.when != "call" or not problem:
            return
        if report.passed:
            report.outcome = "failed"
            report.longrepr = problem
        elif isinstance(report.longrepr, str):
            report.longrepr += "\n" + problem

    def heaviest(self, limit=5):
        """The lines naming the tests that left the most held at their end,
        their peaks beside (labelled so), then the highest peaks of those
        that left nothing held, which are not listed as holding."""
        def peak_text(peak, exact):
            return f"{'' if exact else 'at most '}{format_bytes(peak)}"
        kept = sorted(((name, *value) for name, value in self.measured.items() if value[0] > 0),
                      key=lambda entry: (-entry[1], entry[0]))[:limit]
        if kept:
            lines = ["tests that held the most at their end (GPU memory each left held):"]
            lines += [f"  {format_bytes(bytes_held)}  {name}  (peak {peak_text(peak, exact)})"
                      for name, bytes_held, peak, exact in kept]
        else:
            lines = ["tests that held the most at their end: none left GPU memory held"]
        peaks = sorted(((name, *value) for name, value in self.measured.items()
                        if value[0] == 0 and value[1] > 0),
                       key=lambda entry: (-entry[2], entry[0]))[:limit]
        if peaks:
            lines.append("the other tests' highest peaks (device memory live beyond what was "
                         "before each, all of it freed by their end):")
            lines += [f"  peak {peak_text(peak, exact)}  {name}" for name, _, peak, exact in peaks]
        return lines

    def pytest_terminal_summary(self, terminalreporter):
        if self.measure_all or not self.measured:
            return                        # the leak checker's summary says it
        terminalreporter.section("cumemtrace: GPU memory of the tests with limits")
        for line in self.heaviest():
            terminalreporter.write_line(line)


class LeakChecker:
    def __init__(self, tracer, config, below, repeat, limits):
        self.tracer = tracer
        self.limits = limits
        self.strict = bool(setting(config, "cuda_leaks"))
        self.repeat = repeat
        self.below = below
        self.problems = {}                # nodeid -> the failure's text

    def allowed(self, item):
        marker = item.get_closest_marker("cuda_leaks")
        if marker is None:
            return self.below
        value = marker.kwargs.get("allowed", marker.args[0] if marker.args else True)
        if value is False:
            return None
        if value is True:       # checked, with nothing allowed (not 1 byte)
            return self.below
        return max(self.below, parse_size(value))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        allowed = self.allowed(item)
        if allowed is None:
            yield
            return
        before_report = self.tracer.report()
        outcome = yield
        if outcome.excinfo is not None:
            return                        # failed on its own: nothing to add
        after_report = self.tracer.report()
        before, after = held(before_report), held(after_report)
        grown, net = gained(before, after)
        if self.strict and net > allowed:
            self.problems[item.nodeid] = (
                f"{item.name} left {format_bytes(net)} of GPU memory held"
                f"{' (allowed: ' + format_bytes(allowed) + ')' if allowed else ''}:\n"
                + describe(after_report, grown, holders=self.tracer.report(holders=True)))
            return
        if self.repeat:
            self.check_growth(item, after_report, after, allowed)

    def check_growth(self, item, report, first, allowed):
        """Run the test `repeat` more times: a leak grows at every run."""
        states, reports = [first], [report]
        for _ in range(self.repeat):
            item.runtest()
            reports.append(self.tracer.report())
            states.append(held(reports[-1]))
        steps = [gained(a, b) for a, b in zip(states, states[1:])]
        if all(net > allowed for _, net in steps):
            grown, net = gained(states[0], states[-1])
            every = {k: v for k, v in grown.items() if all(k in g for g, _ in steps)}
            self.problems[item.nodeid] = (
                f"{item.name} holds more GPU memory at each of {self.repeat} more runs: "
                f"{format_bytes(net // self.repeat)} a run, {format_bytes(net)} in all:\n"
                + describe(reports[-1], every or grown, holders=self.tracer.report(holders=True)))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        problem = self.problems.pop(item.nodeid, None)
        if call.when == "call" and problem and report.passed:
            report.outcome = "failed"
            report.longrepr = problem

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section("cumemtrace: GPU memory at the end of the session")
        for line in session_summary(self.tracer.report()) + self.limits.heaviest():
            terminalreporter.write_line(line)

    def pytest_report_header(self, config):
        modes = (["leaks"] if self.strict else []) + \
            ([f"growth over {self.repeat} more runs"] if self.repeat else [])
        return f"cumemtrace: GPU memory checked per test ({', '.join(modes)})"
