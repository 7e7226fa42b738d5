/* stack_totals.c - a stack's totals, kept so threads sharing a call site
 * scale (see stack_totals.h).
 *
 * Every allocation from a stack adds to its live bytes and blocks, its
 * allocation count and bytes, and may raise its peak; every free takes
 * live bytes and blocks away. Done with atomic adds on the stack's record,
 * eight threads allocating from one line of code all wrote one cache line:
 * measured on the 16-core H100 host, that was the largest cost at 8 threads.
 *
 * So threads that own a stripe (stripes.h) each keep, for the last stacks they
 * allocated from (a small direct-mapped cache, one entry per id % WAYS),
 * the change they have not yet moved into the stack's record:
 * - it moves when the entry is wanted for another stack, when its live
 *   bytes or blocks pass a slack (1 MiB, 256 blocks, either way), and when
 *   a report, growth sample or crash dump takes every shard lock
 *   (stack_totals_flush, called by tracker_lock): so every figure a report
 *   shows is exact.
 * - a free by the same thread of a block of a stack in its cache changes
 *   the pending entry; any other free changes the record atomically.
 * - the peak: a thread checks "record's live bytes + its own pending live
 *   bytes" against the stack's peak. With one thread allocating from the
 *   stack that is the true figure, so the peak is exact; with several, it
 *   is exact to within one slack per other thread, above or below.
 * - the low point since the last growth sample (the history's low_bytes,
 *   growth.c says why): an entry keeps the lowest its pending live bytes
 *   went after a free, as a change from where the entry began (0: never
 *   below). Moving the entry lowers the stack's low point to "record's
 *   live bytes before the move + that change" when it is below 0; a free
 *   into the record lowers it to the record's live bytes after. Only a
 *   free can set a new low, and the bytes where an entry began are no lower
 *   than the low point already (it was set at a sample, and lowered at
 *   every free since), so an entry that never went below its start, an
 *   allocation and its free within it included, need not touch the
 *   history at all. While an entry holds a stack, only its thread moves
 *   that stack's record (implicit frees move the entry first), so with one
 *   thread the low point is exact. With several changing one stack it is
 *   off by what the others moved into the record between this thread's
 *   low and its move, and by their pending changes: within what they
 *   change between two samples, which move every change. PyTorch's
 *   tensors are all entered by one thread at a time (STRIPE_APPLY).
 *
 * The entries are changed only by their own thread, and only with one shard
 * lock held (the allocation and free paths), or, STRIPE_APPLY's, with the
 * tracker's apply lock held; the flush runs with every shard lock and the
 * apply lock held (tracker_lock). So nobody ever changes an entry while
 * another reads it. */
#include <string.h>

#include "stack_totals.h"
#include "stripes.h"

#define WAYS 8
/* STRIPE_APPLY's entries: that stripe counts every queued tensor, from the
 * hundreds of stacks of a model's step, where 8 entries would be moved out
 * at nearly every allocation. */
#define APPLY_WAYS 256

/* One cache line each, so that an event touches one line of its thread's
 * entries. */
struct pending_totals {
    _Alignas(64) uint32_t id; /* 0: empty */
    int64_t live_bytes;
    int64_t low; /* lowest live_bytes after a free; 0 if none below 0 */
    int64_t live_blocks;
    uint64_t allocations, allocated_bytes;
    struct stack_record *stack;
};
_Static_assert(sizeof(struct pending_totals) == 64, "a pending change is one cache line");

static struct pending_totals pending[STRIPE_COUNT][WAYS];
static struct pending_totals apply_entries[APPLY_WAYS];

static void add(uint64_t *field, int64_t amount)
{
    __atomic_fetch_add(field, (uint64_t)amount, __ATOMIC_RELAXED);
}

/* Lower stack `id`'s low point to `bytes` if that is lower, atomically.
 * Signed, as raise_peak's value: below zero counts as zero. */
