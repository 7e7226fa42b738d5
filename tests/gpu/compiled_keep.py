"""A torch.compile'd model in a training-like loop that keeps one output per
step (the leak) beside a per-step temporary: the growing site must be this
file's line that calls the compiled model, never a line of the code Inductor
generates (run by tests/gpu/check_compiled.py under the tracer)."""
import json
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 1024)).cuda()
compiled = torch.compile(model)
kept = []
with torch.no_grad():
    for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
        x = torch.randn(512, 1024, device="cuda")
        scratch = torch.empty(24 << 20, dtype=torch.uint8, device="cuda")  # TEMP-compiled
        y = compiled(x)  # LEAK-compiled
        kept.append(y)
        del scratch
        torch.cuda.synchronize()
        __import__("time").sleep(0.02)
print("torch: " + json.dumps({"kept_bytes": sum(t.numel() * t.element_size() for t in kept)}))
