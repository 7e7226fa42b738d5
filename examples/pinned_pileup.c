/* pinned_pileup.c - pinned host buffers piling up, one per batch.
 *
 * A data loader pins a staging buffer for every batch (like pin_memory=True
 * with batches kept alive) and only frees every fourth one. Pinned memory is
 * host memory the OS cannot page out; the report shows it as pinned_host,
 * growing with the number of batches, at load_batch().
 *
 *   LD_PRELOAD=build/libcumemtrace.so ./build/examples/pinned_pileup
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *__attribute__((noinline)) load_batch(int batch, size_t bytes)
{
    float *staging;
    if (cudaMallocHost((void **)&staging, bytes) != cudaSuccess) {
        fprintf(stderr, "cudaMallocHost failed\n");
        exit(1);
    }
    memset(staging, batch & 0x7f, bytes);
    return staging;
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 16;
    size_t bytes = 2 << 20;
    void *device;
    if (cudaMalloc(&device, bytes) != cudaSuccess)
        return 1;
    for (int batch = 0; batch < batches; batch++) {
        float *staging = load_batch(batch, bytes);
        cudaMemcpy(device, staging, bytes, cudaMemcpyHostToDevice);
        if (batch % 4 == 0)
            cudaFreeHost(staging); /* the others are kept "for later" and forgotten */
    }
    cudaFree(device);
    printf("pinned_pileup: %d batches of %zu bytes staged\n", batches, bytes);
    return 0;
}
