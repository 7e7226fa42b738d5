/* snapshots.c - a program that grows, with two snapshots on the way, for
 * `cumemtrace diff`.
 *
 *   snapshots DIR
 *
 * Holds a steady 8 MiB block (steady_buffer) throughout. Ten iterations each
 * keep a 1 MiB block from grow_cache(). A 2 MiB block from scratch_buffer()
 * lives only until the first snapshot, a 4 MiB one from late_buffer() only
 * after it. Snapshots: DIR/first after 3 iterations, DIR/second after 10.
 * From first to second: grow_cache +7 MiB (grew), late_buffer +4 MiB (new),
 * scratch_buffer -2 MiB (vanished), steady_buffer unchanged. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

static void *__attribute__((noinline)) steady_buffer(void)
{
    void *p = NULL;
    cudaMalloc(&p, 8 << 20);
    return p;
}

static void *__attribute__((noinline)) grow_cache(void)
{
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    return p;
}

static void *__attribute__((noinline)) scratch_buffer(void)
{
    void *p = NULL;
    cudaMalloc(&p, 2 << 20);
    return p;
}

static void *__attribute__((noinline)) late_buffer(void)
{
    void *p = NULL;
    cudaMalloc(&p, 4 << 20);
    return p;
}

int main(int argc, char **argv)
{
    int (*snapshot)(const char *) =
        (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
    char path[4096];
    if (argc < 2 || !snapshot) {
        fprintf(stderr, "usage: snapshots DIR (under the tracer)\n");
        return 2;
    }
    void *steady = steady_buffer();
    void *scratch = scratch_buffer();
    void *cache[10], *late = NULL;
    for (int i = 0; i < 10; i++) {
        cache[i] = grow_cache();
        if (i == 2) {
            snprintf(path, sizeof(path), "%s/first", argv[1]);
            snapshot(path);
            cudaFree(scratch);
            late = late_buffer();
        }
    }
    snprintf(path, sizeof(path), "%s/second", argv[1]);
    int status = snapshot(path);
    for (int i = 0; i < 10; i++)
        cudaFree(cache[i]);
    cudaFree(late);
    cudaFree(steady);
    printf("snapshots: %d\n", status);
    return 0;
}
