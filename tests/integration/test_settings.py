"""The tracer's settings as a user gives them: bad values, an output that
cannot be written, the tracer turned off, quiet and shallow stacks, reports
that must not overwrite files, and the examples as the README runs them."""

import glob
import os

from support import check, only, stack_functions


def test_bad_environment(traced):
    env = {"CUMEMTRACE_DEPTH": "deep", "CUMEMTRACE_FORMAT": "yaml", "CUMEMTRACE_MIN_SIZE": "big",
           "CUMEMTRACE_ENABLE": "perhaps", "CUMEMTRACE_TOP": "-3"}
    out, err, reports, _ = traced.run("examples/leak_loop", ["5"], env=env)
    untraced, _, _, _ = traced.run("examples/leak_loop", ["5"], preload=False)
    check(out == untraced, "program output unchanged")
    lines = [line for line in err.splitlines() if line.startswith("cumemtrace: CUMEMTRACE_")]
    check(len(lines) == 5, f"one line per bad variable: {lines}")
    for name, value in env.items():
        check(any(f"{name}='{value}'" in line and "using" in line for line in lines),
              f"{name} named with its value and the default")
    check(len(reports) == 1, "defaults used: the JSON report is still written")


def test_bad_values_escaped(traced):
    """A malformed value is echoed escaped: a newline does not split the one
    line, a terminal's escape sequence and bytes that are not ASCII reach no
    terminal, and a very long value is cut short."""
    env = {"CUMEMTRACE_DEPTH": "1\ncumemtrace: forged", "CUMEMTRACE_TOP": "\x1b[2J\x07",
           "CUMEMTRACE_MIN_SIZE": "it's\\", "CUMEMTRACE_SAMPLE_MS": "9" * 5000}
    out, err, reports, _ = traced.run("examples/leak_loop", ["2"], env=env)
    lines = err.splitlines()
    named = [line for line in lines if line.startswith("cumemtrace: CUMEMTRACE_")]
    check(len(named) == 4 and not any("forged" in line and "CUMEMTRACE_" not in line
                                      for line in lines),
          f"one line per value, none split: {lines}")
    check("CUMEMTRACE_DEPTH='1\\ncumemtrace: forged'" in err and
          "CUMEMTRACE_TOP='\\x1b[2J\\x07'" in err and "CUMEMTRACE_MIN_SIZE='it\\'s\\\\'" in err,
          f"escaped: {named}")
    check(all(ord(c) >= 0x20 and ord(c) < 0x7f for line in named for c in line),
          f"no control byte: {named!r}")
    check(any(line.startswith("cumemtrace: CUMEMTRACE_SAMPLE_MS='999") and "...'" in line and
              len(line) < 300 for line in named), f"a long value cut short: {named}")


def test_unwritable_output(traced):
    env = {"CUMEMTRACE_OUTPUT": "/nonexistent-cumemtrace-dir/report"}
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"], env=env)
    untraced, _, _, _ = traced.run("examples/leak_loop", ["3"], preload=False)
    check(out == untraced, "program output unchanged")
    check("cannot write report to '/nonexistent-cumemtrace-dir/report.json': No such file or directory"
          in err, f"one clear line: {err[-500:]!r}")


def test_disabled(traced):
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_ENABLE": "0"})
    check(reports == [] and "cumemtrace" not in err, "nothing written when disabled")


def test_quiet_and_depth(traced):
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"],
                                      env={"CUMEMTRACE_QUIET": "1", "CUMEMTRACE_DEPTH": "2"})
    check(err == "", f"quiet: nothing on stderr: {err!r}")
    report = only(reports)
    check(all(len(s["frames"]) <= 2 for s in report["stacks"]), "depth 2 honoured")
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_MIN_SIZE": "8M"})
    report = only(reports)
    small = [g for g in report["live"] if g["bytes"] == 3 * (4 << 20)]
    check(small and all(len(s["frames"]) == 0 for s in report["stacks"] if s["id"] == small[0]["stack"]),
          "blocks under CUMEMTRACE_MIN_SIZE are counted without a stack")
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"], env={"CUMEMTRACE_FORMAT": "none"})
    check(not os.listdir(traced.dir) and "Memory by device" in err,
          f"format none: no file, the summary still on stderr: {os.listdir(traced.dir)} {err[-200:]!r}")
    out, err, reports, _ = traced.run("examples/leak_loop", ["3"],
                                      env={"CUMEMTRACE_FORMAT": "none", "CUMEMTRACE_QUIET": "1"})
    check(not os.listdir(traced.dir) and err == "", f"and quiet: nothing at all: {err!r}")


def test_examples(traced):
    for name, site in (("pinned_pileup", "load_batch"), ("async_leak", "handle_request"),
                       ("vmm_unreleased", "create_spare")):
        out, err, reports, _ = traced.run(f"examples/{name}")
        report = only(reports)
        top = report["live"][0] if report.get("live") else {}
        check(site in stack_functions(report, top.get("stack", 0)),
              f"{name}: the top leak is at {site}: {top}")
        check(site in err, f"{name}: summary names {site}")
        pool = report["devices"][0]["default_pool"]
        if name == "async_leak":
            # 30 requests of 1 MiB, 10 kept: the simulator's pool reserves in
            # 32 MiB chunks, so the pool says 10 MiB used of 32 MiB reserved.
            check(pool == {"reserved_bytes": 32 << 20, "reserved_peak": 32 << 20,
                           "used_bytes": 10 << 20, "used_peak": 11 << 20},
                  f"the default pool's reserved and used bytes: {pool}")
            check("22.0 MiB reserved but unused" in err, "the summary shows the pool's idle bytes")
            check(report["fragmentation"]["verdict"] == "idle_pool_reserve" and
                  report["fragmentation"]["pool_idle_bytes"] == 22 << 20,
                  f"and the fragmentation section's verdict: {report['fragmentation']}")
        else:
            check(pool is None, f"{name}: no stream-ordered allocation, no pool figures: {pool}")


def test_follow_and_overwrite(traced):
    shell = ["-c", 'echo "[$LD_PRELOAD]"']
    out, err, reports, _ = traced.run("/bin/sh", shell, env={"CUMEMTRACE_FOLLOW": "0"})
    check("libcumemtrace" not in out, f"CUMEMTRACE_FOLLOW=0 leaves children alone: {out!r}")
    out, err, reports, _ = traced.run("/bin/sh", shell)
    check("libcumemtrace" in out, f"children are traced by default: {out!r}")
    out, err, reports, _ = traced.run("tests/fork_child", env={"CUMEMTRACE_OUTPUT": "{dir}/fixed"})
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(traced.dir, "*.json")))
    check(len(names) == 2 and "fixed.json" in names, f"no report overwritten: {names}")
