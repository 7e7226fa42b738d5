"""A small DDP training job for torchrun, to run under the tracer.

    python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/gpu/ddp_train.py

Each rank trains the same MLP on its own shard for STEPS steps, in PyTorch's
default caching mode: over NCCL with one GPU per rank when there are enough
GPUs, else over gloo with every rank on GPU 0 (DDP_BACKEND=nccl|gloo picks).
Rank 1 alone keeps a clone of every step's output in KEPT, a module global
(the line marked RANK1-KEPT): held to the end of the program, then freed by
the interpreter's teardown, which is what `cumemtrace merge` must point at.
Prints, per rank, the backend, the final loss and a checksum of the weights,
which must be the same with and without the tracer.
"""
import os

import torch
import torch.distributed as dist

STEPS = 60
BATCH = 2048
KEPT = []


def main():
    world = int(os.environ.get("WORLD_SIZE", "1"))
    backend = os.environ.get("DDP_BACKEND") or ("nccl" if torch.cuda.device_count() >= world
                                                else "gloo")
    dist.init_process_group(backend)
    rank = dist.get_rank()
    device = int(os.environ.get("LOCAL_RANK", rank)) if backend == "nccl" else 0
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    generator = torch.Generator(device="cuda").manual_seed(rank)
    for _ in range(STEPS):
        x = torch.randn(BATCH, 1024, device="cuda", generator=generator)
        out = ddp(x)
        loss = out.square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if rank == 1:
            KEPT.append(out.detach().clone())  # RANK1-KEPT
    torch.cuda.synchronize()
    checksum = sum(float(p.double().sum()) for p in model.parameters())
    line = (f"rank {rank}: backend {backend} loss {loss.item():.9e} checksum {checksum:.12e} "
            f"allocated {torch.cuda.memory_allocated() >> 20} MiB")
    print(line, flush=True)
    if os.environ.get("DDP_RESULTS"):   # one file per rank: nothing interleaves
        with open(f"{os.environ['DDP_RESULTS']}-rank{rank}.txt", "w") as handle:
            handle.write(line + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
