/* oom.c - the cost of an out-of-memory report, on the CUDA simulator.
 *
 *   bench_oom COUNT
 *
 * Holds one block, then asks COUNT times for more than the device has; each
 * failure is an OOM, and with CUMEMTRACE_OOM=every each writes a report (the
 * one before it rewritten, its retry never seen). Prints one JSON line: the
 * milliseconds per failed call. bench/run.py runs it traced and not. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 100;
    void *held, *p;
    if (cudaMalloc(&held, 1 << 20) != cudaSuccess)
        return 1;
    double start = now_ms();
    for (int i = 0; i < count; i++)
        if (cudaMalloc(&p, (size_t)1 << 50) == cudaSuccess)
            return 2;
    double spent = now_ms() - start;
    printf("{\"ooms\": %d, \"ms_per_oom\": %.3f}\n", count, spent / count);
    cudaFree(held);
    return 0;
}
