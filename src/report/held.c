/* held.c - what the program held when it ended (see report.h).
 *
 * When a Python program ends, its interpreter tears down module globals and
 * frees some of what they held (a list of kept tensors), and not the rest
 * (model weights a framework keeps referenced; whatever sits in a reference
 * cycle): the process's exit returns that. Either way it was held to the end
 * by something, not lost: a leak in a running program shows as growth. So
 * the tracker kept, at the program's end, every stack's live totals: that is
 * what each stack held at the end; what is still live of it (blocks marked
 * held_at_end) was not freed by the teardown. A framework's cache segments
 * are the cache's (report_caches), not held by any line. */
#include <stdlib.h>

#include "report.h"

static int by_bytes(const void *a, const void *b)
{
    const struct report_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

int report_held_at_end(struct report *r)
{
    r->held_count = 0;
    uint32_t n = r->end.ended && r->end.stacks ? r->end.stack_count : 0;
    if (n == 0)
        return 0;
    uint64_t *still_bytes = report_alloc(r, n * sizeof(uint64_t));
    r->held = report_alloc(r, n * sizeof(struct report_group));
    if (!still_bytes || !r->held)
        return -1;
    for (size_t i = 0; i < r->block_count; i++) {
        const struct report_block *b = &r->blocks[i];
        if (b->held_at_end && b->stack_id >= 1 && b->stack_id <= n)
            still_bytes[b->stack_id - 1] += b->size;
    }
    for (uint32_t id = 1; id <= n; id++) {
        const struct report_end_stack *e = &r->end.stacks[id - 1];
        if (e->bytes == 0 || report_cache_segment(r, id))
            continue;
        struct report_group *g = &r->held[r->held_count++];
        g->stack_id = id;
        g->kind = e->kind;
        g->api = e->api;
        g->device = e->device;
        g->held_at_end = 1;
        g->bytes = e->bytes;
        g->blocks = e->blocks;
        g->freed_at_teardown = e->bytes > still_bytes[id - 1] ? e->bytes - still_bytes[id - 1] : 0;
    }
    qsort(r->held, r->held_count, sizeof(*r->held), by_bytes);
    return 0;
}
