"""The pytest plugin on a GPU, with real PyTorch in its default caching mode.

    python3 tests/gpu/check_pytest_plugin.py --build build

Writes a small test suite into a fresh folder (SUITE below) and runs it as a
user would, `cumemtrace run -- python -m pytest --cuda-leaks`, there:
test_leaks keeps four 4 MiB tensors in a module list (LEAK-LINE) and must
fail naming that line once, what holds them ("held by"), and no frame of the
plugin; test_clean and test_within_limits pass; test_over_peak exceeds its
cuda_limit(peak="1 MiB") with its 16 MiB tensor (carved from PyTorch's
cache: the tensors' peak, not the segments') and fails saying so; a first
.item()'s pinned staging buffer fails no test; the session summary is
printed; no report file is left in the folder. Prints PASS or FAIL per check
and the pytest output; exits 1 on any FAIL.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SUITE = '''\
import pytest
import torch

kept = []


def test_leaks():
    for _ in range(4):
        kept.append(torch.ones(1 << 20, device="cuda"))  # LEAK-LINE


def test_clean():
    x = torch.ones(1 << 20, device="cuda")
    y = x * 2
    assert float(y[0]) == 2.0


@pytest.mark.cuda_limit(peak="1 MiB")
def test_over_peak():
    x = torch.ones(4 << 20, device="cuda")
    assert float(x.sum()) == 4 << 20


@pytest.mark.cuda_limit(peak="64 MiB", leaks=0)
def test_within_limits():
    x = torch.ones(1 << 20, device="cuda")
    assert float(x[0]) == 1.0
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    args = parser.parse_args()
    tool = os.path.join(os.path.abspath(args.build), "cumemtrace")
    directory = tempfile.mkdtemp(prefix="cumemtrace-pytest-")
    with open(os.path.join(directory, "test_gpu_suite.py"), "w") as handle:
        handle.write(SUITE)
    leak_line = next(n for n, text in enumerate(SUITE.splitlines(), 1) if "LEAK-LINE" in text)
    run = subprocess.run([tool, "run", "--", sys.executable, "-m", "pytest", "-p",
                          "no:cacheprovider", "--cuda-leaks", "-q", "test_gpu_suite.py"],
                         cwd=directory, capture_output=True, text=True, timeout=400)
    out = run.stdout + run.stderr
    print(out[-6000:])
    failures = 0

    def check(ok, what):
        nonlocal failures
        print("PASS" if ok else "FAIL", what, flush=True)
        failures += not ok

    outcome = {m.group(2): m.group(1) for m in
               re.finditer(r"^(FAILED|PASSED|ERROR) test_gpu_suite.py::(\w+)", out, re.M)}
    summary = re.search(r"(\d+) failed, (\d+) passed", out)
    check(summary and summary.groups() == ("2", "2"), f"2 failed, 2 passed: {summary and summary.group(0)}")
    check(outcome.get("test_leaks") == "FAILED" and outcome.get("test_over_peak") == "FAILED",
          f"the leak and the peak fail: {outcome}")
    leak_text = out.split("test_leaks", 1)[-1].split("test_over_peak", 1)[0]
    check(len(re.findall(rf"test_gpu_suite\.py:{leak_line}\b", leak_text)) >= 1,
          f"test_leaks names line {leak_line}")
    site_lines = [l for l in leak_text.splitlines() if re.search(rf"test_gpu_suite\.py:{leak_line} ", l)]
    check(len(site_lines) <= 1, f"the site once: {site_lines}")
    check("held by" in leak_text, "what holds the leak is named")
    check("LeakChecker" not in out and "cumemtrace_pytest/__init__.py" not in out,
          "no frame of the plugin in the messages")
    check("test_over_peak had 16.0 MiB of GPU memory live beyond what was before it "
          "(limit: 1.00 MiB)" in out, "test_over_peak: its 16 MiB tensor, over its limit")
    check("cumemtrace: GPU memory at the end of the session" in out, "the session summary")
    left = [f for f in os.listdir(directory) if f.startswith("cumemtrace")]
    check(not left, f"no report file left in the folder: {left}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
