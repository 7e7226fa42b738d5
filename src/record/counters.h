/* counters.h - per-device, per-kind totals, named as in torch.cuda.memory_stats().
 *
 * allocated_bytes.{current,peak,allocated,freed} and allocation.{...} mean what
 * they mean in PyTorch, but count what the driver handed out, not what tensors
 * use. Each device has one set per kind and one more, COUNTER_DEVICE_MEMORY,
 * for all kinds that occupy device memory together (its peak is the peak of
 * the sum, which the per-kind peaks cannot give).
 *
 * Blocks whose device is unknown go to the slot COUNTER_NO_DEVICE.
 *
 * Changed by threads holding different registry shards' locks at once: see
 * counters.c for how the figures are split to keep that cheap, and how
 * exact the peaks are. Read them with counters_snapshot() or
 * counters_current_bytes(), under tracker_lock for a consistent picture: no
 * figure of counter_table itself is whole on its own. */
#ifndef CUMEMTRACE_COUNTERS_H
#define CUMEMTRACE_COUNTERS_H

#include <stdint.h>

#include "kinds.h"

#define MAX_DEVICES 64
#define COUNTER_NO_DEVICE MAX_DEVICES
#define COUNTER_DEVICE_MEMORY KIND_COUNT

struct counters {
    uint64_t bytes_current, bytes_peak, bytes_allocated, bytes_freed;
    uint64_t blocks_current, blocks_peak, blocks_allocated, blocks_freed;
    uint64_t implicit_bytes, implicit_blocks; /* freed by context teardown */
    uint64_t failures, ooms;
};

struct counter_table {
    struct counters sets[MAX_DEVICES + 1][KIND_COUNT + 1];
    uint8_t device_seen[MAX_DEVICES + 1];
};

extern struct counter_table counter_table;

int counters_slot(int device);
void counters_reset(void);
/* `stripe`: the calling thread's number (stripes.h). */
void counters_on_alloc(int stripe, int device, int kind, uint64_t size);
void counters_on_free(int stripe, int device, int kind, uint64_t size, int implicit);
void counters_on_restore(int stripe, int device, int kind, uint64_t size); /* undo a free */
void counters_on_failure(int device, int kind, int oom);
void counters_snapshot(struct counter_table *out);  /* every figure, put together */
uint64_t counters_current_bytes(int slot, int set); /* one figure, put together */

#endif
