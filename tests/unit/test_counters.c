/* test_counters.c - per-thread pending amounts in the counters (counters.c):
 * current figures exact at every snapshot, peaks exact with one allocating
 * thread and within one slack per other thread otherwise, large blocks and
 * unstriped threads counted in the shared figures at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "counters.h"
#include "kinds.h"
#include "stripes.h"

#define MIB (1ull << 20)

static struct counters now(int device, int set)
{
    static struct counter_table table;
    counters_snapshot(&table);
    return table.sets[counters_slot(device)][set];
}

/* One thread, small blocks up and down: the shared figure is never written,
 * yet the snapshot and the peak are exact. */
static void test_one_thread_exact(void)
{
    counters_reset();
    uint64_t live = 0, peak = 0;
    uint64_t sizes[] = {512, 4096, 100, 70000, 3};
    for (int i = 0; i < 5; i++) {
        counters_on_alloc(1, 0, KIND_DEVICE, sizes[i]);
        live += sizes[i];
        peak = live > peak ? live : peak;
    }
    counters_on_free(1, 0, KIND_DEVICE, 4096, 0);
    counters_on_free(1, 0, KIND_DEVICE, 70000, 0);
    live -= 4096 + 70000;
    counters_on_alloc(1, 0, KIND_DEVICE, 1000);
    live += 1000;
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_current, 0); /* all pending */
    struct counters c = now(0, KIND_DEVICE);
    CHECK_EQ(c.bytes_current, live);
    CHECK_EQ(c.blocks_current, 4);
    CHECK_EQ(c.bytes_peak, peak);
    CHECK_EQ(c.blocks_peak, 5);
    CHECK_EQ(c.bytes_freed, 74096);
    CHECK_EQ(c.bytes_allocated, live + 74096);
    CHECK_EQ(now(0, COUNTER_DEVICE_MEMORY).bytes_peak, peak);
    CHECK_EQ(counters_current_bytes(0, COUNTER_DEVICE_MEMORY), live);
}

/* A block of a slack or more moves the whole pending amount at once. */
static void test_large_block_shared_at_once(void)
{
    counters_reset();
    counters_on_alloc(3, 0, KIND_DEVICE, 1000);
    counters_on_alloc(3, 0, KIND_DEVICE, 2 * MIB);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_current, 2 * MIB + 1000);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_peak, 2 * MIB + 1000);
    counters_on_free(3, 0, KIND_DEVICE, 2 * MIB, 0);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_current, 1000);
}

/* Thread number 0 and numbers past the stripes change the shared figures. */
static void test_unstriped_threads(void)
{
    counters_reset();
    counters_on_alloc(0, 0, KIND_DEVICE, 10);
    counters_on_alloc(STRIPE_COUNT + 5, 0, KIND_DEVICE, 20);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_current, 30);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_peak, 30);
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].blocks_current, 2);
}

/* Several threads in turn, random sizes, frees by other threads than the
 * allocating one: current figures exact, and the peak within one slack per
 * other stripe of the true peak, and never below a current figure. */
static void test_stripes_bounded(void)
{
    counters_reset();
    enum { STRIPES = 4, BLOCKS = 4000 };
    static uint64_t sizes[BLOCKS];
    int live_count = 0;
    uint64_t live = 0, peak = 0;
    srand(7);
    for (int step = 0; step < 200000; step++) {
        int stripe = 1 + rand() % STRIPES;
        if (live_count < BLOCKS && (live_count == 0 || rand() % 2)) {
            uint64_t size = 1 + (uint64_t)(rand() % 65536);
            sizes[live_count++] = size;
            counters_on_alloc(stripe, 2, KIND_MANAGED, size);
            live += size;
            peak = live > peak ? live : peak;
        } else {
            int i = rand() % live_count;
            uint64_t size = sizes[i];
            sizes[i] = sizes[--live_count];
            counters_on_free(stripe, 2, KIND_MANAGED, size, 0);
            live -= size;
        }
    }
    struct counters c = now(2, KIND_MANAGED);
    CHECK_EQ(c.bytes_current, live);
    CHECK_EQ(c.blocks_current, (uint64_t)live_count);
    uint64_t bound = (STRIPES - 1) * MIB;
    CHECK(c.bytes_peak + bound >= peak && c.bytes_peak <= peak + bound);
    CHECK(c.bytes_peak >= c.bytes_current);
}

/* Threads at once, each with its own stripe: nothing lost. */
struct worker {
    int stripe;
    uint64_t kept;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 100000; i++) {
        uint64_t size = 256 + (uint64_t)(i % 4096);
        counters_on_alloc(w->stripe, 5, KIND_DEVICE, size);
        if (i % 3)
            counters_on_free(w->stripe, 5, KIND_DEVICE, size, 0);
        else
            w->kept += size;
    }
    return NULL;
}

static void test_threads_at_once(void)
{
    counters_reset();
    enum { THREADS = 8 };
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){t + 1, 0};
        pthread_create(&threads[t], NULL, work, &workers[t]);
    }
    uint64_t kept = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        kept += workers[t].kept;
    }
    struct counters c = now(5, KIND_DEVICE);
    CHECK_EQ(c.bytes_current, kept);
    CHECK_EQ(c.blocks_current, (uint64_t)THREADS * 33334);
    CHECK(c.bytes_peak >= kept);
}

int main(void)
{
    test_one_thread_exact();
    test_large_block_shared_at_once();
    test_unstriped_threads();
    test_stripes_bounded();
    test_threads_at_once();
    return check_done("test_counters");
}
