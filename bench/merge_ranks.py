#!/usr/bin/env python3
"""`cumemtrace merge` on jobs of 512 to 4,096 ranks: peak memory and time.

    python3 bench/merge_ranks.py [--build build] [--report REPORT] [--ranks 512,4096]
        [--before PATH [--before-folder]] [--repeat N] [--keep DIR]

Makes each job from one rank's report (REPORT: a real one, such as
tests/gpu/ddp-proof.sh's rank0.json; by default an exit report of
examples/leak_loop traced on the simulator, its timeline on) with
tests/integration/job_reports.py: eight ranks a host, rank 77 holding 1.6 GiB
more at the report's largest stack, rank 12 leaving an OOM report and rank 400
none, up to 200 KiB of difference between ranks at another stack.
Then runs `cumemtrace merge` on the job's folder, text out, and prints its
peak resident memory (GNU time's, where /usr/bin/time is), its wall time,
the input's size and the seconds per GB, the same in CPU time (user and
system), and whether the first 15 lines name rank 77, its host and the
site. --before PATH runs another build's command too (one that takes
files only: they are given in rank order; with --before-folder, the job's
folder, as the other), for docs/PERFORMANCE.md's before-and-after table.
--repeat N runs each command N times, the builds one after the other in
turn, and prints the fastest time of each (a machine shared with other
work slows some runs, never speeds one) and its largest peak.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import job_reports  # noqa: E402


def source_report(build, directory):
    """An exit report of examples/leak_loop on the simulator, with its
    timeline: REPORT's stand-in when none is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMEMTRACE_")}
    env.update(LD_LIBRARY_PATH=os.path.join(build, "sim"), CUMEMTRACE_QUIET="1",
               CUMEMTRACE_EVENTS="100000", CUMEMTRACE_SAMPLE_MS="10", RANK="0", WORLD_SIZE="2",
               CUMEMTRACE_OUTPUT=os.path.join(directory, "source-%r"),
               LD_PRELOAD=os.path.join(build, "libcumemtrace.so"))
    subprocess.run([os.path.join(build, "examples", "leak_loop"), "40"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(directory, "source-0.json")


def measure(command):
    """(peak RSS in MiB, seconds, CPU seconds, stdout) of one run. The peak
    is GNU time's (its child's ru_maxrss): a child forked from this Python
    would count this interpreter's pages as its own. CPU seconds (user and
    system) are the merge's own, what other work on the machine leaves
    alone."""
    timer = shutil.which("time", path="/usr/bin:/bin")
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as peak:
        wrapped = [timer, "-f", "%M %U %S", "-o", peak.name, *command] if timer else command
        child = subprocess.Popen(wrapped, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.monotonic() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
        if timer:
            kib, user, system = peak.read().split()[-3:]
            kib, cpu = int(kib), float(user) + float(system)
        else:
            kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"merge_ranks.py: {' '.join(command[:3])} ... failed")
    return kib / 1024, seconds, cpu, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--report")
    parser.add_argument("--ranks", default="512,4096")
    parser.add_argument("--before")
    parser.add_argument("--before-folder", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", help="make the jobs in DIR and keep them")
    args = parser.parse_args()
    command = os.path.join(args.build, "cumemtrace")
    work = args.keep or tempfile.mkdtemp(prefix="cumemtrace-merge-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        report = args.report or source_report(args.build, work)
        print(f"source report: {os.path.getsize(report)} bytes")
        print(f"{'ranks':>6} {'input':>9} {'build':>7} {'peak RSS':>10} {'time':>8} {'s/GB':>6} "
              f"{'CPU':>7} {'CPU s/GB':>8}  answer")
        for ranks in [int(n) for n in args.ranks.split(",")]:
            job = os.path.join(work, f"job-{ranks}")
            shutil.rmtree(job, ignore_errors=True)
            missing = [r for r in (400,) if r < ranks]
            _, size, site = job_reports.make(report, job, ranks, outliers={77 % ranks: 1600},
                                              missing=missing, oom=[12], jitter_kib=200)
            runs = [("after", [command, "merge", job])]
            if args.before and args.before_folder:
                runs.insert(0, ("before", [args.before, "merge", job]))
            elif args.before:
                files = sorted(glob.glob(os.path.join(job, "*", "*.json")),
                               key=lambda p: [int(n) for n in re.findall(r"\d+", os.path.basename(p))])
                runs.insert(0, ("before", [args.before, "merge", *files]))
            best = {}
            for _ in range(max(args.repeat, 1)):
                for name, argv in runs:
                    rss, seconds, cpu, text = measure(argv)
                    if name in best:
                        rss = max(rss, best[name][0])
                        seconds = min(seconds, best[name][1])
                        cpu = min(cpu, best[name][2])
                    best[name] = (rss, seconds, cpu, text)
            for name, _ in runs:
                rss, seconds, cpu, text = best[name]
                head = "\n".join(text.splitlines()[:15])
                answered = (f"rank: {77 % ranks} on node-{(77 % ranks) // 8:03d}" in head and
                            site is not None and site in head)
                line = next((n for n, l in enumerate(text.splitlines(), 1) if "Divergent rank" in l), None)
                print(f"{ranks:>6} {size / 2**20:>7.0f}MB {name:>7} {rss:>8.1f}MB {seconds:>7.2f}s "
                      f"{seconds / (size / 1e9):>6.1f} {cpu:>6.2f}s {cpu / (size / 1e9):>8.1f}  "
                      f"{'rank, host, line in the first 15 lines' if answered else f'divergent rank on line {line}'}")
            if not args.keep:
                shutil.rmtree(job, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
