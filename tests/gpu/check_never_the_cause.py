"""The tracer is never the cause (issue 27), on a GPU with PyTorch.

    python3 tests/gpu/check_never_the_cause.py --build build [CHECK ...]

Each check runs a small PyTorch program on the GPU, traced and untraced:

  descriptors  the first free descriptor after PyTorch's CUDA start-up is
               the same traced as untraced (the tracer's own sit above);
  snapshot     the program closes every descriptor above 2 after its first
               CUDA call, opens 8 files of its own, and sends itself 200
               SIGUSR2: its files stay empty, and snapshots are written;
  detach       the program forks a child that calls setsid(), puts
               /dev/null on 0-2 and lives 30 s: whoever reads the program's
               output to its end is done as soon as untraced (within 10 s);
  live         `cumemtrace live PID --once` shows the running program (the
               peer's credentials checked: PID itself, of PID's owner);
  warnings     a model and its optimizer, a snapshot (the tracer classes the
               tensors with Python of its own), under -W error and without:
               the program's stderr and exit status as untraced, no warning
               (issue 48: torch.distributed.reduce_op's FutureWarning).

Prints PASS or FAIL per check with what it saw; exits 1 on any FAIL.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

PROGRAMS = {
    "descriptors": """
import os, torch
torch.zeros(1 << 20, device="cuda")
fd = os.open("/dev/null", os.O_RDONLY)
print("first", fd)
""",
    "snapshot": """
import os, signal, time, torch
x = torch.zeros(1 << 20, device="cuda")
os.closerange(3, 65536)
files = [os.open(f"own-{i}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600) for i in range(8)]
for i in range(200):
    os.kill(os.getpid(), signal.SIGUSR2)
    time.sleep(0.001)
time.sleep(1)
print("bytes", sum(os.fstat(f).st_size for f in files))
""",
    "detach": """
import os, time, torch
x = torch.zeros(1 << 20, device="cuda")
if os.fork() == 0:
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(30)
    os._exit(0)
print("parent done")
""",
    "warnings": """
import ctypes, torch
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda()
optimizer = torch.optim.Adam(model.parameters())
model(torch.randn(64, 256, device="cuda")).sum().backward()
optimizer.step()
process = ctypes.CDLL(None)
if hasattr(process, "cumemtrace_snapshot"):
    process.cumemtrace_snapshot(None)
print("done")
""",
    "live": """
import os, sys, torch
x = torch.zeros(1 << 20, device="cuda")
print(os.getpid(), flush=True)
sys.stdin.readline()
""",
}


def environment(build, directory, traced):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMEMTRACE_")}
    env.pop("LD_PRELOAD", None)
    if traced:
        env["LD_PRELOAD"] = os.path.join(build, "libcumemtrace.so")
        env["CUMEMTRACE_OUTPUT"] = os.path.join(directory, "report-%p")
        env["CUMEMTRACE_QUIET"] = "1"
        env["CUMEMTRACE_FORMAT"] = "text"
    return env


def run(build, name, traced, options=()):
    directory = tempfile.mkdtemp(prefix=f"cumemtrace-gpu-{name}-")
    started = time.monotonic()
    completed = subprocess.run([sys.executable, *options, "-c", PROGRAMS[name]], cwd=directory,
                               env=environment(build, directory, traced), capture_output=True,
                               text=True, timeout=300)
    return completed, time.monotonic() - started, directory


def check_descriptors(build):
    traced, _, _ = run(build, "descriptors", True)
    untraced, _, _ = run(build, "descriptors", False)
    ok = traced.returncode == 0 and traced.stdout == untraced.stdout and traced.stdout
    return ok, f"traced {traced.stdout.strip()!r}, untraced {untraced.stdout.strip()!r}"


def check_snapshot(build):
    completed, _, directory = run(build, "snapshot", True)
    snapshots = glob.glob(os.path.join(directory, "report-*-signal-*.txt"))
    ok = completed.returncode == 0 and completed.stdout == "bytes 0\n" and snapshots
    return ok, f"{completed.stdout.strip()!r}, {len(snapshots)} snapshots, " \
               f"status {completed.returncode} {completed.stderr[-200:]!r}"


def check_detach(build):
    # The child outlives both runs by far: a reader held by it waits 30 s.
    # PyTorch's start and the exit report take seconds of their own, so the
    # traced run is held against the untraced one, not against a fixed time.
    untraced, plain, _ = run(build, "detach", False)
    completed, took, _ = run(build, "detach", True)
    ok = completed.returncode == 0 and untraced.returncode == 0 and took < plain + 10
    return ok, (f"output read to its end in {took:.2f} s traced, {plain:.2f} s untraced "
                "(the detached child lives 30 s)")


def check_live(build):
    directory = tempfile.mkdtemp(prefix="cumemtrace-gpu-live-")
    process = subprocess.Popen([sys.executable, "-c", PROGRAMS["live"]], cwd=directory,
                               env=environment(build, directory, True), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = int(process.stdout.readline())
    try:
        shown = subprocess.run([os.path.join(build, "cumemtrace"), "live", str(pid), "--once"],
                               capture_output=True, text=True, timeout=60)
    finally:
        process.communicate("go\n", timeout=120)
    ok = shown.returncode == 0 and f"pid {pid}" in shown.stdout
    return ok, f"status {shown.returncode} {shown.stderr.strip()!r}"


def check_warnings(build):
    said, ok = [], True
    for options in (["-W", "error"], []):
        runs = [run(build, "warnings", traced, options)[0] for traced in (True, False)]
        errs = [[line for line in r.stderr.splitlines() if not line.startswith("cumemtrace:")]
                for r in runs]
        same = runs[0].returncode == runs[1].returncode == 0 and errs[0] == errs[1] and \
            "Warning" not in "".join(errs[0])
        ok = ok and same
        said.append(f"{' '.join(options) or 'default'}: status {runs[0].returncode} traced, "
                    f"{runs[1].returncode} untraced, stderr {errs[0][-2:]!r}")
    return ok, "; ".join(said)


CHECKS = {"descriptors": check_descriptors, "snapshot": check_snapshot, "detach": check_detach,
          "live": check_live, "warnings": check_warnings}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("checks", nargs="*", default=list(CHECKS))
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    failed = 0
    for name in args.checks:
        ok, said = CHECKS[name](build)
        print(f"{'PASS' if ok else 'FAIL'} {name}: {said}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
