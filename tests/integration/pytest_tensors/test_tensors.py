"""A test suite for the pytest plugin on PyTorch's caching allocator, played
by the stand-in libc10_cuda.so (test_torch_blocks.py, test_torch_blocks_pytest): one test
fills the cache and frees its tensor, which the cache keeps; one keeps a
tensor. Lines the checks name are marked."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_blocks  # noqa: E402  (the stand-in's Tensor)

torch_blocks.c10.c10sim_init(1)
MiB = 1 << 20
kept = []


def test_fills_the_cache():
    scratch = torch_blocks.Tensor(32 * MiB)
    del scratch


def test_keeps_a_tensor():
    kept.append(torch_blocks.Tensor(4 * MiB))  # KEEP-LINE
