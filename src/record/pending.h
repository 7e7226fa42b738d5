/* pending.h - what the per-thread pending amounts of counters.c and
 * stack_totals.c share: the slack past which a thread moves its pending
 * change of live bytes and blocks into the shared figure (1 MiB or 256
 * blocks, either way), and the raise of a shared peak. */
#ifndef CUMEMTRACE_PENDING_H
#define CUMEMTRACE_PENDING_H

#include <stdint.h>

#define PENDING_SLACK_BYTES ((int64_t)1 << 20)
#define PENDING_SLACK_BLOCKS 256

static inline int past_slack(int64_t bytes, int64_t blocks)
{
    return bytes >= PENDING_SLACK_BYTES || bytes <= -PENDING_SLACK_BYTES ||
           blocks >= PENDING_SLACK_BLOCKS || blocks <= -PENDING_SLACK_BLOCKS;
}

/* Raise *peak to `value` if it is higher, atomically. `value` is signed: a
 * shared figure alone may be below zero for a while, when one thread's
 * frees have moved in and another's allocations are still pending. */
static inline void raise_peak(uint64_t *peak, int64_t value)
{
    if (value <= 0)
        return;
    uint64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while ((uint64_t)value > seen &&
           !__atomic_compare_exchange_n(peak, &seen, (uint64_t)value, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

#endif
