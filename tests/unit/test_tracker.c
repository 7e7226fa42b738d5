/* test_tracker.c - the core's bookkeeping, driven directly (no CUDA, no preload):
 * counters after allocations, frees, failed frees, context teardown and unmaps. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "counters.h"
#include "kinds.h"
#include "run_events.h"
#include "stacks.h"
#include "tracker.h"

static struct counters *set(int device, int kind)
{
    static struct counter_table now;
    counters_snapshot(&now);
    return &now.sets[counters_slot(device)][kind];
}

static void allocate(uint64_t value, uint64_t size, int kind, int device, int context)
{
    struct allocation a = {value, size, 0, device, kind, 0, context, NULL};
    tracker_alloc(&a);
}

int main(void)
{
    setenv("CUMEMTRACE_QUIET", "1", 1);
    setenv("CUMEMTRACE_FORMAT", "none", 1);
    tracker_init();

    allocate(0x10000, 1000, KIND_DEVICE, 0, 1);
    allocate(0x20000, 3000, KIND_DEVICE, 0, 1);
    allocate(0x30000, 500, KIND_PINNED_HOST, 0, 1);
    allocate(0x40000, 7000, KIND_STREAM_ORDERED, 1, 2);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_current, 4000);
    CHECK_EQ(set(0, KIND_DEVICE)->blocks_current, 2);
    CHECK_EQ(set(0, COUNTER_DEVICE_MEMORY)->bytes_current, 4000); /* pinned is host memory */
    CHECK_EQ(set(1, COUNTER_DEVICE_MEMORY)->bytes_current, 7000);

    /* A free takes the block out; a failed free puts it back as if nothing happened. */
    struct block saved;
    CHECK(tracker_take(0x10000, SPACE_MEMORY, &saved) == 1);
    CHECK_EQ(saved.size, 1000);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_current, 3000);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_freed, 1000);
    tracker_put_back(&saved);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_current, 4000);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_freed, 0);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_allocated, 4000);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_peak, 4000);
    CHECK(tracker_take(0x10000, SPACE_MEMORY, &saved) == 1);
    CHECK(tracker_take(0x10000, SPACE_MEMORY, &saved) == 0); /* double free: not ours */
    CHECK_EQ(tracker.lost[LOST_UNKNOWN_FREE], 1);

    /* Same address again while recorded: the old record is replaced, counted. */
    allocate(0x20000, 3000, KIND_DEVICE, 0, 1);
    CHECK_EQ(tracker.lost[LOST_MISSED_FREE], 1);
    CHECK_EQ(set(0, KIND_DEVICE)->blocks_current, 1);

    /* Context 1 goes away: its device and pinned blocks are freed implicitly,
     * the stream-ordered block of context 2 stays. */
    run_context_gone(1);
    CHECK_EQ(set(0, KIND_DEVICE)->bytes_current, 0);
    CHECK_EQ(set(0, KIND_DEVICE)->implicit_bytes, 3000);
    CHECK_EQ(set(0, KIND_PINNED_HOST)->implicit_blocks, 1);
    CHECK_EQ(set(1, KIND_STREAM_ORDERED)->bytes_current, 7000);

    /* Unmapping a range drops each mapping in it, back to back or not. */
    allocate(0x100000, 0x1000, KIND_VMM_MAPPING, 0, 0);
    allocate(0x101000, 0x1000, KIND_VMM_MAPPING, 0, 0);
    allocate(0x104000, 0x1000, KIND_VMM_MAPPING, 0, 0);
    allocate(0x200000, 0x1000, KIND_VMM_MAPPING, 0, 0);
    run_range_freed(SPACE_VMM_MAPPING, 0x100000, 0x10000);
    CHECK_EQ(set(0, KIND_VMM_MAPPING)->blocks_current, 1);

    /* Failures are counted per kind and device; OOMs separately. */
    struct allocation failed = {0, 1 << 30, 0, 0, KIND_DEVICE, 0, 1, NULL};
    run_failure(&failed, 2, 1);
    run_failure(&failed, 1, 0);
    CHECK_EQ(set(0, KIND_DEVICE)->failures, 2);
    CHECK_EQ(set(0, KIND_DEVICE)->ooms, 1);
    CHECK_EQ(set(0, COUNTER_DEVICE_MEMORY)->ooms, 1);
    CHECK_EQ(tracker.failures_total, 2);

    /* Per-stack statistics follow the blocks. */
    uint64_t live = 0;
    for (uint32_t id = 1; id <= stack_count(); id++)
        live += stack_get(id)->live_bytes;
    CHECK_EQ(live, 7000 + 0x1000);

    run_mark("after");
    CHECK_EQ(tracker.marks_total, 1);
    CHECK_EQ(tracker.marks[0].device_bytes, 7000);
    CHECK(strcmp(tracker.marks[0].label, "after") == 0);
    return check_done("test_tracker");
}
