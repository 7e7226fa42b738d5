"""A test suite for the pytest plugin on PyTorch's caching allocator, played
by the stand-in libc10_cuda.so (test_torch_blocks.py, test_torch_blocks_pytest): one test
fills the cache and frees its tensor, which the cache keeps; one keeps a
tensor, which its failure names by the list that holds it. Lines the checks
name are marked."""
import os
import sys

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
