/* stack_totals.h - a stack's totals (in struct stack_record), changed by every
 * allocation and free from that stack, with per-thread pending changes so
 * that threads allocating from one call site do not all write one cache
 * line. See stack_totals.c. */
#ifndef CUMEMTRACE_STACK_TOTALS_H
#define CUMEMTRACE_STACK_TOTALS_H

#include <stdint.h>

#include "stacks.h"

/* `thread`: the calling thread's number (tracker.c); the caller holds the
 * lock of the block's registry shard. */
void stack_totals_alloc(int thread, struct stack_record *s, uint32_t id, uint64_t size);
void stack_totals_free(int thread, struct stack_record *s, uint32_t id, uint64_t size,
                       int implicit);
/* A failed free: live again. The low point its free may have set stays:
 * such a free is rare, and at worst one growth sample reads the stack that
 * much lower. */
void stack_totals_restore(struct stack_record *s, uint64_t size);

/* Every thread's pending changes into the stacks: with every registry shard
 * locked (tracker_lock), after which the stacks' totals are exact. */
void stack_totals_flush(void);
void stack_totals_reset(void); /* forget the pending changes (after fork) */

#endif
