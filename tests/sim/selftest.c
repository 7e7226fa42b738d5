/* selftest.c - the simulator on its own, without the tracer: memory goes down
 * and up, OOM comes both ways (exhausted and fragmented), a device reset frees
 * the context's blocks, data round-trips, and _ptsz entry points reach the
 * _ptsz driver functions. Run with SIMCUDA_MEMORY=64M,32M. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "simcuda.h"

cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);

static int failures;
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "selftest: %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

int main(void)
{
    size_t free0, total, free1;
    void *a, *b, *blocks[8];
    EXPECT(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    EXPECT(total == 64u << 20 && free0 == total);
    EXPECT(cudaMalloc(&a, 1 << 20) == cudaSuccess);
    EXPECT(cudaMemGetInfo(&free1, &total) == cudaSuccess && free1 == free0 - (1 << 20));
    EXPECT(cudaFree(a) == cudaSuccess);
    EXPECT(cudaFree(a) == cudaErrorInvalidValue);

    /* Exhausted: more than is free. */
    EXPECT(cudaMalloc(&a, 65u << 20) == cudaErrorMemoryAllocation);
    /* Fragmented: 8 x 8 MiB, free every other one: 32 MiB free, no 16 MiB hole. */
    for (int i = 0; i < 8; i++)
        EXPECT(cudaMalloc(&blocks[i], 8 << 20) == cudaSuccess);
    for (int i = 0; i < 8; i += 2)
        EXPECT(cudaFree(blocks[i]) == cudaSuccess);
    EXPECT(cudaMemGetInfo(&free1, &total) == cudaSuccess && free1 == 32u << 20);
    EXPECT(simcuda_largest_free_block(0) == 8u << 20);
    EXPECT(cudaMalloc(&a, 16 << 20) == cudaErrorMemoryAllocation);

    /* Data round trip. */
    char in[64] = "simulated device memory", out[64] = "";
    EXPECT(cudaMemcpy(blocks[1], in, sizeof(in), cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(cudaMemcpy(out, blocks[1], sizeof(out), cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(strcmp(in, out) == 0);

    /* The per-thread flavour reaches the per-thread driver function. */
    EXPECT(cudaMallocAsync(&a, 4096, 0) == cudaSuccess);
    EXPECT(cudaMallocAsync_ptsz(&b, 4096, 0) == cudaSuccess);
    EXPECT(simcuda_call_count("cuMemAllocAsync") == 1);
    EXPECT(simcuda_call_count("cuMemAllocAsync_ptsz") == 1);

    /* A reset frees the context's blocks, not the stream-ordered ones. */
    EXPECT(cudaDeviceReset() == cudaSuccess);
    EXPECT(simcuda_used_bytes(0) == 2 * 4096);
    EXPECT(cudaFreeAsync(a, 0) == cudaSuccess && cudaFreeAsync(b, 0) == cudaSuccess);
    EXPECT(simcuda_used_bytes(0) == 0);

    /* Second device, its own size. */
    EXPECT(cudaSetDevice(1) == cudaSuccess);
    EXPECT(cudaMemGetInfo(&free1, &total) == cudaSuccess && total == 32u << 20);
    printf("sim_selftest: %d failed\n", failures);
    return failures != 0;
}
