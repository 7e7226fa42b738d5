/* stripes.h - per-thread stripes of the figures every event changes.
 *
 * The counters (counters.c), a stack's totals (stack_totals.c) and the calls
 * per entry point (tracker.c) change at every allocation; kept in one place,
 * threads allocating at once would all write the same cache lines. So each
 * of threads 1 .. STRIPE_COUNT - 2 (the tracker's thread numbers, never
 * reused) owns a stripe of them that only it writes, with plain stores, and
 * the stripes are put together when read; the last stripe is the writer of
 * the queued framework events' (STRIPE_APPLY). Number 0 (a thread before its
 * first recorded event) and numbers past the stripes own none: they change
 * the shared figures atomically.
 *
 * Where a figure also has a peak, a thread moves its pending change of live
 * bytes and blocks into the shared figure once it passes a slack (1 MiB or
 * 256 blocks, either way), and raises the shared peak itself. */
#ifndef CUMEMTRACE_STRIPES_H
#define CUMEMTRACE_STRIPES_H

#include <stdint.h>

#define STRIPE_COUNT 64

/* The last stripe is no thread's: whoever enters the framework events that
 * were queued for later (tracker.c, one thread at a time) counts in it. */
#define STRIPE_APPLY (STRIPE_COUNT - 1)

static inline int stripe_owned(int thread)
{
    return thread > 0 && thread < STRIPE_COUNT;
}

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
