/* paths.c - the allocation paths of a plain CUDA C program, for the GPU suite.
 *
 * Built twice: against the shared libcudart and against libcudart_static.a.
 * Makes a known number of allocations through cudaMalloc, cudaMallocHost,
 * cudaMallocManaged and cudaMallocAsync, frees all but a known few, and prints
 * what it did as one JSON line, which tests/gpu/gpu_table.py compares with the
 * tracer's report. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define ROUNDS 50

int main(void)
{
    void *kept_device = NULL, *kept_host = NULL, *kept_async = NULL, *p;
    int allocations = 0, failures = 0;
    cudaStream_t stream;
    failures += cudaStreamCreate(&stream) != cudaSuccess;
    for (int i = 0; i < ROUNDS; i++) {
        size_t size = (size_t)(i + 1) << 16;
        failures += cudaMalloc(&p, size) != cudaSuccess;
        allocations++;
        if (i == ROUNDS - 1)
            kept_device = p;
        else
            failures += cudaFree(p) != cudaSuccess;
    }
    failures += cudaMallocHost(&kept_host, 1 << 20) != cudaSuccess;
    allocations++;
    failures += cudaMallocManaged(&p, 1 << 20, cudaMemAttachGlobal) != cudaSuccess;
    allocations++;
    failures += cudaFree(p) != cudaSuccess;
    failures += cudaMallocAsync(&kept_async, 3 << 20, stream) != cudaSuccess;
    allocations++;
    failures += cudaStreamSynchronize(stream) != cudaSuccess;
    printf("{\"allocations\": %d, \"live_bytes\": %zu, \"live_blocks\": 3, \"failures\": %d}\n",
           allocations, ((size_t)ROUNDS << 16) + (1 << 20) + (3 << 20), failures);
    (void)kept_device;
    (void)kept_host;
    return failures != 0;
}
