/* threads.c - 16 threads x 10 000 allocations and frees, one block kept each.
 * The report's counts must be exact: 160 000 allocated, 159 984 freed. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 16, ROUNDS = 10000 };

static void *worker(void *arg)
{
    long id = (long)arg;
    void *kept = NULL;
    for (int i = 0; i < ROUNDS; i++) {
        void *p;
        if (cudaMalloc(&p, 256 + (size_t)((id * 7919 + i * 104729) % 65536)) != cudaSuccess)
            return (void *)1;
        if (i == ROUNDS - 1)
            kept = p;
        else if (cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return kept ? NULL : (void *)1;
}

int main(void)
{
    pthread_t threads[THREADS];
    cudaFree(0); /* initialise the runtime once, as programs usually do */
    for (long i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        failed += result != NULL;
    }
    printf("threads: %d failed\n", failed);
    return failed;
}
