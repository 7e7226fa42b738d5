"""A test suite for the plugin's per-test limits (test_pytest_limits.py), on
the simulator through ctypes: one test within its limits, one over its peak,
one over what it may leave held, one unmarked. Lines the checks name are
marked."""
import ctypes

import pytest

cuda = ctypes.CDLL("libcudart.so.13")
MiB = 1 << 20
kept = []


def allocate(size):
    pointer = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0
    return pointer


@pytest.mark.cuda_limit(peak="4 MiB", leaks=0)
def test_within():
    cuda.cudaFree(allocate(2 * MiB))


@pytest.mark.cuda_limit(peak="1 MiB")
def test_peak_over():
    block = allocate(64 * MiB)  # PEAK-LINE
    cuda.cudaFree(block)


@pytest.mark.cuda_limit(leaks="512 KiB")
def test_leaks_over():
    kept.append(allocate(1 * MiB))  # LEAK-LINE


def test_unmarked():
    kept.append(allocate(1 * MiB))
