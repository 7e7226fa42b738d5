/* counters.c - per-device, per-kind totals (see counters.h).
 *
 * Kept in two places so that threads allocating at once touch few shared
 * cache lines:
 * - counter_table: what must be one global figure, changed atomically:
 *   bytes/blocks current (their peaks are the peaks of the sum, which no
 *   split figure could give), failures and ooms.
 * - ended[shard]: bytes and blocks freed and freed implicitly, per registry
 *   shard, changed with plain stores by the holder of that shard's lock.
 * bytes_allocated is not kept at all: it is current + freed + implicit
 * (a failed free that is put back moves bytes from freed to current).
 * counters_snapshot() puts the whole table together, under tracker_lock. */
#include <string.h>

#include "counters.h"
#include "registry.h"

struct counter_table counter_table;

struct ended {
    uint64_t bytes_freed, blocks_freed;
    uint64_t implicit_bytes, implicit_blocks;
};
static struct ended ended[REGISTRY_SHARDS][MAX_DEVICES + 1][KIND_COUNT + 1];

int counters_slot(int device)
{
    return device >= 0 && device < MAX_DEVICES ? device : COUNTER_NO_DEVICE;
}

/* Only the rows of devices seen: the per-shard table stays untouched pages
 * in a process that uses one device. */
void counters_reset(void)
{
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        if (counter_table.device_seen[slot])
            for (int shard = 0; shard < REGISTRY_SHARDS; shard++)
                memset(ended[shard][slot], 0, sizeof(ended[shard][slot]));
    memset(&counter_table, 0, sizeof(counter_table));
}

/* A peak is raised by whoever moved the current value past it: every value
 * the current figure takes is the result of one atomic add, so it is exact. */
static void raise_peak(uint64_t *peak, uint64_t value)
{
    uint64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (value > seen &&
           !__atomic_compare_exchange_n(peak, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void move_current(struct counters *c, int64_t bytes, int64_t blocks)
{
    uint64_t now_bytes = __atomic_add_fetch(&c->bytes_current, (uint64_t)bytes, __ATOMIC_RELAXED);
    uint64_t now_blocks =
        __atomic_add_fetch(&c->blocks_current, (uint64_t)blocks, __ATOMIC_RELAXED);
    if (bytes > 0) {
        raise_peak(&c->bytes_peak, now_bytes);
        raise_peak(&c->blocks_peak, now_blocks);
    }
}

static void note_device(int slot)
{
    if (!__atomic_load_n(&counter_table.device_seen[slot], __ATOMIC_RELAXED))
        __atomic_store_n(&counter_table.device_seen[slot], 1, __ATOMIC_RELAXED);
}

void counters_on_alloc(int device, int kind, uint64_t size)
{
    int slot = counters_slot(device);
    note_device(slot);
    move_current(&counter_table.sets[slot][kind], (int64_t)size, 1);
    if (kind_uses_device_memory(kind))
        move_current(&counter_table.sets[slot][COUNTER_DEVICE_MEMORY], (int64_t)size, 1);
}

static void end(struct ended *e, uint64_t size, int implicit)
{
    if (implicit) {
        e->implicit_bytes += size;
        e->implicit_blocks++;
    } else {
        e->bytes_freed += size;
        e->blocks_freed++;
    }
}

void counters_on_free(int shard, int device, int kind, uint64_t size, int implicit)
{
    int slot = counters_slot(device);
    move_current(&counter_table.sets[slot][kind], -(int64_t)size, -1);
    end(&ended[shard][slot][kind], size, implicit);
    if (kind_uses_device_memory(kind)) {
        move_current(&counter_table.sets[slot][COUNTER_DEVICE_MEMORY], -(int64_t)size, -1);
        end(&ended[shard][slot][COUNTER_DEVICE_MEMORY], size, implicit);
    }
}

/* A free that failed: the block is live again, as if never freed. */
void counters_on_restore(int shard, int device, int kind, uint64_t size)
{
    int slot = counters_slot(device);
    for (int i = 0; i < (kind_uses_device_memory(kind) ? 2 : 1); i++) {
        int set = i == 0 ? kind : COUNTER_DEVICE_MEMORY;
        move_current(&counter_table.sets[slot][set], (int64_t)size, 1);
        ended[shard][slot][set].bytes_freed -= size;
        ended[shard][slot][set].blocks_freed--;
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
            for (int shard = 0; shard < REGISTRY_SHARDS; shard++) {
                const struct ended *e = &ended[shard][slot][set];
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
