/* counters.c - per-device, per-kind totals (see counters.h).
 *
 * Kept in two places so that threads allocating at once touch few shared
 * cache lines:
 * - counter_table: the shared figures. bytes/blocks current and their peaks
 *   (the peaks of the sum: no split figure could give them), failures and
 *   ooms, changed atomically.
 * - stripes[thread]: threads that own a stripe (stripes.h) each have one,
 *   changed with plain stores by that thread alone:
 *   - bytes/blocks: what the thread has added to the current figures and
 *     not yet moved into counter_table. They move once they pass a slack
 *     (1 MiB or 256 blocks, either way), and a block of a slack or more
 *     moves them at once. So an allocate+free pair of small blocks writes
 *     nothing another thread reads, and a large block is counted at once.
 *   - freed and implicitly freed totals, only ever summed.
 *   Other threads (number 0, or past the stripes) change counter_table.
 *
 * Peaks. A thread that adds checks "shared figure + its own pending" against
 * the peak and raises it. With one allocating thread that is the true value
 * at every step, so the peak is exact; with several, each other thread's
 * pending amount (under one slack, either way) is missing from the check,
 * so a peak is exact to within (allocating threads - 1) x 1 MiB (and
 * x 256 blocks), above or below. A snapshot adds every stripe
 * (counters_snapshot), so current figures are exact, and a peak is never
 * below the current figure of any snapshot.
 *
 * bytes_allocated is not kept at all: it is current + freed + implicit
 * (a failed free that is put back moves bytes from freed to current).
 * counters_snapshot() puts the whole table together, under tracker_lock. */
#include <string.h>

#include "counters.h"
#include "stripes.h"

struct counter_table counter_table;

/* A thread's own share of one set: its pending change of the current
 * figures, and what it freed. */
struct stripe {
    int64_t bytes, blocks;
    uint64_t bytes_freed, blocks_freed;
    uint64_t implicit_bytes, implicit_blocks; /* freed by context teardown */
};
static struct stripe stripes[STRIPE_COUNT][MAX_DEVICES + 1][KIND_COUNT + 1];

int counters_slot(int device)
{
    return device >= 0 && device < MAX_DEVICES ? device : COUNTER_NO_DEVICE;
}

/* Only the rows of devices seen: the stripes stay untouched pages in a
 * process that uses one device. */
void counters_reset(void)
{
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        if (counter_table.device_seen[slot]) {
            for (int stripe = 0; stripe < STRIPE_COUNT; stripe++)
                memset(stripes[stripe][slot], 0, sizeof(stripes[stripe][slot]));
        }
    memset(&counter_table, 0, sizeof(counter_table));
}

/* Into the shared figures at once: every value they take is the result of
 * one atomic add, and whoever moved one past its peak raises the peak. */
static void move_shared(struct counters *c, int64_t bytes, int64_t blocks)
{
    uint64_t now_bytes = __atomic_add_fetch(&c->bytes_current, (uint64_t)bytes, __ATOMIC_RELAXED);
    uint64_t now_blocks =
        __atomic_add_fetch(&c->blocks_current, (uint64_t)blocks, __ATOMIC_RELAXED);
    if (bytes > 0) {
        raise_peak(&c->bytes_peak, (int64_t)now_bytes);
        raise_peak(&c->blocks_peak, (int64_t)now_blocks);
    }
}

static void move_current(int stripe, int slot, int set, int64_t bytes, int64_t blocks)
{
    struct counters *c = &counter_table.sets[slot][set];
    if (!stripe_owned(stripe)) {
        move_shared(c, bytes, blocks);
        return;
    }
    struct stripe *p = &stripes[stripe][slot][set];
    int64_t own_bytes = p->bytes + bytes, own_blocks = p->blocks + blocks;
    if (past_slack(own_bytes, own_blocks)) {
        __atomic_store_n(&p->bytes, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->blocks, 0, __ATOMIC_RELAXED);
        move_shared(c, own_bytes, own_blocks);
        return;
    }
    /* Relaxed stores: the crash dump may read them from a signal handler. */
    __atomic_store_n(&p->bytes, own_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&p->blocks, own_blocks, __ATOMIC_RELAXED);
    if (bytes > 0) { /* reads only, unless this thread has just made a peak */
        raise_peak(&c->bytes_peak,
                   (int64_t)__atomic_load_n(&c->bytes_current, __ATOMIC_RELAXED) + own_bytes);
        raise_peak(&c->blocks_peak,
                   (int64_t)__atomic_load_n(&c->blocks_current, __ATOMIC_RELAXED) + own_blocks);
    }
}

static void note_device(int slot)
{
    if (!__atomic_load_n(&counter_table.device_seen[slot], __ATOMIC_RELAXED))
        __atomic_store_n(&counter_table.device_seen[slot], 1, __ATOMIC_RELAXED);
}

void counters_on_alloc(int stripe, int device, int kind, uint64_t size)
{
    int slot = counters_slot(device);
    note_device(slot);
    move_current(stripe, slot, kind, (int64_t)size, 1);
    if (kind_uses_device_memory(kind))
        move_current(stripe, slot, COUNTER_DEVICE_MEMORY, (int64_t)size, 1);
}

