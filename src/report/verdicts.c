/* verdicts.c - what a report concludes: why an allocation failed, and how
 * much memory is held but not in use (report.h says how each verdict is
 * reached). */
#include <stdio.h>
#include <string.h>

#include "report.h"

const char *report_verdict(const struct report *r)
{
    const struct report_event *event = &r->event;
    if (event->type != EVENT_OOM || !event->has_memory_info)
        return "unknown";
    if (kind_in_cache(event->kind))
        return report_cache_oom(r, NULL);
    return event->free < event->size ? "exhausted" : "fragmented";
}

const struct report_cache *report_cache_on(const struct report *r, int kind, int device)
{
    for (int i = 0; i < r->cache_count; i++)
        if (r->caches[i].kind == kind && r->caches[i].device == device)
            return &r->caches[i];
    return NULL;
}

/* What PyTorch asks the driver for when no hole serves `size` bytes: a
 * 2 MiB segment up to 1 MiB, 20 MiB up to 10 MiB, else the request rounded
 * up to 2 MiB (its caching allocator's kSmallBuffer, kLargeBuffer,
 * kMinLargeAlloc, kRoundLarge). Other caches: the request. */
static uint64_t driver_request(int kind, uint64_t size)
{
    if (kind != KIND_TORCH_TENSOR)
        return size;
    if (size <= TORCH_SMALL_REQUEST)
        return TORCH_SMALL_SEGMENT;
    if (size < (10u << 20))
        return 20u << 20;
    return (size + TORCH_SMALL_SEGMENT - 1) / TORCH_SMALL_SEGMENT * TORCH_SMALL_SEGMENT;
}

/* In the framework's terms, the moment it gave up (report.h). */
const char *report_cache_oom(const struct report *r, struct report_cache_oom *why)
{
    const struct report_event *e = &r->event;
    static const struct report_cache none;
    const struct report_cache *c = report_cache_on(r, e->kind, e->device);
    if (!c)
        c = &none;
    uint64_t used = e->total > e->free ? e->total - e->free : 0;
    uint64_t others = used > c->reserved ? used - c->reserved : 0;
    const char *verdict;
    if (c->releasable + e->free >= driver_request(e->kind, e->size))
        verdict = "cache_idle";
    else if (c->unused + e->free >= e->size)
        verdict = "cache_fragmented";
    else if (others >= c->block_bytes)
        verdict = "others_hold";
    else
        verdict = "tensors_exhausted";
    if (why) {
        why->cache = c;
        why->others = others;
    }
    return verdict;
}

static const char *bytes_of(uint64_t bytes, char text[24])
{
    format_bytes(bytes, text, 24);
    return text;
}

const char *report_hole_why(const struct report *r, const struct report_cache *c, char *text,
                            size_t size)
{
    const struct report_event *e = &r->event;
    uint64_t need = (e->size + 511) / 512 * 512; /* as the allocators place it */
    char largest[24], asked[24], other[24];
    format_bytes(c->largest_hole, largest, sizeof(largest));
    format_bytes(e->size, asked, sizeof(asked));
    if (e->kind != KIND_TORCH_TENSOR || c->largest_hole < need) {
        uint64_t segment = driver_request(e->kind, e->size);
        char free_text[24], segment_text[24];
        int n = snprintf(text, size,
                         "the largest hole, %s, is smaller than the %s asked for: a "
                         "block takes one hole, never several",
                         largest, asked);
        if (segment > e->size && e->free < segment && n > 0 && (size_t)n < size)
            snprintf(text + n, size - (size_t)n,
                     "; and the driver's %s free is less than the "
                     "%s segment PyTorch asks it for",
                     bytes_of(e->free, free_text), bytes_of(segment, segment_text));
        return text;
    }
    int small = need <= TORCH_SMALL_REQUEST;
    uint64_t own = small ? c->largest_small_hole : c->largest_large_hole;
    format_bytes(own, other, sizeof(other));
    if (own >= need)
        snprintf(text, size,
                 "a %s hole in PyTorch's %s pool would fit: it belongs to another "
                 "stream or to a private memory pool (CUDA graphs, torch.cuda.MemPool), which "
                 "serve only their own",
                 other, small ? "small" : "large");
    else if (small)
        snprintf(text, size,
                 "the larger holes (up to %s) are in PyTorch's large pool; requests "
                 "of 1 MiB or less come only from its small pool's 2 MiB segments (largest hole "
                 "there %s)",
                 largest, other);
    else
        snprintf(text, size,
                 "the larger holes (up to %s) are in PyTorch's small pool, whose "
                 "2 MiB segments serve only requests of 1 MiB or less (the large pool's largest "
                 "hole: %s)",
                 largest, other);
    return text;
}

