"""A test suite for the pytest plugin (test_python.py, test_pytest_plugin), on the
simulator through ctypes: one test leaves memory held, one grows what it
holds at every run, one fills a cache once, one cleans up, one fails on
its own. Lines the checks name are marked."""
import ctypes

import pytest

cuda = ctypes.CDLL("libcudart.so.13")
MiB = 1 << 20
kept = []
cache = {}


def allocate(size):
    pointer = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0
    return pointer


def free(pointer):
    assert cuda.cudaFree(pointer) == 0


@pytest.fixture
def scratch():
    block = allocate(2 * MiB)   # a fixture's own: set up before, freed after
    yield block
    free(block)


def test_clean(scratch):
    block = allocate(3 * MiB)
    free(block)


def test_leaks(scratch):
    kept.append(allocate(4 * MiB))  # LEAK-LINE


def test_grows():
    kept.append(allocate(1 * MiB))  # GROW-LINE


def workspace():
    if "workspace" not in cache:
        cache["workspace"] = allocate(8 * MiB)  # CACHE-LINE
    return cache["workspace"]


@pytest.mark.cuda_leaks(allowed="8 MiB")
def test_fills_a_cache_once():
    workspace()


def test_fails_on_its_own():
    kept.append(allocate(1 * MiB))
    assert 1 + 1 == 3
