"""Crash dumps: written at a fatal signal by the tracer, beside the
program's own handlers, where they cannot be written, and under a storm of
signals; symbolized afterwards by the command."""

import glob
import os

from support import check, device_counters, user_functions, by_reason, symbolize, one_dump


def test_crash_segv(traced):
    out, err, reports, _ = traced.run("tests/crash", ["segv-threads"], expect_rc=-11)
    check("crash dump written to" in err, f"one line names the dump: {err[-300:]!r}")
    dump = one_dump(traced)
    if not dump:
        return
    rc, text, report = symbolize(dump)
    check(rc == 0 and report is not None, f"symbolize: {rc} {text[-500:]}")
    if not report:
        return
    check(report["event"]["type"] == "crash" and report["event"]["signal"] == 11,
          f"crash event: {report['event']}")
    held = [b for b in report["blocks"]["items"] if b["size"] >= 1 << 20]
    check(sorted(b["size"] for b in held) == [1 << 20, 2 << 20, 3 << 20],
          f"the main thread's 3 blocks: {held}")
    check(all("hold" in user_functions(report, b["stack"]) for b in held),
          "their stacks name hold() (symbolized offline)")
    check("hold" in text and "crash.c:" in text, "text report with file:line")


def test_crash_abort(traced):
    out, err, reports, _ = traced.run("tests/crash", ["abort"], env={"SIMCUDA_ABORT_AT": "3"},
                                      expect_rc=-6)
    dump = one_dump(traced)
    if not dump:
        return
    rc, text, report = symbolize(dump)
    check(rc == 0 and report and report["event"]["signal"] == 6, f"abort dump: {text[-300:]}")
    if report:
        check(report["blocks"]["total"] == 2, f"2 live blocks: {report['blocks']['total']}")
        check(report["event"]["lock"] == "taken", "the lock was free: abort came from the driver")


def test_crash_own_handler(traced):
    out, err, reports, _ = traced.run("tests/crash", ["own-handler"], expect_rc=3)
    check("own handler ran" in out, f"the program's own SIGSEGV handler still runs: {out!r}")
    dump = one_dump(traced)
    if dump:
        rc, text, report = symbolize(dump)
        check(rc == 0 and report and report["blocks"]["total"] >= 3, "dump written before it")


def test_crash_unwritable(traced):
    out, err, reports, _ = traced.run("tests/crash", ["segv-threads"],
                                      env={"CUMEMTRACE_OUTPUT": "/nonexistent-cumemtrace/x"},
                                      expect_rc=-11)
    check("cannot write the crash dump to '/nonexistent-cumemtrace/x.dump': No such file or "
          "directory" in err, f"one clear line, with the path and the reason: {err[-300:]!r}")


def test_exit_in_handler(traced):
    # The SIGALRM handler's exit() runs in a signal handler: a dump stands in
    # for the report (the full report could hang on a lock the interrupted
    # code holds: a CUDA call's, malloc's). The program exits 0, once, and
    # what it holds is on record.
    seen = set()
    for attempt in range(8):
        out, err, reports, _ = traced.run("tests/crash", ["exit-in-handler"])
        dumps = glob.glob(os.path.join(traced.dir, "*.dump"))
        check(len(reports) + len(dumps) == 1,
              f"one exit record, report or dump: {len(reports)} reports, {len(dumps)} dumps")
        if dumps:
            seen.add("dump")
            check("exit() from a signal handler" in err, f"the dump is announced: {err[-300:]!r}")
            rc, text, report = symbolize(dumps[0])
            check(rc == 0 and report and report["reason"] == "exit" and report["event"] is None,
                  f"the dump reads back as an exit report: {rc} {text[-300:]}")
            reports = [report]
        else:
            seen.add("report")
        sizes = sorted(b["size"] for b in reports[0]["blocks"]["items"])
        check((1 << 20) in sizes and (2 << 20) in sizes,
              f"the 1 MiB and 2 MiB blocks held at exit are listed: {sizes}")
    print(f"exit-in-handler: {sorted(seen)} seen")


def test_signal_storm(traced):
    out, err, reports, _ = traced.run("tests/crash", ["usr2-storm"])
    snapshots = [r for r in reports if r["reason"] == "signal"]
    check(1 <= len(snapshots) <= 1000, f"snapshots written: {len(snapshots)}")
    check(all(r["event"] == {"type": "signal", "signal": 12} for r in snapshots),
          "each snapshot names its signal")
    final = by_reason(reports, "exit")
    counters = device_counters(final, 0, "device") if final else None
    check(counters and counters["allocation"]["allocated"] == 20003 and
          counters["allocation"]["current"] == 403,
          f"exact counts after the storm: {counters and counters['allocation']}")
    expected = sum(1024 + (t * 131 + i * 17) % 8192 for t in range(4) for i in range(5000))
    check(out == f"storm: {expected} bytes allocated\n", f"results unchanged: {out!r}")


def test_signal_chained(traced):
    out, err, reports, _ = traced.run("tests/crash", ["usr2-chained"])
    check("own handler saw 20 signals" in out, f"the program's handler saw every signal: {out!r}")
    check(any(r["reason"] == "signal" for r in reports), "and snapshots were written")
    out, err, reports, _ = traced.run("tests/crash", ["usr2-chained"], env={"CUMEMTRACE_SIGNAL": "off"})
    check(not any(r["reason"] == "signal" for r in reports), "CUMEMTRACE_SIGNAL=off: none")
