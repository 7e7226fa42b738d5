/* reports_at_once.c - an OOM report and cumemtrace_snapshot() collected at once.
 *
 * SITES allocation sites (LEVELS levels of left/right calls: each path is
 * its own stack) hold one block each. A third thread keeps giving sites
 * blocks of new sizes, so that no two reports see the same figures. ROUNDS
 * times, the main thread and a second one meet, then at the same moment the
 * main thread asks for more memory than the device has (with
 * CUMEMTRACE_OOM=every each failure writes a report) and the second writes
 * a snapshot. Every report must list its stacks in the order of its own
 * figures (test_findings.py checks). Usage: reports_at_once DIR (for the snapshots). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define LEVELS 8
#define SITES (1 << LEVELS)
#define ROUNDS 10

static void *blocks[SITES];
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t together;
static int stop;
static const char *directory;

static void *level(unsigned path, int depth, size_t size);

static void *__attribute__((noinline)) left(unsigned path, int depth, size_t size)
{
    void *p = level(path, depth, size);
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

static void *__attribute__((noinline)) right(unsigned path, int depth, size_t size)
{
    void *p = level(path, depth, size);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *__attribute__((noinline)) level(unsigned path, int depth, size_t size)
{
    void *p = NULL;
    if (depth == 0)
        cudaMalloc(&p, size);
    else
        p = (path & 1 ? left : right)(path >> 1, depth - 1, size);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Site `site`'s block replaced by one of a size no other site has now. */
static void resize(unsigned site, unsigned step)
{
    pthread_mutex_lock(&blocks_lock);
    cudaFree(blocks[site]);
    blocks[site] = level(site, LEVELS, 4096 + 512 * (size_t)((site + step) % SITES));
    pthread_mutex_unlock(&blocks_lock);
}

static void *churn(void *unused)
{
    (void)unused;
    for (unsigned step = 1; !__atomic_load_n(&stop, __ATOMIC_RELAXED); step++)
        for (unsigned site = 0; site < SITES; site += 7)
            resize(site, step);
    return NULL;
}

static void *snapshots(void *unused)
{
    (void)unused;
    int (*snapshot)(const char *) =
        (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
    for (int i = 0; i < ROUNDS; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/snap-%02d", directory, i);
        pthread_barrier_wait(&together);
        if (!snapshot || snapshot(path) != 0)
            printf("snapshot %d failed\n", i);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    directory = argc > 1 ? argv[1] : ".";
    for (unsigned site = 0; site < SITES; site++)
        blocks[site] = level(site, LEVELS, 4096 + 512 * (size_t)site);
    pthread_barrier_init(&together, NULL, 2);
    pthread_t snapper, churner;
    pthread_create(&churner, NULL, churn, NULL);
    pthread_create(&snapper, NULL, snapshots, NULL);
    int ooms = 0;
    for (int i = 0; i < ROUNDS; i++) {
        void *too_big;
        pthread_barrier_wait(&together);
        ooms += cudaMalloc(&too_big, (size_t)1 << 40) == cudaErrorMemoryAllocation;
    }
    pthread_join(snapper, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(churner, NULL);
    printf("%d ooms\n", ooms);
    return 0;
}
