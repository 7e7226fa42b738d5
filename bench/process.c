/* process.c - what the tracer costs a whole process, run on the CUDA
 * simulator by bench/run.py, traced and untraced.
 *
 *   bench_process short            one cudaMalloc+cudaFree, then exit
 *   bench_process forks N          N children forked one after another
 *
 * `short` is a process whose whole life is start-up and exit: bench/run.py
 * times it from outside. `forks` starts four threads that allocate and
 * free until the end, then forks N children, one at a time, each of which
 * allocates one block, keeps it and exits (so each writes an exit report
 * when traced); prints one JSON line with the milliseconds from a fork to
 * the parent's wait returning, and the CPU time (user + system) of a
 * child, each per child: on a loaded machine the first grows with the
 * load, the second much less. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static int started; /* threads that have allocated once */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *allocate_until_stopped(void *unused)
{
    (void)unused;
    while (!stop) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess) {
            fprintf(stderr, "bench_process: cudaMalloc failed\n");
            exit(1);
        }
        cudaFree(p);
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int forks(int children)
{
    pthread_t threads[4];
    for (int t = 0; t < 4; t++)
        pthread_create(&threads[t], NULL, allocate_until_stopped, NULL);
    while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
        usleep(100);
    double start = now_ms(), cpu = 0;
    for (int i = 0; i < children; i++) {
        pid_t child = fork();
        if (child < 0) {
            perror("bench_process: fork");
            return 1;
        }
        if (child == 0) {
            void *p;
            exit(cudaMalloc(&p, 512) == cudaSuccess ? 0 : 1);
        }
        int status;
        struct rusage usage;
        if (wait4(child, &status, 0, &usage) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_process: child %d failed\n", i);
            return 1;
        }
        cpu += usage.ru_utime.tv_sec * 1e3 + usage.ru_utime.tv_usec / 1e3 +
               usage.ru_stime.tv_sec * 1e3 + usage.ru_stime.tv_usec / 1e3;
    }
    double per_child = (now_ms() - start) / children;
    stop = 1;
    for (int t = 0; t < 4; t++)
        pthread_join(threads[t], NULL);
    printf("{\"ms_per_child\": %.3f, \"cpu_ms_per_child\": %.3f}\n", per_child, cpu / children);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "short") == 0) {
        void *p;
        if (cudaMalloc(&p, 512) != cudaSuccess)
            return 1;
        return cudaFree(p) == cudaSuccess ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "forks") == 0 && atoi(argv[2]) > 0)
        return forks(atoi(argv[2]));
    fprintf(stderr, "usage: bench_process short | forks N\n");
    return 2;
}
