/* oom.c - provoke out-of-memory on the simulator (run with SIMCUDA_MEMORY=64M).
 *
 *   exhausted:  16 MiB blocks until the device is full; the fifth fails with
 *               less free memory than asked for.
 *   fragmented: eight 8 MiB blocks, every other one freed: 32 MiB free, yet
 *               16 MiB cannot be had, no hole is that large.
 *   retry:      like exhausted, but on failure free two blocks and ask again
 *               for the same size, as PyTorch does after emptying its cache.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

static cudaError_t __attribute__((noinline)) grow(void **p, size_t size)
{
    return cudaMalloc(p, size);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exhausted";
    void *blocks[16];
    int n = 0;
    if (strcmp(mode, "fragmented") == 0) {
        for (n = 0; n < 8; n++)
            if (cudaMalloc(&blocks[n], 8 << 20) != cudaSuccess)
                return 1;
        for (int i = 0; i < 8; i += 2)
            cudaFree(blocks[i]);
        void *big;
        cudaError_t error = grow(&big, 16 << 20);
        printf("fragmented: %s\n", cudaGetErrorName(error));
        return 0;
    }
    while (n < 16 && grow(&blocks[n], 16 << 20) == cudaSuccess)
        n++;
    printf("oom after %d blocks\n", n);
    if (strcmp(mode, "retry") == 0) {
        cudaFree(blocks[--n]);
        cudaFree(blocks[--n]);
        cudaError_t error = grow(&blocks[n], 16 << 20);
        printf("retry: %s\n", cudaGetErrorName(error));
    }
    return 0;
}
