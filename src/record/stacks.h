/* stacks.h - capture call stacks and keep each distinct one once.
 *
 * Capture happens on the allocating thread, before any lock is taken, by
 * frame rules read once from the objects' call frame information and
 * checked against libgcc's unwinder (unwind.h), or with libgcc's walk
 * alone where a frame has no such rule. The
 * result is a list of return addresses; nothing is symbolized until a
 * report is written.
 *
 * Distinct stacks live in an append-only table, found by a 64-bit hash of
 * their frames (like heaptrack's trace tree, stacks are written to reports as
 * ids). Each stack also carries the running totals of the blocks it allocated,
 * so reports and growth detection never have to walk every live block.
 * Those an allocation reads sit in the stack's record (struct stack_record,
 * one cache line); its growth and teardown figures in a history beside it.
 *
 * No lock is needed to call any of these: stack_intern() finds a known stack
 * without one and takes the table's own lock only to add a new one; records
 * and frames never move once published. The totals are changed
 * by stack_totals.c, under the lock of the block's registry shard, so with
 * every shard locked (tracker_lock) they are still, and exact. */
#ifndef CUMEMTRACE_STACKS_H
#define CUMEMTRACE_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "kinds.h"

struct stack_stats {
    uint64_t live_bytes, live_blocks;
    uint64_t peak_live_bytes; /* highest live_bytes this stack reached */
    uint64_t allocations, allocated_bytes;
    uint64_t implicit_bytes, implicit_blocks; /* freed by context teardown */
};

/* How a stack's live bytes moved across growth observations (growth.h): a
 * summary of one of its two series (floors or moments), read as what the
 * site kept from each observation on (its retained bytes: the least it held
 * then or at any later observation). first_* is where the retained series
 * stood before its first rise (or at its first observation, if it never
 * rose), last_* at the last observation. rises count the observations where
 * it rose; quarters has bit q set when one fell in quarter q of the
 * observations from first_sample to the last. falls count the observations
 * where the series itself (not the retained one) fell. The peak_* fields
 * are the series' own highest value (the first observation that reached it)
 * and the same figures read on the series up to there, from peak_base: of
 * the floors, the most it kept, not the most it held for a moment (that is
 * struct stack_stats' peak_live_bytes). calls and peak_calls count the
 * allocations the stack made from first_sample to the last observation and
 * to peak_sample: what its rate per call divides by (growth.h); 0 at marks,
 * where the rate is per mark. */
struct stack_growth {
    uint64_t first_bytes, last_bytes;
    uint64_t peak_bytes;
    uint64_t calls, peak_calls;
    uint32_t first_ms, last_ms, peak_ms;
    uint32_t first_sample; /* observation numbers, from 1 */
    uint32_t peak_sample, peak_base;
    uint32_t rises, falls;
    uint32_t peak_rises, peak_falls;  /* up to peak_sample */
    uint32_t quarters, peak_quarters; /* bits 0-3 */
    uint32_t falls_to_end;            /* 1: fell at every observation from the peak to
                                        * where it ends, reached at one of the last two */
};

/* A stack as reports read it (report.h): where its frames are, its flags,
 * its growth and its totals, put together by stack_view (all but the growth,
 * which growth_of summarizes). The table keeps
 * these in two places (below), so this is a copy, never a record. */
struct stack {
    uint64_t hash;
    uint64_t first_frame; /* index into the frame array */
    uint32_t depth;
    uint32_t flags; /* STACK_* bits and the first use, only ever added */
    struct stack_growth growth;
    struct stack_stats stats;
};

/* The table's record of a stack: what a lookup reads (hash, depth, where
 * its frames are), what an allocation reads (flags, live bytes and peak)
 * and the totals that stack_totals.c moves into it: one cache line, so a
 * record touches one line of its stack. The totals are written when a
 * thread's pending change moves in (every 256 blocks or 1 MiB, stripes.h)
 * or the peak rises; reading the frames stays on the lookup's own lines. */
struct stack_record {
    _Alignas(64) uint64_t hash;
    uint64_t first_frame; /* index into the frame array */
    uint32_t depth;
    uint32_t flags; /* STACK_* bits and the first use, only ever added */
    uint64_t live_bytes, live_blocks;
    uint64_t peak_live_bytes; /* highest live_bytes this stack reached */
    uint64_t allocations, allocated_bytes;
};
_Static_assert(sizeof(struct stack_record) == 64, "a stack's record is one cache line");

/* What no allocation reads: the blocks freed by context teardown, the low
 * point since the last growth observation (lowered by a free that moves the
 * stack's live bytes below it: stack_totals.c, which says when that is exact;
 * set to the live bytes by every observation), and the stack's observations
 * (growth.c's, NULL until it first held memory at one). Apart, by id. */
struct stack_history {
    uint64_t implicit_bytes, implicit_blocks; /* freed by context teardown */
    uint64_t low_bytes;                       /* lowest live_bytes since the last observation */
    uint64_t *series;                         /* growth.c: floors, then moments */
};

/* A stack that took a framework's cache segments from the driver: memory
 * the framework hands out again as blocks of their own (one bit per
 * framework, the kinds' order: KIND_TORCH_TENSOR first). Such a stack is
 * charged with a whole segment for whichever request first needed one, so
 * where the blocks are known, verdicts rank the blocks' stacks instead. */
#define STACK_CACHE_SEGMENT(cache_kind) (1u << ((cache_kind)-KIND_TORCH_TENSOR))
#define STACK_CACHE_ANY 0x7u

/* The rest of `flags` holds what the stack's first allocation was
 * (stack_note_use): bits 8-15 its entry point, 16-23 its kind, and bit 31
 * says they are set. Bits 3-7 and 24-30 are free. */
