"""The benchmarks' own arithmetic, where a figure of docs/PERFORMANCE.md
comes from it and no GPU is needed to check it: bench/gpu_cost.py --pool,
which reads the in-process rows of several calls as one."""

import json
import os
import subprocess
import sys
import tempfile

import support
from support import check

GPU_COST = os.path.join(support.SOURCE, "bench", "gpu_cost.py")


def pool(*paths):
    return subprocess.run([sys.executable, GPU_COST, "--pool", *paths], capture_output=True,
                          text=True)


def test_gpu_cost_pools_calls():
    """Two calls' processes pooled: the median of all the processes'
    medians, an interval inside their range, each call's own median; a
    missing file, and a line that is not --raw's, refused in one line that
    names them."""
    with tempfile.TemporaryDirectory(prefix="cumemtrace-pool-") as directory:
        pooled_calls(directory)


def pooled_calls(directory):
    def call(name, medians):
        path = os.path.join(directory, name)
        with open(path, "w") as raw:
            for median in medians:
                # 9 pairs a process, its median `median`, the others spread around it
                on = [10 * median * (1 + d / 100) for d in (-4, -3, -2, -1, 0, 1, 2, 3, 4)]
                raw.write(json.dumps({"model": "transformer", "row": "tensors traced",
                                      "on_ms": on, "off_ms": [10.0] * 9}) + "\n")
        return path

    first, second = call("a.jsonl", (1.02, 1.04, 1.06)), call("b.jsonl", (1.01, 1.03))
    done = pool(first, second)
    check(done.returncode == 0, f"--pool: {done.returncode} {done.stderr}")
    row = [line for line in done.stdout.splitlines() if line.startswith("| transformer |")]
    check(len(row) == 1, f"one pooled row: {done.stdout}")
    cells = [cell.strip() for cell in row[0].strip("|").split("|")]
    check(cells[2] == "5" and cells[3] == "1.030x", f"5 processes, median 1.030x: {cells}")
    low, high = (float(x) for x in cells[4].rstrip("x").split("-"))
    check(1.0 <= low <= 1.030 <= high <= 1.07, f"interval within the processes: {cells[4]}")
    check(cells[5] == "1.040 (1) 1.020 (2)", f"each call's median: {cells[5]}")

    missing = pool(first, os.path.join(directory, "none.jsonl"))
    check(missing.returncode != 0 and "none.jsonl: cannot read it" in missing.stderr and
          missing.stderr.count("\n") == 1, f"a missing file: {missing.stderr!r}")
    with open(second, "a") as raw:
        raw.write('{"model": "transformer"}\n')
    refused = pool(first, second)
    check(refused.returncode != 0 and f"{second}:3:" in refused.stderr and
          refused.stderr.count("\n") == 1, f"a bad line: {refused.returncode} {refused.stderr!r}")
