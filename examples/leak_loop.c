/* leak_loop.c - the classic: a scratch buffer allocated every step, never freed.
 *
 * Each training step allocates its activations and frees them, but also
 * allocates a 4 MiB "scratch" buffer for a statistics pass and forgets it.
 * The report names leak_scratch_buffer() as the site holding steps x 4 MiB.
 *
 *   LD_PRELOAD=build/libcumemtrace.so ./build/examples/leak_loop
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *__attribute__((noinline)) leak_scratch_buffer(size_t bytes)
{
    void *scratch;
    CHECK(cudaMalloc(&scratch, bytes)); /* never freed: the leak */
    CHECK(cudaMemset(scratch, 0, bytes));
    return scratch;
}

static void __attribute__((noinline)) train_step(int step)
{
    void *activations;
    CHECK(cudaMalloc(&activations, 32 << 20));
    CHECK(cudaMemset(activations, step & 0xff, 32 << 20));
    leak_scratch_buffer(4 << 20);
    CHECK(cudaFree(activations));
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    void *weights;
    CHECK(cudaMalloc(&weights, 64 << 20)); /* freed at the end: not a leak */
    for (int step = 0; step < steps; step++)
        train_step(step);
    CHECK(cudaFree(weights));
    size_t free_bytes, total;
    CHECK(cudaMemGetInfo(&free_bytes, &total));
    printf("leak_loop: %d steps done, %.1f MiB free of %.1f MiB\n", steps, free_bytes / 1048576.0,
           total / 1048576.0);
    return 0;
}
