"""A small DDP training job for torchrun, to run under the tracer.

    python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/gpu/ddp_train.py

Each rank trains the same MLP on its own shard for STEPS steps with NCCL
all-reduce; rank 0 also keeps a copy of the weights every 10 steps (the
"rank 0 holds extra copies" pattern that cumemtrace merge must point at).
Prints, per rank, the final loss and a checksum of the weights, which must
be the same with and without the tracer.
"""
import os

import torch
import torch.distributed as dist

STEPS = 60


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    generator = torch.Generator(device="cuda").manual_seed(rank)
    snapshots = []
    for step in range(STEPS):
        x = torch.randn(512, 1024, device="cuda", generator=generator)
        loss = ddp(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if rank == 0 and step % 10 == 0:
            snapshots.append([p.detach().clone() for p in model.parameters()])  # RANK0-COPIES
    torch.cuda.synchronize()
    checksum = sum(float(p.double().sum()) for p in model.parameters())
    line = (f"rank {rank}: loss {loss.item():.9e} checksum {checksum:.12e} "
            f"allocated {torch.cuda.memory_allocated() >> 20} MiB")
    print(line, flush=True)
    if os.environ.get("DDP_RESULTS"):   # one file per rank: nothing interleaves
        with open(f"{os.environ['DDP_RESULTS']}-rank{rank}.txt", "w") as handle:
            handle.write(line + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
