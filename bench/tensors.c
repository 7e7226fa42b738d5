/* tensors.c - PyTorch's tensor events driven from C: the stand-in caching
 * allocator (tests/sim/c10) hands out and takes back tensors at the pace of
 * a training step, and tells the tracer's trace tracker about each, as
 * PyTorch does. Run by bench/run.py (its `tensors` table), traced and
 * untraced, with no Python in the process: what it measures is the tensor
 * path itself, on the program's thread and on the tracer's own thread
 * (cumemtrace-rec), which enters the events in the registry.
 *
 *   bench_tensors STEPS [TENSORS_PER_STEP [WORK]]
 *
 * A step is a forward and a backward: TENSORS_PER_STEP tensors (default
 * 460) from 16 call sites in turn, of sizes that vary, every third kept for
 * the backward (an activation), the others ending at the next tensor (a
 * temporary); then the kept ones end, newest first, each after a gradient
 * that ends at once. 460 makes 613 tensors a step, as a transformer step
 * makes 614. Between two events the thread does WORK rounds of arithmetic
 * (default 4000, some microseconds: PyTorch makes some seventy tensor
 * events a millisecond on a transformer's step), so the events come at a
 * step's pace and the tracer's thread enters them as it does there, in
 * batches, rather than the program's thread entering a ring it filled.
 * One warm-up step fills the cache's segments first.
 *
 * Prints one JSON line: the events (an allocation or a free) of the timed
 * steps, the program thread's CPU and wall nanoseconds per event
 * (CLOCK_THREAD_CPUTIME_ID: the work included; bench/run.py subtracts the
 * untraced run's), and, traced, the tracer thread's CPU nanoseconds per
 * 1,000 events and its wake-ups (context switches) per 1,000 events, from
 * /proc/self/task: read once it has entered the last events, 40 ms after
 * the timed steps. The marks "tensors: start" and "tensors: end" bracket
 * the timed steps when traced (the report's self_time_ns at each, with
 * CUMEMTRACE_SELF_TIME=1, is the tracer's own time on this thread). */
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *c10sim_malloc(int device, size_t size);
int c10sim_free(int device, void *ptr);
int c10sim_init(int devices);

#define SITES 16
#define TENSORS_MAX 100000

static double clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* Sixteen call sites of c10sim_malloc: each its own return address, so its
 * own stack for the tracer. The asm statements differ, so the compiler
 * cannot fold the calls into one. */
static void *__attribute__((noinline)) allocate_at(int site, size_t size)
{
    switch (site % SITES) {
    case 1: __asm__ volatile("" ::"i"(1)); return c10sim_malloc(0, size);
    case 2: __asm__ volatile("" ::"i"(2)); return c10sim_malloc(0, size);
    case 3: __asm__ volatile("" ::"i"(3)); return c10sim_malloc(0, size);
    case 4: __asm__ volatile("" ::"i"(4)); return c10sim_malloc(0, size);
    case 5: __asm__ volatile("" ::"i"(5)); return c10sim_malloc(0, size);
    case 6: __asm__ volatile("" ::"i"(6)); return c10sim_malloc(0, size);
    case 7: __asm__ volatile("" ::"i"(7)); return c10sim_malloc(0, size);
    case 8: __asm__ volatile("" ::"i"(8)); return c10sim_malloc(0, size);
    case 9: __asm__ volatile("" ::"i"(9)); return c10sim_malloc(0, size);
    case 10: __asm__ volatile("" ::"i"(10)); return c10sim_malloc(0, size);
    case 11: __asm__ volatile("" ::"i"(11)); return c10sim_malloc(0, size);
    case 12: __asm__ volatile("" ::"i"(12)); return c10sim_malloc(0, size);
    case 13: __asm__ volatile("" ::"i"(13)); return c10sim_malloc(0, size);
    case 14: __asm__ volatile("" ::"i"(14)); return c10sim_malloc(0, size);
    case 15: __asm__ volatile("" ::"i"(15)); return c10sim_malloc(0, size);
    default: __asm__ volatile("" ::"i"(0)); return c10sim_malloc(0, size);
    }
}

