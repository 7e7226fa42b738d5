"""The cost of one tensor allocation+free that reaches the driver, in PyTorch.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 bench/torch_alloc_pair.py [PAIRS]

Every torch.empty on the GPU is then a cudaMalloc and every free a cudaFree:
this times PAIRS of them (256 KiB each) from a Python loop, after a warm-up,
and prints {"us_per_pair": ...}, the median of 10 windows. bench/gpu_cost.py
runs it untraced and traced (and traced without stacks or Python frames) to
tell what the per-tensor mode's extra time per step is made of.
"""
import json
import statistics
import sys
import time

import torch


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    for _ in range(1000):
        del_me = torch.empty(1 << 16, device="cuda")
        del del_me
    torch.cuda.synchronize()
    per_window, windows = max(1, pairs // 10), []
    for _ in range(10):
        started = time.perf_counter()
        for _ in range(per_window):
            tensor = torch.empty(1 << 16, device="cuda")
            del tensor
        torch.cuda.synchronize()
        windows.append((time.perf_counter() - started) / per_window * 1e6)
    print(json.dumps({"us_per_pair": round(statistics.median(windows), 3)}), flush=True)


if __name__ == "__main__":
    main()