static void lower_low(uint32_t id, int64_t bytes)
{
    uint64_t *low = &stack_history(id)->low_bytes;
    uint64_t value = bytes > 0 ? (uint64_t)bytes : 0;
    uint64_t seen = __atomic_load_n(low, __ATOMIC_RELAXED);
    while (value < seen &&
           !__atomic_compare_exchange_n(low, &seen, value, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Into the record at once (the path of threads without a cache, and of
 * frees the cache does not hold), or an entry's change: the record's live
 * bytes after. */
static uint64_t move_to_record(struct stack_record *t, int64_t bytes, int64_t blocks,
                               uint64_t allocations, uint64_t allocated_bytes)
{
    uint64_t live = __atomic_add_fetch(&t->live_bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
    if (blocks)
        add(&t->live_blocks, blocks);
    if (allocations) {
        add(&t->allocations, (int64_t)allocations);
        add(&t->allocated_bytes, (int64_t)allocated_bytes);
    }
    if (bytes > 0)
        raise_peak(&t->peak_live_bytes, (int64_t)live);
    return live;
}

static void flush_entry(struct pending_totals *p)
{
    if (p->id) {
        uint64_t live = move_to_record(p->stack, p->live_bytes, p->live_blocks, p->allocations,
                                       p->allocated_bytes);
        if (p->low < 0)
            lower_low(p->id, (int64_t)live - p->live_bytes + p->low);
    }
    memset(p, 0, sizeof(*p));
}

static struct pending_totals *entry_of(int thread, uint32_t id)
{
    if (!stripe_owned(thread))
        return NULL;
    if (thread == STRIPE_APPLY)
        return &apply_entries[id % APPLY_WAYS];
    return &pending[thread][id % WAYS];
}

void stack_totals_alloc(int thread, struct stack_record *s, uint32_t id, uint64_t size)
{
    struct pending_totals *p = entry_of(thread, id);
    if (!p) {
        move_to_record(s, (int64_t)size, 1, 1, size);
        return;
    }
    if (p->id != id) {
        flush_entry(p);
        p->id = id;
        p->stack = s;
    }
    p->live_bytes += (int64_t)size;
    p->live_blocks++;
    p->allocations++;
    p->allocated_bytes += size;
    if (past_slack(p->live_bytes, p->live_blocks)) {
        flush_entry(p);
        return;
    }
    raise_peak(&s->peak_live_bytes,
               (int64_t)__atomic_load_n(&s->live_bytes, __ATOMIC_RELAXED) + p->live_bytes);
}

/* A free into the record at once; an implicit one is counted in the
 * history, after the thread's change of the stack moves, so that the low
 * point is measured from the record as it is. Apart from stack_totals_free,
 * whose cached path then saves no registers for it. */
__attribute__((noinline)) static void free_to_record(struct pending_totals *p,
                                                     struct stack_record *s, uint32_t id,
                                                     uint64_t size, int implicit)
{
    if (implicit) {
        struct stack_history *h = stack_history(id);
        add(&h->implicit_bytes, (int64_t)size);
        add(&h->implicit_blocks, 1);
        if (p && p->id == id)
            flush_entry(p);
    }
    lower_low(id, (int64_t)move_to_record(s, -(int64_t)size, -1, 0, 0));
}

void stack_totals_free(int thread, struct stack_record *s, uint32_t id, uint64_t size, int implicit)
{
    struct pending_totals *p = entry_of(thread, id);
    if (!p || p->id != id || implicit) {
        free_to_record(p, s, id, size, implicit);
        return;
    }
    p->live_bytes -= (int64_t)size;
    p->live_blocks--;
    if (p->live_bytes < p->low)
        p->low = p->live_bytes;
    if (past_slack(p->live_bytes, p->live_blocks))
        flush_entry(p);
}

void stack_totals_restore(struct stack_record *s, uint64_t size)
{
    add(&s->live_bytes, (int64_t)size);
    add(&s->live_blocks, 1);
}

void stack_totals_flush(void)
{
    for (int thread = 1; thread < STRIPE_COUNT; thread++)
        for (int way = 0; way < WAYS; way++)
            if (pending[thread][way].id)
                flush_entry(&pending[thread][way]);
    for (int way = 0; way < APPLY_WAYS; way++)
        if (apply_entries[way].id)
            flush_entry(&apply_entries[way]);
}

void stack_totals_reset(void)
{
    memset(pending, 0, sizeof(pending));
    memset(apply_entries, 0, sizeof(apply_entries));
}
