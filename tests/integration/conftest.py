"""The integration tests' fixtures: real programs run under libcumemtrace.so
on the CUDA simulator, their outputs and reports checked.

    python3 -m pytest tests/integration --build build [-k NAME]

ctest runs each test on its own (tests/integration/CMakeLists.txt lists them
with --collect-only when CMake configures). A test takes `traced` to run
programs; its check() failures fail it at its end, all of them reported; the
files its programs wrote are kept when it fails. A session whose every test
was skipped (no valgrind, no Chromium, no C++ compiler, no such CPython) ends
with status 77, which ctest counts as skipped.
"""
import os
import re
import shutil
import tempfile

import pytest

import support

SKIPPED = 77


def pytest_addoption(parser):
    parser.addoption("--build", default=os.path.join(support.SOURCE, "build"),
                     help="the build directory whose library, command and programs are tested "
                          "(default: build/ in the checkout)")


def pytest_configure(config):
    support.BUILD = os.path.abspath(config.getoption("build"))


@pytest.fixture
def traced():
    """Runs programs under the tracer, each in a fresh directory (Traced)."""
    return support.Traced()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps the call's outcome on the test, for scratch() to read."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.call_failed = report.failed


@pytest.fixture(autouse=True)
def scratch(request):
    """Every temporary directory of the test inside one, removed if it passes:
    a failed test keeps its programs' reports and dumps for a look."""
    support.FAILED.clear()
    # A parametrized test's name, test_NAME[ID], without the brackets, which
    # the tests' globs of their files would read as a pattern.
    name = re.sub(r"\W", "-", request.node.name[5:])
    directory = tempfile.mkdtemp(prefix=f"cumemtrace-test-{name}-")
    tempfile.tempdir = directory
    yield directory
    tempfile.tempdir = None
    if getattr(request.node, "call_failed", True):
        print(f"its files are in {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item):
    """After the test's body: the checks that failed in it fail it."""
    if support.FAILED:
        pytest.fail(f"{len(support.FAILED)} checks failed:\n" + "\n".join(support.FAILED),
                    pytrace=False)


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter else {}
    if exitstatus == pytest.ExitCode.OK and stats.get("skipped") and \
            not stats.get("passed") and not stats.get("failed"):
        session.exitstatus = SKIPPED
