/* threads_snapshot.c - 8 threads allocate and free at once (cudaMalloc and
 * cudaMallocAsync on a stream of their own, blocks freed out of order) while
 * the main thread takes snapshots and marks. Every snapshot must be one
 * consistent picture (its blocks add up to its counters and its stacks), and
 * the exit report's counts must be exact:
 *
 *   threads_snapshot DIR     snapshots written to DIR/snap-0 ... snap-9
 *
 * Each thread makes rounds of BATCH allocations until the snapshots are done
 * (MIN_ROUNDS at least); the last block of its last round stays allocated.
 * The program prints how many allocations were made in all. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 8, MIN_ROUNDS = 200, BATCH = 8, SNAPSHOTS = 10 };

static int stop;
static long rounds_made[THREADS];

static void *worker(void *arg)
{
    long id = (long)arg;
    cudaStream_t stream;
    if (cudaStreamCreate(&stream) != cudaSuccess)
        return (void *)1;
    void *kept = NULL;
    int last = 0;
    for (int round = 0; !last; round++) {
        last = round + 1 >= MIN_ROUNDS && __atomic_load_n(&stop, __ATOMIC_ACQUIRE);
        rounds_made[id] = round + 1;
        void *blocks[BATCH];
        for (int i = 0; i < BATCH; i++) {
            size_t size = 512 + (size_t)((id * 7919 + round * 104729 + i * 31) % 8192);
            cudaError_t result =
                i % 2 ? cudaMallocAsync(&blocks[i], size, stream) : cudaMalloc(&blocks[i], size);
            if (result != cudaSuccess)
                return (void *)1;
        }
        for (int i = 0; i < BATCH; i++) {
            int at = (i * 5 + round) % BATCH; /* out of order: 5 and 8 are coprime */
            if (last && at == 0) {
                kept = blocks[at];
                continue;
            }
            cudaError_t result = at % 2 ? cudaFreeAsync(blocks[at], stream) : cudaFree(blocks[at]);
            if (result != cudaSuccess)
                return (void *)1;
        }
    }
    cudaStreamSynchronize(stream);
    return kept ? NULL : (void *)1;
}

int main(int argc, char **argv)
{
    int (*snapshot)(const char *) =
        (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
    void (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_mark");
    pthread_t threads[THREADS];
    cudaFree(0);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    char path[4096];
    int snapshots_failed = 0;
    for (int n = 0; n < SNAPSHOTS && argc > 1; n++) {
        if (mark)
            mark("while the threads run");
        snprintf(path, sizeof(path), "%s/snap-%d", argv[1], n);
        if (snapshot && snapshot(path) != 0)
            snapshots_failed++;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    int failed = 0;
    long allocations = 0;
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        failed += result != NULL;
        allocations += rounds_made[i] * BATCH;
    }
    printf("threads_snapshot: %d failed, %d snapshots failed, %ld allocations\n", failed,
           snapshots_failed, allocations);
    return failed || snapshots_failed;
}
