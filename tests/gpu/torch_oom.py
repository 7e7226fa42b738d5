"""Run a GPU out of memory from Python, for the GPU suite.

A "model" of two 4 GiB tensors (MODEL-LINE), then 1 GiB tensors kept in a
list until the device is full (OOM-LINE). The tracer's OOM report must name
OOM-LINE as the failing request's Python line, and OOM-LINE and MODEL-LINE
as the lines holding the most memory; tests/gpu/check_oom.py checks that.
"""
import torch


def load_model():
    return [torch.empty(4 << 30, dtype=torch.uint8, device="cuda") for _ in range(2)]  # MODEL-LINE


def fill(kept):
    while True:
        kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))  # OOM-LINE


def main():
    model = load_model()
    kept = []
    try:
        fill(kept)
    except torch.cuda.OutOfMemoryError:
        print(f"torch raised OutOfMemoryError after {len(kept)} GiB "
              f"(+{sum(t.numel() for t in model) >> 30} GiB model)", flush=True)


if __name__ == "__main__":
    main()
