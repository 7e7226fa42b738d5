/* oom.c - allocate 16 MiB blocks until the (simulated) device is full.
 * Run with SIMCUDA_MEMORY=64M: four succeed, the fifth fails with
 * cudaErrorMemoryAllocation, which the report counts as an OOM at grow(). */
#include <cuda_runtime_api.h>
#include <stdio.h>

static cudaError_t __attribute__((noinline)) grow(void **p)
{
    return cudaMalloc(p, 16 << 20);
}

int main(void)
{
    void *blocks[16];
    int n = 0;
    while (n < 16 && grow(&blocks[n]) == cudaSuccess)
        n++;
    printf("oom after %d blocks\n", n);
    for (int i = 0; i < n; i++)
        cudaFree(blocks[i]);
    return 0;
}
