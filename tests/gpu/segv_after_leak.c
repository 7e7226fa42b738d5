/* segv_after_leak.c - a CUDA C program that leaks, then segfaults (GPU suite).
 * The crash dump, symbolized, must list the 3 blocks it holds, at leak(). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

static void *__attribute__((noinline)) leak(size_t bytes)
{
    void *p = NULL;
    cudaMalloc(&p, bytes);
    return p;
}

int main(void)
{
    leak(16 << 20);
    leak(32 << 20);
    leak(64 << 20);
    printf("leaked 112 MiB; now crashing\n");
    fflush(stdout);
    volatile uintptr_t where = 16; /* an unmapped address: a real fault */
    volatile int *bad = (volatile int *)where;
    return *bad;
}