#define STACK_USE_API_SHIFT 8
#define STACK_USE_KIND_SHIFT 16
#define STACK_USE_SET (1u << 31)

/* Add `flags` to stack `id` (any thread, no lock: stacks never move). */
void stack_flag(uint32_t id, uint32_t flags);

/* Load libgcc_s's unwinder, finding its functions with `lookup` (dlsym);
 * without one, or without libgcc_s, stacks are empty. */
void stack_init(void *(*lookup)(void *handle, const char *name));
/* 1 when this thread runs a signal handler now (a signal frame below us,
 * or the alternate signal stack in use), 0 when not, -1 when it cannot be
 * told (no libgcc_s). For exit() called from a handler: the code it
 * interrupted may hold malloc's lock. Walks with libgcc, which takes no
 * lock of the allocator; the loader's, it takes only as this thread may. */
int stack_in_signal_handler(void);
void stack_reset(void); /* forget every stack (after fork) */

/* Leave out frames in [low, high) wherever they are: the tracer's own. */
void stack_set_skip_range(uintptr_t low, uintptr_t high);

/* Around fork (tracker_fork_*): prepare waits, 2 s at most, until no other
 * thread is inside stack_capture, and holds new captures back until parent
 * or child is called. */
void stacks_fork_prepare(void);
void stacks_fork_parent(void);
void stacks_fork_child(void);

/* Fill frames[0..max) with return addresses of the caller's stack, innermost
 * first; returns how many. */
int stack_capture(uintptr_t *frames, int max);
uint64_t stack_hash(const uintptr_t *frames, int depth);

/* One step of the stacks' hashes: `word` into `h`. */
static inline uint64_t stack_mix(uint64_t h, uint64_t word)
{
    h ^= word;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 31);
}

/* The id (1, 2, ...) of this stack, adding it if new; 0 when out of memory.
 * Keeps errno. */
uint32_t stack_intern(const uintptr_t *frames, int depth, uint64_t hash);

/* A framework's blocks (tensors) and the driver's (a cache's segments among
 * them) never share a stack, even with the same frames: without native
 * frames (none recorded, or no unwinder), the segment a tensor's line made
 * the cache take has that line's Python frames alone, and a segment's
 * stack is left out of the verdicts, which would have taken the tensors'
 * with it. So the driver's are interned under another hash: `space` 0 for
 * a framework's blocks, STACK_DRIVER for the driver's. */
#define STACK_DRIVER 1
static inline uint64_t stack_hash_in(const uintptr_t *frames, int depth, int space)
{
    return stack_hash(frames, depth) ^ (space ? 0x5d1f7e3a9c0b4e21ULL : 0);
}
/* stack_intern's, in `space`, its hash made here when needed: a stack this
 * thread interned lately is found in a memo of its own, with no hash. */
uint32_t stack_intern_here(const uintptr_t *frames, int depth, int space);

/* A stack this thread interned lately, found by `key`, words[0..words) that
 * stand for its frames, and their `hash` (the caller's, which may cover more
 * than the words): its id, or 0 if no stack was remembered by that key and
 * hash lately. stack_remember_by_key says which stack they stand for, for
 * keys of up to STACK_KEY_WORDS words. */
#define STACK_KEY_WORDS 96
uint32_t stack_known_by_key(const uintptr_t *key, int words, uint64_t hash);
void stack_remember_by_key(const uintptr_t *key, int words, uint64_t hash, uint32_t id);
/* Stack `id`'s record and history; NULL for 0 or an unknown id. */
struct stack_record *stack_get(uint32_t id);
struct stack_history *stack_history(uint32_t id);
/* Stack `id` (known) as reports read it, into *view, its growth zero. */
void stack_view(uint32_t id, struct stack *view);
const uintptr_t *stack_frames(const struct stack_record *stack);
/* What the stack's first allocation was: its kind and entry point, kept for
 * reports (a call site nearly always allocates one kind through one entry
 * point). Written once, by whichever allocation comes first; then read only,
 * so the line lookups read is not written again. On the record or on a
 * report's copy (a report read back). */
void stack_record_note_use(struct stack_record *stack, int kind, int api);
/* Inline: a report's copy is read and written by the command too, which
 * links none of the table's code. */
static inline void stack_flags_note_use(uint32_t *flags, int kind, int api)
{
    uint32_t old = __atomic_load_n(flags, __ATOMIC_RELAXED);
    uint32_t use = STACK_USE_SET | (uint32_t)(kind & 0xff) << STACK_USE_KIND_SHIFT |
                   (uint32_t)(api & 0xff) << STACK_USE_API_SHIFT;
    /* a compare-and-swap, so that bits stack_flag adds meanwhile stay */
    while (
        !(old & STACK_USE_SET) &&
        !__atomic_compare_exchange_n(flags, &old, old | use, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static inline void stack_note_use(struct stack *stack, int kind, int api)
{
    stack_flags_note_use(&stack->flags, kind, api);
}

/* 1 and the kind and entry point, or 0 when the stack never allocated. */
static inline int stack_first_use(const struct stack *stack, int *kind, int *api)
{
    uint32_t flags = __atomic_load_n(&stack->flags, __ATOMIC_RELAXED);
    *kind = (int)(flags >> STACK_USE_KIND_SHIFT & 0xff);
    *api = (int)(flags >> STACK_USE_API_SHIFT & 0xff);
    return (flags & STACK_USE_SET) != 0;
}
uint32_t stack_count(void); /* ids run from 1 to stack_count() */
size_t stack_table_bytes(void);

#endif
