"""Run a GPU out of memory from Python, for the GPU suite.

Keeps 1 GiB tensors in a list until the device is full. The tracer's OOM
report must name the line below marked OOM-LINE and the line holding the
memory (the same line: the list keeps every tensor it made).
"""
import torch


def fill(kept):
    while True:
        kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))  # OOM-LINE


def main():
    kept = []
    try:
        fill(kept)
    except torch.cuda.OutOfMemoryError:
        print(f"torch raised OutOfMemoryError after {len(kept)} GiB", flush=True)


if __name__ == "__main__":
    main()