/* Freed totals: `amount` blocks of `size` bytes (-1 undoes a free). Relaxed
 * stores in a stripe: the crash dump may read them from a signal handler. */
static void end(int stripe, int slot, int set, uint64_t size, int64_t amount, int implicit)
{
    uint64_t *bytes, *blocks;
    if (stripe_owned(stripe)) {
        struct stripe *e = &stripes[stripe][slot][set];
        bytes = implicit ? &e->implicit_bytes : &e->bytes_freed;
        blocks = implicit ? &e->implicit_blocks : &e->blocks_freed;
        __atomic_store_n(bytes, *bytes + size * (uint64_t)amount, __ATOMIC_RELAXED);
        __atomic_store_n(blocks, *blocks + (uint64_t)amount, __ATOMIC_RELAXED);
        return;
    }
    struct counters *c = &counter_table.sets[slot][set];
    bytes = implicit ? &c->implicit_bytes : &c->bytes_freed;
    blocks = implicit ? &c->implicit_blocks : &c->blocks_freed;
    __atomic_fetch_add(bytes, size * (uint64_t)amount, __ATOMIC_RELAXED);
    __atomic_fetch_add(blocks, (uint64_t)amount, __ATOMIC_RELAXED);
}

void counters_on_free(int stripe, int device, int kind, uint64_t size, int implicit)
{
    int slot = counters_slot(device);
    move_current(stripe, slot, kind, -(int64_t)size, -1);
    end(stripe, slot, kind, size, 1, implicit);
    if (kind_uses_device_memory(kind)) {
        move_current(stripe, slot, COUNTER_DEVICE_MEMORY, -(int64_t)size, -1);
        end(stripe, slot, COUNTER_DEVICE_MEMORY, size, 1, implicit);
    }
}

/* A free that failed: the block is live again, as if never freed. */
void counters_on_restore(int stripe, int device, int kind, uint64_t size)
{
    int slot = counters_slot(device);
    for (int i = 0; i < (kind_uses_device_memory(kind) ? 2 : 1); i++) {
        int set = i == 0 ? kind : COUNTER_DEVICE_MEMORY;
        move_current(stripe, slot, set, (int64_t)size, 1);
        end(stripe, slot, set, size, -1, 0);
    }
}

void counters_on_failure(int device, int kind, int oom)
{
    int slot = counters_slot(device);
    note_device(slot);
    struct counters *sets[2] = {&counter_table.sets[slot][kind],
                                &counter_table.sets[slot][COUNTER_DEVICE_MEMORY]};
    for (int i = 0; i < (kind_uses_device_memory(kind) ? 2 : 1); i++) {
        __atomic_fetch_add(&sets[i]->failures, 1, __ATOMIC_RELAXED);
        if (oom)
            __atomic_fetch_add(&sets[i]->ooms, 1, __ATOMIC_RELAXED);
    }
}

/* A current figure with every stripe's pending amount added. */
static void current_of(int slot, int set, uint64_t *bytes, uint64_t *blocks)
{
    const struct counters *c = &counter_table.sets[slot][set];
    uint64_t sum_bytes = __atomic_load_n(&c->bytes_current, __ATOMIC_RELAXED);
    uint64_t sum_blocks = __atomic_load_n(&c->blocks_current, __ATOMIC_RELAXED);
    for (int stripe = 1; stripe < STRIPE_COUNT; stripe++) {
        const struct stripe *p = &stripes[stripe][slot][set];
        sum_bytes += (uint64_t)__atomic_load_n(&p->bytes, __ATOMIC_RELAXED);
        sum_blocks += (uint64_t)__atomic_load_n(&p->blocks, __ATOMIC_RELAXED);
    }
    *bytes = sum_bytes;
    *blocks = sum_blocks;
}

uint64_t counters_current_bytes(int slot, int set)
{
    uint64_t bytes = 0, blocks;
    if (counter_table.device_seen[slot])
        current_of(slot, set, &bytes, &blocks);
    return bytes;
}

/* No allocation, no lock of its own: the crash dump calls it from a signal
 * handler (where, without tracker_lock, the figures may be a moment apart). */
void counters_snapshot(struct counter_table *out)
{
    memcpy(out, &counter_table, sizeof(*out));
    for (int slot = 0; slot <= MAX_DEVICES; slot++) {
        if (!out->device_seen[slot])
            continue;
        for (int set = 0; set <= KIND_COUNT; set++) {
            struct counters *c = &out->sets[slot][set];
            current_of(slot, set, &c->bytes_current, &c->blocks_current);
            if (c->bytes_peak < c->bytes_current)
                c->bytes_peak = c->bytes_current;
            if (c->blocks_peak < c->blocks_current)
                c->blocks_peak = c->blocks_current;
            for (int stripe = 1; stripe < STRIPE_COUNT; stripe++) {
                const struct stripe *e = &stripes[stripe][slot][set];
                c->bytes_freed += e->bytes_freed;
                c->blocks_freed += e->blocks_freed;
                c->implicit_bytes += e->implicit_bytes;
                c->implicit_blocks += e->implicit_blocks;
            }
            c->bytes_allocated = c->bytes_current + c->bytes_freed + c->implicit_bytes;
            c->blocks_allocated = c->blocks_current + c->blocks_freed + c->implicit_blocks;
        }
    }
}
