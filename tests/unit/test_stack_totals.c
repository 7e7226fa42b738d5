/* test_stack_totals.c - per-thread pending changes of a stack's totals
 * (stack_totals.c): exact after a flush, peaks and low points exact with one
 * thread, peaks bounded with several, evictions and unstriped threads
 * applied at once. */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "stack_totals.h"

/* stacks[id]: the records of stacks 1..19, interned by main. */
static struct stack_record *stacks[20];

/* Every record's totals and history back to zero. */
static void clear(void)
{
    for (uint32_t id = 1; id < 20; id++) {
        struct stack_record *s = stacks[id];
        s->live_bytes = s->live_blocks = s->peak_live_bytes = 0;
        s->allocations = s->allocated_bytes = 0;
        memset(stack_history(id), 0, sizeof(struct stack_history));
    }
}

/* One thread: nothing reaches the record until the flush, then all of it. */
static void test_one_thread(void)
{
    stack_totals_reset();
    clear();
    struct stack_record *s = stacks[1];
    stack_totals_alloc(1, s, 1, 100);
    stack_totals_alloc(1, s, 1, 300);
    stack_totals_free(1, s, 1, 100, 0);
    stack_totals_alloc(1, s, 1, 50);
    CHECK_EQ(s->live_bytes, 0);        /* pending */
    CHECK_EQ(s->peak_live_bytes, 400); /* exact with one thread */
    stack_totals_flush();
    CHECK_EQ(s->live_bytes, 350);
    CHECK_EQ(s->live_blocks, 2);
    CHECK_EQ(s->allocations, 3);
    CHECK_EQ(s->allocated_bytes, 450);
    CHECK_EQ(s->peak_live_bytes, 400);
    stack_totals_flush(); /* nothing pending: no change */
    CHECK_EQ(s->live_bytes, 350);
}

/* Ids that share a cache entry evict each other; a free of a block from a
 * stack not in the cache, an implicit free and thread 0 go to the record. */
static void test_eviction_and_direct_paths(void)
{
    stack_totals_reset();
    clear();
    stack_totals_alloc(2, stacks[3], 3, 10);
    stack_totals_alloc(2, stacks[11], 11, 20); /* 11 % 8 == 3: evicts stack 3 */
    CHECK_EQ(stacks[3]->live_bytes, 10);
    CHECK_EQ(stacks[11]->live_bytes, 0);
    stack_totals_free(2, stacks[3], 3, 10, 0); /* not cached: to the record */
    CHECK_EQ(stacks[3]->live_bytes, 0);
    stack_totals_free(2, stacks[11], 11, 20, 1); /* implicit: to the record */
    CHECK_EQ(stack_history(11)->implicit_bytes, 20);
    stack_totals_alloc(0, stacks[5], 5, 7);
    CHECK_EQ(stacks[5]->live_bytes, 7);
    CHECK_EQ(stacks[5]->allocations, 1);
    stack_totals_flush();
    CHECK_EQ(stacks[11]->live_bytes, 0);
    CHECK_EQ(stacks[11]->live_blocks, 0);
    CHECK_EQ(stacks[11]->allocations, 1);
}

/* Past the slack the pending change moves on its own. */
static void test_slack(void)
{
    stack_totals_reset();
    clear();
    for (int i = 0; i < 300; i++)
        stack_totals_alloc(4, stacks[2], 2, 64);
    CHECK(stacks[2]->live_blocks >= 256);
    stack_totals_flush();
    CHECK_EQ(stacks[2]->live_blocks, 300);
    CHECK_EQ(stacks[2]->peak_live_bytes, 300 * 64);
}

/* The low point since a sample (set here as a sample sets it): an
 * allocation and its free within a pending change leave the history alone;
 * a free below where the change began lowers it once the change moves, to
 * the lowest the stack went; frees into the record lower it at once. */
static void test_low_point(void)
{
    stack_totals_reset();
    clear();
    struct stack_record *s = stacks[1];
    uint64_t *low = &stack_history(1)->low_bytes;
    stack_totals_alloc(1, s, 1, 1000);
    stack_totals_flush();
    *low = s->live_bytes;              /* a sample: 1000 */
    stack_totals_alloc(1, s, 1, 4000); /* a temporary and its free */
    stack_totals_alloc(1, s, 1, 10);
    stack_totals_free(1, s, 1, 4000, 0);
    stack_totals_flush();
    CHECK_EQ(*low, 1000); /* never below 1000 */
    CHECK_EQ(s->live_bytes, 1010);
    stack_totals_alloc(1, s, 1, 1);      /* the change holds stack 1: 1011 */
    stack_totals_free(1, s, 1, 1000, 0); /* down to 11 ... */
    stack_totals_alloc(1, s, 1, 500);    /* ... and up again: 511 */
    CHECK_EQ(*low, 1000);                /* pending */
    stack_totals_flush();
    CHECK_EQ(*low, 11);
    CHECK_EQ(s->live_bytes, 511);
    /* Stack 9 evicts stack 1 (9 % 8 == 1): a free of stack 1's lands in
     * the record, and lowers the low point there. */
    *low = s->live_bytes;
    stack_totals_alloc(1, stacks[9], 9, 1);
    stack_totals_free(1, s, 1, 500, 0);
    CHECK_EQ(*low, 11);
    /* An implicit free while the thread's change holds 30 more: the change
     * moves first, so the stack never went below the sample's 11. */
    stack_totals_alloc(1, s, 1, 30);
    stack_totals_free(1, s, 1, 10, 1);
    CHECK_EQ(*low, 11);
    CHECK_EQ(s->live_bytes, 31);
}

/* Threads at once on one stack, frees by the allocating thread. */
static void *work(void *arg)
{
    int thread = (int)(intptr_t)arg;
    for (int i = 0; i < 100000; i++) {
        stack_totals_alloc(thread, stacks[7], 7, 512);
        if (i % 4)
            stack_totals_free(thread, stacks[7], 7, 512, 0);
    }
    return NULL;
}

static void test_threads(void)
{
    stack_totals_reset();
    clear();
    pthread_t threads[8];
    for (int t = 0; t < 8; t++)
        pthread_create(&threads[t], NULL, work, (void *)(intptr_t)(t + 1));
    for (int t = 0; t < 8; t++)
        pthread_join(threads[t], NULL);
    stack_totals_flush();
    CHECK_EQ(stacks[7]->live_blocks, 8 * 25000);
    CHECK_EQ(stacks[7]->live_bytes, 8 * 25000 * 512);
    CHECK_EQ(stacks[7]->allocations, 8 * 100000);
    /* The true peak is the final figure (it only grows); one slack per other thread. */
    CHECK(stacks[7]->peak_live_bytes + 7 * (1 << 20) >= stacks[7]->live_bytes);
}

int main(void)
{
    for (uintptr_t id = 1; id < 20; id++) {
        uintptr_t frames[1] = {0x1000 + id};
        CHECK_EQ(stack_intern(frames, 1, stack_hash(frames, 1)), id);
        stacks[id] = stack_get((uint32_t)id);
    }
    test_one_thread();
    test_eviction_and_direct_paths();
    test_slack();
    test_low_point();
    test_threads();
    return check_done("test_stack_totals");
}
