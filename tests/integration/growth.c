/* growth.c - leak suspects named while the program runs (src/growth.h).
 *
 *   growth leak-marks   60 iterations, each marks (cumemtrace_mark) and keeps
 *                       one 1 MiB block from grow_by_mark(): growing, 1 MiB a mark
 *   growth leak-time    keeps one 64 KiB block from grow_by_time() every 2 ms
 *                       for 0.3 s: growing, per second
 *   growth leak-beside [marks]   78 steps, each keeps 1 MiB and makes an
 *                       8 MiB temporary, both from one line (grow_step_block()),
 *                       freeing the temporary before the step ends: growing,
 *                       +1 MiB a call of the kept block's site, 78 calls;
 *                       with `marks`, each step marked: +1 MiB per mark
 *   growth steady       a cache that fills in its first 5 iterations, then 60
 *                       iterations of allocate+free of a temporary: nothing
 *                       grows (the non-leaks people blame)
 *   growth hold READY STOP   creates READY, then holds until STOP exists (20 s
 *                       at most): a program without Python to watch live
 * Each mode also keeps a steady 8 MiB block from start to end. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms)
{
    struct timespec t = {0, ms * 1000000};
    nanosleep(&t, NULL);
}

static void *__attribute__((noinline)) grow_by_mark(void)
{
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    return p;
}

static void *__attribute__((noinline)) grow_by_time(void)
{
    void *p = NULL;
    cudaMalloc(&p, 64 << 10);
    return p;
}

static void *__attribute__((noinline)) fill_cache(void)
{
    void *p = NULL;
    cudaMalloc(&p, 2 << 20);
    return p;
}

/* The one line that makes every block of leak-beside's steps. */
static void *__attribute__((noinline)) grow_step_block(size_t size)
{
    void *p = NULL;
    cudaMalloc(&p, size);
    return p;
}

static void __attribute__((noinline)) temporary(void)
{
    void *p = NULL;
    cudaMalloc(&p, 4 << 20);
    cudaFree(p);
}

int main(int argc, char **argv)
{
    void (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_mark");
    const char *mode = argc > 1 ? argv[1] : "";
    void *steady;
    cudaMalloc(&steady, 8 << 20);
    if (strcmp(mode, "leak-marks") == 0) {
        for (int i = 0; i < 60; i++) {
            if (mark)
                mark("iteration");
            grow_by_mark();
        }
    } else if (strcmp(mode, "leak-time") == 0) {
        for (int i = 0; i < 150; i++) {
            grow_by_time();
            pause_ms(2);
        }
    } else if (strcmp(mode, "leak-beside") == 0) {
        int marked = argc > 2 && strcmp(argv[2], "marks") == 0;
        for (int i = 0; i < 78; i++) {
            if (marked && mark)
                mark("step");
            grow_step_block(1 << 20); /* kept */
            cudaFree(grow_step_block(8 << 20));
        }
    } else if (strcmp(mode, "steady") == 0) {
        for (int i = 0; i < 65; i++) {
            if (i < 5)
                fill_cache();
            temporary();
            pause_ms(2);
        }
    } else if (strcmp(mode, "hold") == 0 && argc > 3) {
        FILE *ready = fopen(argv[2], "w"); /* the test waits for it, then asks */
        if (ready)
            fclose(ready);
        for (int i = 0; i < 2000 && access(argv[3], F_OK) != 0; i++)
            pause_ms(10);
    } else {
        fprintf(stderr,
                "usage: growth leak-marks|leak-time|leak-beside [marks]|steady|hold READY STOP\n");
        return 2;
    }
    printf("growth %s: done\n", mode);
    return 0;
}
