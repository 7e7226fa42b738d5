/* static_cudart.c - a program with the runtime linked in statically.
 *
 * Its cudaMalloc is inside the executable, so no runtime wrapper can see it;
 * the driver wrappers must, through our dlsym and cuGetProcAddress. */
#include <cuda_runtime_api.h>
#include <stdio.h>

static void *__attribute__((noinline)) static_allocate(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        return NULL;
    return p;
}

int main(void)
{
    void *a = static_allocate(1 << 20), *b = static_allocate(2 << 20),
         *c = static_allocate(3 << 20);
    if (!a || !b || !c)
        return 1;
    cudaFree(a);
    cudaFree(b);
    printf("static cudart: 3 allocated, 2 freed\n");
    return 0;
}
