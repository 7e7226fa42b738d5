/* alloc.c - the allocate+free microbenchmark, run on the CUDA simulator in its
 * benchmark mode (SIMCUDA_BUMP=1) by bench/run.py, traced and untraced.
 *
 *   bench_alloc THREADS DEPTH LIVE PAIRS [snapshot PATH | crash]
 *
 * Keeps LIVE blocks allocated, then each of THREADS threads makes PAIRS
 * cudaMalloc(512)+cudaFree pairs from DEPTH nested calls (so the tracer
 * unwinds a stack of that depth). Prints one JSON line: nanoseconds per pair
 * per thread, total throughput, and the time of the first and last tenth of
 * the pairs (a slow-down as the run goes on would show there). `snapshot`
 * then times cumemtrace_snapshot() with LIVE blocks held; `crash` times the
 * crash dump: SIGSEGV with LIVE blocks held, measured from raise() to this
 * program's own handler, which the tracer calls after writing its dump. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long pairs;
static int depth;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

struct result {
    double total_ns, first_tenth_ns, last_tenth_ns;
    int site; /* which of the call sites below allocates */
};

/* Eight cudaMalloc call sites: each has its own return address, so each is
 * a stack of its own for the tracer (a deeper nest alone would not do: the
 * tracer keeps the innermost frames, which would be the same). The empty
 * asm statements differ, so the compiler cannot fold the eight calls into
 * one. */
static cudaError_t __attribute__((noinline)) allocate_at(int site, void **p)
{
    switch (site % 8) {
    case 1: __asm__ volatile("" ::"i"(1)); return cudaMalloc(p, 512);
    case 2: __asm__ volatile("" ::"i"(2)); return cudaMalloc(p, 512);
    case 3: __asm__ volatile("" ::"i"(3)); return cudaMalloc(p, 512);
    case 4: __asm__ volatile("" ::"i"(4)); return cudaMalloc(p, 512);
    case 5: __asm__ volatile("" ::"i"(5)); return cudaMalloc(p, 512);
    case 6: __asm__ volatile("" ::"i"(6)); return cudaMalloc(p, 512);
    case 7: __asm__ volatile("" ::"i"(7)); return cudaMalloc(p, 512);
    default: __asm__ volatile("" ::"i"(0)); return cudaMalloc(p, 512);
    }
}

static void loop(struct result *r)
{
    long tenth = pairs / 10 > 0 ? pairs / 10 : 1;
    double start = now_ns(), mark = start;
    for (long i = 0; i < pairs; i++) {
        void *p;
        if (allocate_at(r->site, &p) != cudaSuccess) {
            fprintf(stderr, "bench_alloc: cudaMalloc failed\n");
            exit(1);
        }
        cudaFree(p);
        if (i + 1 == tenth) {
            r->first_tenth_ns = now_ns() - start;
        } else if (i + 1 == pairs - tenth) {
            mark = now_ns();
        }
    }
    double end = now_ns();
    r->last_tenth_ns = end - mark;
    r->total_ns = end - start;
}

/* DEPTH nested frames, then the loop. The volatile sum stops tail calls. */
static int __attribute__((noinline)) nest(int level, struct result *r)
{
    volatile int sum = level;
    if (level <= 1)
        loop(r);
    else
        sum += nest(level - 1, r);
    return sum;
}

/* BENCH_SITE_PER_THREAD=1: thread t allocates from call site t % 8, so that
 * up to 8 threads each have a stack of their own. */
static int site_per_thread;

struct thread_arg {
    struct result *result;
    int number;
};

static void *thread_main(void *arg)
{
    struct thread_arg *a = arg;
    a->result->site = site_per_thread ? a->number : 0;
    nest(depth, a->result);
    return NULL;
}

static double crash_started;

static void crash_handler(int signal)
{
    (void)signal;
    char line[128];
    int n = snprintf(line, sizeof(line), "{\"crash_dump_ms\": %.3f}\n",
                     (now_ns() - crash_started) / 1e6);
    ssize_t unused = write(STDOUT_FILENO, line, (size_t)n);
    (void)unused;
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench_alloc THREADS DEPTH LIVE PAIRS [snapshot PATH | crash]\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    depth = atoi(argv[2]);
    long live = atol(argv[3]);
    pairs = atol(argv[4]);
    const char *extra = argc > 5 ? argv[5] : "";
    if (threads < 1 || threads > 64 || depth < 1 || live < 0 || pairs < 1) {
        fprintf(stderr, "bench_alloc: bad arguments\n");
        return 2;
    }
    if (strcmp(extra, "crash") == 0)
        signal(SIGSEGV, crash_handler); /* before the tracer's: it chains to ours */

    void **kept = malloc((size_t)(live ? live : 1) * sizeof(void *));
    for (long i = 0; i < live; i++)
        if (cudaMalloc(&kept[i], 512) != cudaSuccess) {
            fprintf(stderr, "bench_alloc: cannot hold %ld blocks\n", live);
            return 1;
        }

    pthread_t ids[64];
    struct result results[64];
    memset(results, 0, sizeof(results));
    double start = now_ns();
    struct thread_arg args[64];
    site_per_thread =
        getenv("BENCH_SITE_PER_THREAD") && strcmp(getenv("BENCH_SITE_PER_THREAD"), "1") == 0;
    for (int t = 0; t < threads; t++) {
        args[t] = (struct thread_arg){&results[t], t};
        pthread_create(&ids[t], NULL, thread_main, &args[t]);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    double wall = now_ns() - start;
    double per_pair = 0, first = 0, last = 0;
    for (int t = 0; t < threads; t++) {
        per_pair += results[t].total_ns / pairs / threads;
        first += results[t].first_tenth_ns / threads;
        last += results[t].last_tenth_ns / threads;
    }
    printf("{\"ns_per_pair\": %.1f, \"pairs_per_s\": %.0f, \"first_tenth_ms\": %.3f, "
           "\"last_tenth_ms\": %.3f",
           per_pair, threads * pairs / (wall / 1e9), first / 1e6, last / 1e6);
    if (strcmp(extra, "snapshot") == 0 && argc > 6) {
        int (*snapshot)(const char *) =
            (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
        if (snapshot) {
            double t = now_ns();
            int status = snapshot(argv[6]);
            printf(", \"snapshot_ms\": %.1f, \"snapshot_status\": %d", (now_ns() - t) / 1e6,
                   status);
        }
    }
    printf("}\n");
    fflush(stdout);
    if (strcmp(extra, "crash") == 0) {
        crash_started = now_ns();
        raise(SIGSEGV);
    }
    for (long i = 0; i < live; i++)
        cudaFree(kept[i]);
    free(kept);
    return 0;
}
