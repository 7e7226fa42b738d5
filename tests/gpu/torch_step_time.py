"""Time a small PyTorch training step: mean over the steps after a warm-up.

Run it with and without the tracer (same mode) and compare; prints one JSON
line. `--history` turns on torch.cuda.memory._record_memory_history, the
reference cumemtrace is compared with. Used by bench/gpu_cost.py.
"""
import json
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    if "--history" in sys.argv:    # the field's reference: PyTorch's own recorder
        torch.cuda.memory._record_memory_history(max_entries=100000)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(200):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    print(json.dumps({"step_ms": round(elapsed / steps * 1000, 4),
                      "loss": round(float(loss.detach()), 6)}), flush=True)


if __name__ == "__main__":
    main()
