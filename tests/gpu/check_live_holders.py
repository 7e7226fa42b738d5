"""Who holds the memory, asked of a running PyTorch program on a GPU.

    python3 tests/gpu/check_live_holders.py --build build

Starts this file's program (--program) under the tracer with the live view
on (CUMEMTRACE_LIVE=1): it keeps 40 tensors of 1 MiB in the global list
`kept` (KEEP-LINE), makes and drops a temporary every 10 ms, and waits.
`cumemtrace live --holders PID` must answer within 10 s naming `kept`
("held by program().kept, a list of 40 tensors": a local of the running
function) and the line that made them; `live --once` must not
walk. The program's printed result must be the same as untraced. Prints PASS
or FAIL per check; exits 1 on any FAIL.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


def program(ready, stop):
    import torch
    kept = []
    for _ in range(40):
        kept.append(torch.ones(256 * 1024, device="cuda"))  # KEEP-LINE
    torch.cuda.synchronize()
    with open(ready + ".tmp", "w") as handle:
        handle.write(f"{os.getpid()}\n")
    os.rename(ready + ".tmp", ready)
    deadline = time.monotonic() + 60
    while not os.path.exists(stop) and time.monotonic() < deadline:
        scratch = torch.ones(1024, device="cuda")
        del scratch
        time.sleep(0.01)
    print("result:", len(kept), float(sum(t.sum().item() for t in kept)), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--program", nargs=2, metavar=("READY", "STOP"))
    args = parser.parse_args()
    if args.program:
        program(*args.program)
        return 0
    build = os.path.abspath(args.build)
    tool = os.path.join(build, "cumemtrace")
    keep_line = next(n for n, text in enumerate(open(HERE), 1) if text.rstrip().endswith("# KEEP-LINE"))
    failures = 0

    def check(ok, what):
        nonlocal failures
        print("PASS" if ok else "FAIL", what, flush=True)
        failures += not ok

    results = {}
    for traced in (False, True):
        directory = tempfile.mkdtemp(prefix="cumemtrace-live-")
        ready, stop = os.path.join(directory, "ready"), os.path.join(directory, "stop")
        env = dict(os.environ)
        if traced:
            env.update(LD_PRELOAD=os.path.join(build, "libcumemtrace.so"), CUMEMTRACE_LIVE="1",
                       CUMEMTRACE_QUIET="1", CUMEMTRACE_OUTPUT=os.path.join(directory, "report"))
        process = subprocess.Popen([sys.executable, HERE, "--program", ready, stop], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3000):
            if os.path.exists(ready) or process.poll() is not None:
                break
            time.sleep(0.02)
        if traced and os.path.exists(ready):
            pid = int(open(ready).read())
            started = time.monotonic()
            asked = subprocess.run([tool, "live", "--holders", str(pid)], capture_output=True,
                                   text=True, timeout=60)
            waited = time.monotonic() - started
            held = asked.stdout.split("Held by", 1)[-1]
            print(asked.stdout[-1500:])
            check(asked.returncode == 0 and "kept, a list of 40 tensors" in held and
                  f":{keep_line}" in held and waited < 10,
                  f"live --holders named kept (40 tensors, line {keep_line}) in {waited:.1f} s "
                  f"(status {asked.returncode}) {asked.stderr.strip()[:300]}")
            once = subprocess.run([tool, "live", "--once", str(pid)], capture_output=True,
                                  text=True, timeout=60)
            check(once.returncode == 0 and "Held by" not in once.stdout, "live --once walks nothing")
        open(stop, "w").close()
        out, err = process.communicate(timeout=120)
        results[traced] = [line for line in out.splitlines() if line.startswith("result:")]
        if err.strip():
            print(("traced" if traced else "untraced"), "stderr:", err.strip()[-800:])
    check(results[False] and results[False] == results[True],
          f"results the same: {results[False]} {results[True]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
