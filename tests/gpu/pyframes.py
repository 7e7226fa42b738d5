"""Allocations whose Python frames the tracer must read without the GIL, on a
GPU (run by check_pyframes.py under the tracer):

    python3 tests/gpu/pyframes.py cupy|torch

cupy: CuPy releases the GIL before it allocates: a 40 MiB array kept from
the main thread, a 24 MiB one from a Python thread. torch: PyTorch's ops
release it too: a 48 MiB tensor kept; then a backward pass whose 16 MiB
gradient (the expanded gradient of a sum, cloned by AccumulateGrad) the
autograd engine's thread allocates, while the main thread waits in
loss.backward(). The lines marked below are what the report must name.
"""
import sys
import threading


def keep_cupy(cupy):
    return cupy.zeros(10 << 20, dtype=cupy.float32)  # CUPY-LINE


def keep_in_thread(cupy, kept):
    kept.append(cupy.zeros(6 << 20, dtype=cupy.float32))  # THREAD-LINE


def keep_torch(torch):
    return torch.empty(48 << 20, dtype=torch.uint8, device="cuda")  # TORCH-LINE


def backward(torch):
    weight = torch.randn(2048, 2048, device="cuda", requires_grad=True)
    loss = weight.sum() * 3.0     # no temporary of the weight's size to reuse
    loss.backward()  # BACKWARD-LINE
    return weight


def main():
    which = sys.argv[1]
    if which == "cupy":
        import cupy
        kept = [keep_cupy(cupy)]
        worker = threading.Thread(target=keep_in_thread, args=(cupy, kept))
        worker.start()
        worker.join()
        cupy.cuda.Device().synchronize()
    else:
        import torch
        kept = [keep_torch(torch), backward(torch)]
        torch.cuda.synchronize()
    print(f"pyframes {which}: done, python {sys.version.split()[0]}", flush=True)
    globals()["KEPT"] = kept     # held at the end


if __name__ == "__main__":
    main()
