"""A small PyTorch training loop for the GPU suite.

Runs an MLP for a number of steps (and pins one host tensor), then prints one
JSON line with PyTorch's own figures, which tests/gpu/gpu_table.py sets beside
the tracer's report. The allocator mode comes from the environment
(PYTORCH_CUDA_ALLOC_CONF, PYTORCH_NO_CUDA_MEMORY_CACHING).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracer_snapshot import snapshot  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.manual_seed(0)
    device = "cuda"
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=device)
    y = torch.randn(256, 1024, device=device)
    pinned = torch.empty(1 << 20, dtype=torch.uint8).pin_memory()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    snapshot()
    print(json.dumps({
        "loss": round(float(loss), 6),
        "backend": torch.cuda.get_allocator_backend(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "memory_allocated": torch.cuda.memory_allocated(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "segment_allocated": stats.get("segment.all.allocated"),
        "segment_freed": stats.get("segment.all.freed"),
        "allocation_allocated": stats.get("allocation.all.allocated"),
        "pinned_bytes": pinned.numel(),
    }), flush=True)


if __name__ == "__main__":
    main()