/* `rounds` of dependent arithmetic: the same instructions traced or not. */
static void work(long rounds)
{
    volatile uint64_t x = 1;
    for (long i = 0; i < rounds; i++)
        x = x * 6364136223846793005u + 1442695040888963407u;
}

static void *kept[TENSORS_MAX], *temporary;
static long events;

static void *tensor(int site, size_t size)
{
    void *p = allocate_at(site, size);
    if (!p) {
        fprintf(stderr, "bench_tensors: the stand-in refused a tensor\n");
        exit(1);
    }
    events++;
    return p;
}

static void drop(void *p, long rounds)
{
    c10sim_free(0, p);
    events++;
    work(rounds);
}

/* The forward: every third tensor kept for the backward, the others
 * temporaries that end at the next tensor. The backward ends the kept ones,
 * newest first, each after a gradient that ends at once. */
static void step(int tensors, long rounds)
{
    int count = 0;
    for (int i = 0; i < tensors; i++) {
        void *p = tensor(i, 512 * (size_t)(1 + (i * 7) % 64));
        work(rounds);
        if (temporary)
            drop(temporary, rounds);
        temporary = NULL;
        if (i % 3 == 0)
            kept[count++] = p;
        else
            temporary = p;
    }
    while (count > 0) {
        drop(tensor(SITES - 1 - count % SITES, 4096), rounds);
        drop(kept[--count], rounds);
    }
}

/* The tracer's thread (cumemtrace-rec): its CPU nanoseconds so far and its
 * context switches; 0 and 0 untraced. */
static void tracer_thread(double *cpu_ns, double *switches)
{
    *cpu_ns = *switches = 0;
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *d;
    while (tasks && (d = readdir(tasks))) {
        char path[300], text[4096] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
        FILE *f = fopen(path, "r");
        int ours = f && fgets(text, sizeof(text), f) && strcmp(text, "cumemtrace-rec\n") == 0;
        if (f)
            fclose(f);
        if (!ours)
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", d->d_name);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%lf", cpu_ns) != 1)
                *cpu_ns = 0;
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", d->d_name);
        if ((f = fopen(path, "r"))) {
            double n;
            while (fgets(text, sizeof(text), f))
                if (sscanf(text, "voluntary_ctxt_switches: %lf", &n) == 1 ||
                    sscanf(text, "nonvoluntary_ctxt_switches: %lf", &n) == 1)
                    *switches += n;
            fclose(f);
        }
    }
    if (tasks)
        closedir(tasks);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tensors STEPS [TENSORS_PER_STEP [WORK]]\n");
        return 2;
    }
    long steps = atol(argv[1]);
    int tensors = argc > 2 ? atoi(argv[2]) : 460;
    long rounds = argc > 3 ? atol(argv[3]) : 4000;
    if (steps <= 0 || tensors <= 0 || tensors > TENSORS_MAX || rounds < 0) {
        fprintf(stderr, "bench_tensors: STEPS must be positive, TENSORS_PER_STEP 1 to 100000\n");
        return 2;
    }
    void (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_mark");
    c10sim_init(1);
    step(tensors, rounds);
    struct timespec settle = {0, 40 * 1000000L};
    nanosleep(&settle, NULL);
    if (mark)
        mark("tensors: start");
    double cpu0, switches0, cpu1, switches1;
    tracer_thread(&cpu0, &switches0);
    events = 0;
    double wall = clock_ns(CLOCK_MONOTONIC), own = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long s = 0; s < steps; s++)
        step(tensors, rounds);
    own = clock_ns(CLOCK_THREAD_CPUTIME_ID) - own;
    wall = clock_ns(CLOCK_MONOTONIC) - wall;
    nanosleep(&settle, NULL);
    tracer_thread(&cpu1, &switches1);
    if (mark)
        mark("tensors: end");
    printf("{\"events\": %ld, \"program_cpu_ns_per_event\": %.1f, \"wall_ns_per_event\": %.1f, "
           "\"tracer_cpu_ns_per_1000_events\": %.0f, \"tracer_wakeups_per_1000_events\": %.2f}\n",
           events, own / events, wall / events, (cpu1 - cpu0) * 1000 / events,
           (switches1 - switches0) * 1000 / events);
    return 0;
}
