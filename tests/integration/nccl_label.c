/* nccl_label.c - communication buffers from a library named libnccl, one of
 * them on a peer device, next to the program's own cudaMalloc.
 *
 * Device 0 is current. NCCL-like buffers: 4 MiB on device 0 and 2 MiB on
 * device 1 mapped here (a peer's memory). The program's own: 1 MiB on
 * device 0 and, after cudaSetDevice(1), 3 MiB on device 1. Nothing is freed. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "simcuda.h"

CUdeviceptr nccl_buffer(int device, size_t size);

int main(void)
{
    void *own0, *own1;
    if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&own0, 1 << 20) != cudaSuccess)
        return 1;
    if (!nccl_buffer(0, 4 << 20) || !nccl_buffer(1, 2 << 20))
        return 2;
    if (cudaSetDevice(1) != cudaSuccess || cudaMalloc(&own1, 3 << 20) != cudaSuccess)
        return 3;
    CUmemGenericAllocationHandle imported;
    CUdeviceptr address;
    if (simcuda_foreign_handle(&imported, 2 << 20, 1) != 0 ||
        cuMemAddressReserve(&address, 2 << 20, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(address, 2 << 20, 0, imported, 0) != CUDA_SUCCESS)
        return 4;
    printf("nccl label: done\n");
    return 0;
}
