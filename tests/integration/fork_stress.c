/* fork_stress.c - forks while the tracer is busy in other threads.
 *
 * Four threads allocate and free, a fifth sends the process SIGUSR2 every
 * 2 ms (each one a snapshot, written by the tracer's own thread), and the
 * main thread forks children one after another for `seconds` (default 3).
 * One child in four makes a CUDA call (and so writes an exit report); all
 * return from the child function through exit(). A child that has not
 * exited 20 s after its fork counts as hung and is killed; one that dies
 * of a signal counts as crashed. Prints "forks N hung H crashed C" and
 * exits 0 only when H and C are 0.
 *
 * The forks start once the five threads are running (each has allocated
 * or signalled once). A fork while a thread is still being started can
 * leave, under AddressSanitizer (GCC 12's has no fork handler for its
 * allocator), a lock of that allocator held in the child, and the child's
 * next thread (the tracer's snapshot thread, at its first CUDA call)
 * waits for it for ever: an untraced ASan program that forks as its
 * threads start and makes a thread in the child hangs the same way. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static int running; /* threads that have allocated or signalled once */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *churn(void *arg)
{
    long id = (long)arg;
    void *held[16] = {0};
    for (unsigned i = 0; !stop; i++) {
        void **slot = &held[i % 16];
        if (*slot)
            cudaFree(*slot);
        *slot = NULL;
        cudaMalloc(slot, 4096 + (size_t)((id * 977 + i * 131) % 65536));
        if (i == 0)
            __atomic_add_fetch(&running, 1, __ATOMIC_RELEASE);
    }
    for (int i = 0; i < 16; i++)
        if (held[i])
            cudaFree(held[i]);
    return NULL;
}

static void *signaller(void *unused)
{
    (void)unused;
    struct timespec pause = {0, 2000000};
    for (int sent = 0; !stop; sent++) {
        kill(getpid(), SIGUSR2);
        if (sent == 0)
            __atomic_add_fetch(&running, 1, __ATOMIC_RELEASE);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Wait up to `limit` seconds; 0 exited, 1 hung (killed), 2 killed by a signal. */
static int reap(pid_t child, double limit)
{
    double give_up = now() + limit;
    struct timespec pause = {0, 1000000};
    int status;
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            return WIFSIGNALED(status) ? 2 : 0;
        if (done < 0)
            return 0;
        if (now() > give_up) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return 1;
        }
        nanosleep(&pause, NULL);
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    void *first;
    if (cudaMalloc(&first, 1 << 20) != cudaSuccess)
        return 3;
    pthread_t threads[5];
    for (long i = 0; i < 4; i++)
        pthread_create(&threads[i], NULL, churn, (void *)i);
    pthread_create(&threads[4], NULL, signaller, NULL);

    struct timespec moment = {0, 100000};
    while (__atomic_load_n(&running, __ATOMIC_ACQUIRE) < 5)
        nanosleep(&moment, NULL);

    int forks = 0, hung = 0, crashed = 0;
    double end = now() + seconds;
    while (now() < end) {
        pid_t child = fork();
        if (child < 0)
            break;
        if (child == 0) {
            if (forks % 4 == 1) {
                void *p;
                cudaMalloc(&p, 8192);
            }
            exit(0);
        }
        forks++;
        int outcome = reap(child, 20);
        hung += outcome == 1;
        crashed += outcome == 2;
        if (hung)
            break; /* one is enough to fail; the next could take 20 s more */
    }
    stop = 1;
    for (int i = 0; i < 5; i++)
        pthread_join(threads[i], NULL);
    cudaFree(first);
    printf("forks %d hung %d crashed %d\n", forks, hung, crashed);
    return hung || crashed ? 1 : 0;
}
