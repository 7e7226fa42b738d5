"""The pytest plugin's per-test limits (@pytest.mark.cuda_limit), its
failure messages (each site once, none of its own frames), the session's
summary of the tests that held the most, and no report file left in the
working directory unless one was asked for."""

import glob
import os
import sys
import tempfile

import support
from support import check, line_of


def run_suite(traced, suite, *options, run_options=("--quiet",)):
    """pytest on `suite` under `cumemtrace run`, in a fresh directory:
    (its output, the files left in that directory)."""
    tool_path = os.path.join(support.BUILD, "cumemtrace")
    command = ["run", *run_options, "--", sys.executable, "-m", "pytest", "-p",
               "no:cacheprovider", "-q", *options, suite]
    env = {"CUMEMTRACE_OUTPUT": ""}     # as a user's shell has it: unset
    out, err, _, _ = traced.run(tool_path, command, preload=False, expect_rc=None, env=env)
    return out + err, sorted(os.listdir(traced.dir))


def test_pytest_limits(traced):
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_limits")
    script = os.path.join(suite, "test_limits.py")
    text, left = run_suite(traced, suite)
    check("2 failed, 2 passed" in text, f"two tests over their limits fail:\n{text}")
    check("test_peak_over had 64.0 MiB of GPU memory live beyond what was before it "
          "(limit: 1.00 MiB)" in text, f"the peak over its limit, said:\n{text}")
    allocate_line = line_of(script, "assert cuda.cudaMalloc")
    check(f"test_leaks_over left 1.00 MiB of GPU memory held (limit: 512 KiB):\n"
          f"  1.00 MiB from {script}:{allocate_line} in allocate < "
          f"test_leaks_over:{line_of(script, 'LEAK-LINE')} (device via cudaMalloc)" in text,
          f"what it left held over its limit, by line:\n{text}")
    check("test_within" not in text.split("FAILURES")[-1].split("GPU memory of the tests")[0],
          f"within its limits: passes:\n{text}")
    summary = text.split("GPU memory of the tests with limits", 1)[-1]
    check("tests that held the most at their end (GPU memory each left held):\n"
          "  1.00 MiB  test_limits.py::test_leaks_over  (peak 1.00 MiB)\n"
          "the other tests' highest peaks (device memory live beyond what was before each, "
          "all of it freed by their end):\n"
          "  peak 64.0 MiB  test_limits.py::test_peak_over\n"
          "  peak 2.00 MiB  test_limits.py::test_within\n" in summary,
          f"a summary of the tests with limits, by what each left held, peaks apart:\n{summary}")


def test_pytest_messages_and_files(traced):
    suite = os.path.join(support.SOURCE, "tests", "integration", "pytest_leaks")
    script = os.path.join(suite, "test_gpu.py")
    text, left = run_suite(traced, suite, "--cuda-leaks-repeat=3")
    check("cumemtrace_pytest" not in text and "LeakChecker" not in text and
          "check_growth" not in text, f"no frame of the plugin's own:\n{text}")
    summary = text.split("GPU memory at the end of the session", 1)[-1]
    grows = f"in allocate < test_grows:{line_of(script, 'GROW-LINE')} (device"
    check(summary.count(grows) == 1, f"each site once:\n{summary}")
    # Ranked by what each left held at its end, its peak beside; test_clean
    # (3 MiB at its peak, all freed) is not listed as holding.
    check("tests that held the most at their end (GPU memory each left held):\n"
          "  8.00 MiB  test_gpu.py::test_fills_a_cache_once  (peak 8.00 MiB)\n"
          "  4.00 MiB  test_gpu.py::test_leaks  (peak 4.00 MiB)\n"
          "  1.00 MiB  test_gpu.py::test_grows  (peak 1.00 MiB)\n"
          "the other tests' highest peaks (device memory live beyond what was before each, "
          "all of it freed by their end):\n"
          "  peak 3.00 MiB  test_gpu.py::test_clean\n" in summary,
          f"the tests that held the most:\n{summary}")
    check(not [name for name in left if name.startswith("cumemtrace-")],
          f"no report left in the working directory: {left}")
    # Asked for (cumemtrace run -f json): written.
    text, left = run_suite(traced, suite, "--cuda-leaks", run_options=("--quiet", "-f", "json"))
    check([name for name in left if name.startswith("cumemtrace-")],
          f"a report asked for is written: {left}")
