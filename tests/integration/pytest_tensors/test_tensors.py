"""A test suite for the pytest plugin on PyTorch's caching allocator, played
by the stand-in libc10_cuda.so (test_torch_blocks.py, test_torch_blocks_pytest): one test
fills the cache and frees its tensor, which the cache keeps; one keeps a
tensor, which its failure names by the list that holds it; one goes over
its peak limit with a tensor carved from the cache's segment (no figure of
the device's rises); one keeps a pinned staging buffer, as PyTorch's host
cache does at a first .item(), which is not GPU memory. Lines the checks
name are marked."""
import ctypes
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_model  # noqa: E402  (the stand-in's torch, float32 tensors)

torch_model.c10.c10sim_init(1)
MiB = 1 << 20
kept = []


def test_fills_the_cache():
    scratch = torch_model.Tensor(8 * MiB)
    del scratch


def test_keeps_a_tensor():
    kept.append(torch_model.Tensor(MiB))  # KEEP-LINE


@pytest.mark.cuda_limit(peak="1 MiB")
def test_over_its_peak():
    scratch = [torch_model.Tensor(4 * MiB), torch_model.Tensor(4 * MiB)]  # PEAK-LINE
    del scratch


staging = []


def test_pins_a_staging_buffer():
    pointer = ctypes.c_void_p()
    assert ctypes.CDLL("libcudart.so.13").cudaHostAlloc(ctypes.byref(pointer), 4, 0) == 0  # PINNED-LINE
    staging.append(pointer)