/* PyTorch's cache: as its tensors' records show it where they are recorded
 * (exact, and there at every report), else as memory_stats() last said. */
static void torch_fragmentation(const struct report *r, struct report_fragmentation *f)
{
    if (r->cache_views[0].view == CACHE_BLOCKS) {
        for (int i = 0; i < r->cache_count; i++) {
            const struct report_cache *c = &r->caches[i];
            if (c->kind != KIND_TORCH_TENSOR)
                continue;
            f->has_torch = 1;
            f->torch_reserved += c->reserved;
            f->torch_allocated += c->block_bytes;
            f->torch_inactive_split += c->hole_bytes;
            f->torch_holes += c->holes;
        }
        f->torch_cached =
            f->torch_reserved > f->torch_allocated ? f->torch_reserved - f->torch_allocated : 0;
        return;
    }
    for (int d = 0; r->torch.valid && d < r->torch.device_count; d++) {
        const uint64_t *t = r->torch.figures[d];
        if (t[TORCH_RESERVED] == TORCH_MISSING || t[TORCH_ALLOCATED] == TORCH_MISSING)
            continue;
        f->has_torch = 1;
        f->torch_reserved += t[TORCH_RESERVED];
        f->torch_allocated += t[TORCH_ALLOCATED];
        if (t[TORCH_INACTIVE_SPLIT] != TORCH_MISSING)
            f->torch_inactive_split += t[TORCH_INACTIVE_SPLIT];
        if (t[TORCH_INACTIVE_SPLIT_BLOCKS] != TORCH_MISSING)
            f->torch_holes += t[TORCH_INACTIVE_SPLIT_BLOCKS];
    }
    f->torch_cached =
        f->torch_reserved > f->torch_allocated ? f->torch_reserved - f->torch_allocated : 0;
}

void report_fragmentation(const struct report *r, struct report_fragmentation *f)
{
    memset(f, 0, sizeof(*f));
    for (int d = 0; d < r->device_count; d++) {
        const struct report_device *dev = &r->devices[d];
        if (dev->has_pool) {
            f->pool_reserved += dev->pool.reserved;
            f->pool_used += dev->pool.used;
        }
        f->vmm_reserved += report_counters(r, dev->slot, KIND_VMM_RESERVATION)->bytes_current;
        f->vmm_mapped += report_counters(r, dev->slot, KIND_VMM_MAPPING)->bytes_current;
    }
    for (int i = 0; i < r->pool_count; i++) {
        const struct pool_figures *figures = &r->pools[i].figures;
        if (figures->reserved == POOL_FIGURE_UNKNOWN)
            continue;
        f->pool_reserved += figures->reserved;
        f->pool_used += figures->used;
    }
    torch_fragmentation(r, f);
    f->pool_idle = f->pool_reserved > f->pool_used ? f->pool_reserved - f->pool_used : 0;
    f->vmm_unmapped = f->vmm_reserved > f->vmm_mapped ? f->vmm_reserved - f->vmm_mapped : 0;
    f->verdict = "fragmented";
    const char *oom = r->event.type == EVENT_OOM ? report_verdict(r) : "";
    if (strcmp(oom, "fragmented") == 0 || strcmp(oom, "cache_fragmented") == 0)
        f->reason = "an allocation failed with more memory free than it asked for";
    else if (f->torch_inactive_split >= (64u << 20) &&
             f->torch_inactive_split * 4 >= f->torch_reserved && f->torch_holes >= 8 &&
             f->torch_inactive_split / f->torch_holes <= (32u << 20))
        f->reason = "PyTorch's free memory lies in small holes between live tensors: it "
                    "serves only requests that fit, and empty_cache() cannot return it";
    else if (f->torch_cached >= (256u << 20) && f->torch_cached * 2 >= f->torch_reserved) {
        f->verdict = "idle_cache";
        f->reason = "PyTorch keeps freed memory cached (torch.cuda.empty_cache() returns it)";
    } else if (f->pool_idle >= (16u << 20) && f->pool_idle * 4 >= f->pool_reserved) {
        f->verdict = "idle_pool_reserve";
        f->reason = "stream-ordered pools keep memory they do not use (cudaMemPoolTrimTo "
                    "returns it)";
    } else {
        f->verdict = "none";
        f->reason = "";
    }
}
