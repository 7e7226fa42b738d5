/* crash.c - programs that die, or are signalled, while holding GPU memory.
 *
 *   segv-threads  8 threads allocate and free in a loop while the main thread,
 *                 holding 3 blocks of its own, reads an unmapped address
 *   abort         abort() from inside a CUDA call (the simulator's
 *                 SIMCUDA_ABORT_AT), with 2 blocks live
 *   own-handler   the program installed its own SIGSEGV handler before any CUDA
 *                 call; it must still run (it exits with status 3)
 *   usr2-storm    4 threads x 5000 allocations while the main thread sends
 *                 itself 1000 SIGUSR2; prints what the threads computed
 *   usr2-chained  the program's own SIGUSR2 handler, installed first, must see
 *                 every signal too
 *   exit-in-handler  a SIGALRM handler calls exit() while the main thread
 *                 allocates and frees in a loop (often inside the tracer)
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg)
{
    long id = (long)arg;
    unsigned long done = 0;
    while (!stop) {
        void *p;
        if (cudaMalloc(&p, 4096 + (size_t)(id * 512)) == cudaSuccess) {
            cudaFree(p);
            done++;
        }
    }
    return (void *)done;
}

static void *__attribute__((noinline)) hold(size_t bytes)
{
    void *p = NULL;
    cudaMalloc(&p, bytes);
    return p;
}

static void own_segv_handler(int signal)
{
    (void)signal;
    static const char text[] = "own handler ran\n";
    ssize_t unused = write(1, text, sizeof(text) - 1);
    (void)unused;
    _exit(3);
}

static void exit_handler(int signal)
{
    (void)signal;
    exit(0); /* not async-signal-safe, and programs do it anyway */
}

static volatile sig_atomic_t own_usr2_count;
static void own_usr2_handler(int signal)
{
    (void)signal;
    own_usr2_count++;
}

static void *storm(void *arg)
{
    long id = (long)arg;
    unsigned long sum = 0;
    for (int i = 0; i < 5000; i++) {
        void *p;
        size_t size = 1024 + (size_t)((id * 131 + i * 17) % 8192);
        if (cudaMalloc(&p, size) != cudaSuccess)
            return (void *)-1L;
        sum += size;
        if (i % 50 != 0)
            cudaFree(p);
    }
    return (void *)sum;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "segv-threads";
    if (strcmp(mode, "own-handler") == 0)
        signal(SIGSEGV, own_segv_handler);
    if (strcmp(mode, "usr2-chained") == 0)
        signal(SIGUSR2, own_usr2_handler);

    hold(1 << 20);
    hold(2 << 20);
    if (strcmp(mode, "exit-in-handler") == 0) {
        signal(SIGALRM, exit_handler);
        struct itimerval timer = {{0, 0}, {0, 20000}};
        setitimer(ITIMER_REAL, &timer, NULL);
        for (;;) {
            void *p;
            cudaMalloc(&p, 4096);
            cudaFree(p);
        }
    }
    if (strcmp(mode, "abort") == 0) {
        void *p;
        cudaMalloc(&p, 4096); /* SIMCUDA_ABORT_AT=3: aborts inside this call */
        return 0;
    }
    hold(3 << 20);

    if (strcmp(mode, "segv-threads") == 0 || strcmp(mode, "own-handler") == 0) {
        pthread_t threads[8];
        for (long i = 0; i < 8; i++)
            pthread_create(&threads[i], NULL, churn, (void *)i);
        struct timespec pause = {0, 50 * 1000000};
        nanosleep(&pause, NULL);
        volatile uintptr_t where = 16;             /* an unmapped address: a real fault */
        volatile int *bad = (volatile int *)where; /* a real fault, not a raise() */
        return *bad;
    }
    if (strcmp(mode, "usr2-storm") == 0 || strcmp(mode, "usr2-chained") == 0) {
        int signals = strcmp(mode, "usr2-storm") == 0 ? 1000 : 20;
        pthread_t threads[4];
        for (long i = 0; i < 4; i++)
            pthread_create(&threads[i], NULL, storm, (void *)i);
        struct timespec pause = {0, 200 * 1000};
        for (int i = 0; i < signals; i++) {
            kill(getpid(), SIGUSR2);
            nanosleep(&pause, NULL);
        }
        unsigned long total = 0;
        for (int i = 0; i < 4; i++) {
            void *result;
            pthread_join(threads[i], &result);
            total += (unsigned long)result;
        }
        printf("storm: %lu bytes allocated", total);
        if (strcmp(mode, "usr2-chained") == 0)
            printf(", own handler saw %d signals", (int)own_usr2_count);
        printf("\n");
        return 0;
    }
    return 1;
}
