/* implicit_free.c - blocks never freed by the program, but by cudaDeviceReset.
 * They must be reported as freed implicitly (a leak), not as freed; the
 * stream-ordered block survives the reset, as in real CUDA. */
#include <cuda_runtime_api.h>
#include <stdio.h>

static void __attribute__((noinline)) forget_two(void)
{
    void *a, *b;
    cudaMalloc(&a, 1 << 20);
    cudaMallocHost(&b, 1 << 20);
}

int main(void)
{
    void *async_block;
    forget_two();
    cudaMallocAsync(&async_block, 1 << 20, 0);
    if (cudaDeviceReset() != cudaSuccess)
        return 1;
    printf("reset done\n");
    return 0;
}
