/* caches.c - each framework's cache, per device, as the recorded blocks and
 * segments show it (report.h, struct report_cache).
 *
 * A cache's segments are the driver allocations whose stacks are marked
 * STACK_CACHE_SEGMENT for it: marked when the framework said so (PyTorch's
 * segment events), and here, for any driver allocation that holds one of
 * its blocks (CuPy's chunks and JAX's pool say nothing). Walking segments
 * and blocks in address order then gives what the cache holds and how:
 * bytes in live blocks, and the rest, unused, either in holes between live
 * blocks (only a request that fits a hole can use it, and empty_cache()
 * cannot return it) or in segments with no live block at all (which
 * empty_cache() returns). Blocks are counted at their requested size, rounded
 * up to the allocator's 512-byte unit, as PyTorch and CuPy place them. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define CACHE_UNIT 512

struct range {
    uint64_t start, end;
    uint32_t stack_id;
    int8_t device;
    uint8_t kind;    /* a block's; for a segment, its cache's */
    uint8_t mapping; /* a segment that is a VMM mapping */
};

static int by_start(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int has_address(int kind)
{
    return kind_space(kind) == SPACE_MEMORY || kind == KIND_VMM_MAPPING;
}

/* The driver allocation holding `address`, among `n` sorted ones; NULL if none. */
static const struct range *holder(const struct range *driver, size_t n, uint64_t address)
{
    size_t below =
        report_ranges_below(driver, n, sizeof(*driver), offsetof(struct range, start), address);
    return below > 0 && address < driver[below - 1].end ? &driver[below - 1] : NULL;
}

static struct report_cache *cache_of(struct report *r, int kind, int device)
{
    for (int i = 0; i < r->cache_count; i++)
        if (r->caches[i].kind == kind && r->caches[i].device == device)
            return &r->caches[i];
    if (r->cache_count == REPORT_MAX_CACHES)
        return NULL;
    struct report_cache *c = &r->caches[r->cache_count++];
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->device = device;
    return c;
}

/* Mark as segments of `kind`'s cache the driver allocations its blocks lie
 * in. */
static void mark_holders(struct report *r, struct range *driver, size_t n)
{
    for (size_t i = 0; i < r->block_count; i++) {
        const struct report_block *b = &r->blocks[i];
        if (!kind_in_cache(b->kind))
            continue;
        const struct range *h = holder(driver, n, b->value);
        if (!h || !h->stack_id)
            continue;
        struct stack *s = &r->stacks[h->stack_id - 1];
        uint32_t flag = STACK_CACHE_SEGMENT(b->kind);
        if (!(s->flags & flag) && s->depth > 0)
            s->flags |= flag;
    }
}

/* Segments of one cache, VMM mappings merged where back to back (PyTorch's
 * expandable segments map a range page by page, and a block may span pages),
 * then the blocks inside them in address order. */
static void measure(struct report *r, const struct range *segments, size_t n_segments,
                    const struct range *blocks, size_t n_blocks)
{
    size_t b = 0;
    for (size_t i = 0; i < n_segments;) {
        struct report_cache *c = cache_of(r, segments[i].kind, segments[i].device);
        struct range seg = segments[i++];
        uint64_t pieces = 1;
        while (i < n_segments && seg.mapping && segments[i].mapping &&
               segments[i].start == seg.end && segments[i].kind == seg.kind &&
               segments[i].device == seg.device) {
            seg.end = segments[i++].end;
            pieces++;
        }
        if (!c)
            continue;
        uint64_t *pool_hole = !seg.mapping && seg.end - seg.start == TORCH_SMALL_SEGMENT
                                  ? &c->largest_small_hole
                                  : &c->largest_large_hole;
        c->reserved += seg.end - seg.start;
        c->segments += pieces;
        while (b < n_blocks && blocks[b].start < seg.start)
            b++;
        uint64_t at = seg.start, live = 0;
        for (; b < n_blocks && blocks[b].start < seg.end; b++) {
            if (blocks[b].kind != seg.kind)
                continue;
            if (blocks[b].start > at) {
                uint64_t hole = blocks[b].start - at;
                c->hole_bytes += hole;
                c->holes++;
                if (hole > c->largest_hole)
                    c->largest_hole = hole;
                if (hole > *pool_hole)
                    *pool_hole = hole;
            }
            if (blocks[b].end > at)
                at = blocks[b].end;
            live++;
        }
        if (!live) {
            c->releasable += seg.end - seg.start;
        } else if (at < seg.end) {
            uint64_t hole = seg.end - at;
            c->hole_bytes += hole;
            c->holes++;
            if (hole > c->largest_hole)
                c->largest_hole = hole;
            if (hole > *pool_hole)
                *pool_hole = hole;
        }
    }
}

int report_caches(struct report *r)
{
    size_t n_driver = 0, n_blocks = 0;
    for (size_t i = 0; i < r->block_count; i++) {
        if (kind_in_cache(r->blocks[i].kind))
            n_blocks++;
        else if (has_address(r->blocks[i].kind))
            n_driver++;
    }
    r->cache_count = 0;
    r->caches = report_alloc(r, REPORT_MAX_CACHES * sizeof(struct report_cache));
    struct range *driver = report_alloc(r, (n_driver + 1) * sizeof(struct range));
    struct range *blocks = report_alloc(r, (n_blocks + 1) * sizeof(struct range));
    if (!r->caches || !driver || !blocks)
        return -1;
    size_t d = 0, k = 0;
    for (size_t i = 0; i < r->block_count; i++) {
        const struct report_block *b = &r->blocks[i];
        if (kind_in_cache(b->kind)) {
            uint64_t rounded = (b->size + CACHE_UNIT - 1) / CACHE_UNIT * CACHE_UNIT;
            blocks[k++] = (struct range){b->value,    b->value + (rounded ? rounded : CACHE_UNIT),
                                         b->stack_id, b->device,
                                         b->kind,     0};
            struct report_cache *c = cache_of(r, b->kind, b->device);
            if (c) {
                c->block_bytes += b->size;
                c->blocks++;
            }
        } else if (has_address(b->kind)) {
            driver[d++] =
                (struct range){b->value, b->value + b->size,         b->stack_id, b->device,
                               b->kind,  b->kind == KIND_VMM_MAPPING};
        }
    }
    qsort(driver, d, sizeof(*driver), by_start);
    qsort(blocks, k, sizeof(*blocks), by_start);
    mark_holders(r, driver, d);

    /* The segments of each cache: its kind where the stack says one. */
    size_t s = 0;
    for (size_t i = 0; i < d; i++) {
        uint32_t flags = driver[i].stack_id ? r->stacks[driver[i].stack_id - 1].flags : 0;
        for (int kind = KIND_TORCH_TENSOR; kind < KIND_TORCH_TENSOR + CACHE_KINDS; kind++)
            if (flags & STACK_CACHE_SEGMENT(kind)) {
                driver[s] = driver[i];
                driver[s++].kind = (uint8_t)kind;
                break;
            }
    }
    measure(r, driver, s, blocks, k);
    for (int i = 0; i < r->cache_count; i++) {
        struct report_cache *c = &r->caches[i];
        c->unused = c->reserved > c->block_bytes ? c->reserved - c->block_bytes : 0;
    }
    return 0;
}

int report_caches_at_end(const struct report *r)
{
    return r->end.ended && strcmp(r->reason, "exit") == 0;
}
