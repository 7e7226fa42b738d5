/* report.c - the report model: a report's memory, the finishing of a
 * report whose state is filled in (groups of live blocks, the stacks worth
 * showing, the growing ones, their frames symbolized), and what the writers
 * read from it. A report is filled in by collect.c (this process, now), by
 * the command's loaders (a JSON report, a crash dump), and then finished
 * and read the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "config.h"
#include "origins.h"
#include "output.h"
#include "report.h"

/* A report's arrays are many (some twenty) and most are small. Where the
 * report has a heap (the command's loader), they come from it; else those
 * of at most CARVE_MOST bytes are carved, 16-aligned, from a shared mapping
 * of CARVE_BYTES, fresh and so zeroed, and a larger one has a mapping of
 * its own: a mapping each cost a system call pair and its page faults. */
#define CARVE_BYTES (64 * 1024)
#define CARVE_MOST (CARVE_BYTES / 4)

static void *report_map(struct report *r, size_t bytes)
{
    if (r->page_count == (int)(sizeof(r->pages) / sizeof(r->pages[0])))
        return NULL;
    void *p = pages_alloc(bytes);
    if (p) {
        r->pages[r->page_count] = p;
        r->page_sizes[r->page_count++] = bytes;
    }
    return p;
}

void *report_alloc(struct report *r, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (r->heap) {
        void *p = r->heap(r->heap_owner, bytes);
        return p ? memset(p, 0, bytes) : NULL;
    }
    if (bytes > CARVE_MOST)
        return report_map(r, bytes);
    bytes = (bytes + 15) & ~(size_t)15;
    if (r->carve_left < bytes) {
        char *fresh = report_map(r, CARVE_BYTES);
        if (!fresh)
            return NULL;
        r->carve_at = fresh;
        r->carve_left = CARVE_BYTES;
    }
    void *p = r->carve_at;
    r->carve_at += bytes;
    r->carve_left -= bytes;
    return p;
}

static int by_group_key(const void *a, const void *b)
{
    const struct report_block *x = a, *y = b;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->api != y->api)
        return x->api < y->api ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->held_at_end != y->held_at_end)
        return x->held_at_end < y->held_at_end ? -1 : 1;
    return 0;
}

static int by_size_descending(const void *a, const void *b)
{
    const struct report_block *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->sequence < y->sequence ? -1 : x->sequence > y->sequence;
}

static int by_group_bytes(const void *a, const void *b)
{
    const struct report_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* Stack ids, compared through the report whose stacks they name (qsort_r:
 * two reports may be finished at once, an OOM report and a snapshot). */
static const struct stack *stack_of_id(const void *id, const struct report *r)
{
    return &r->stacks[*(const uint32_t *)id - 1];
}

static int by_id(const void *a, const void *b)
{
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_stack_live(const void *a, const void *b, void *report)
{
    const struct stack *x = stack_of_id(a, report), *y = stack_of_id(b, report);
    uint64_t kx = x->stats.live_bytes + x->stats.implicit_bytes;
    uint64_t ky = y->stats.live_bytes + y->stats.implicit_bytes;
    if (kx != ky)
        return kx > ky ? -1 : 1;
    if (x->stats.peak_live_bytes != y->stats.peak_live_bytes)
        return x->stats.peak_live_bytes > y->stats.peak_live_bytes ? -1 : 1;
    return by_id(a, b);
}

static int by_stack_peak(const void *a, const void *b, void *report)
{
    const struct stack *x = stack_of_id(a, report), *y = stack_of_id(b, report);
    if (x->stats.peak_live_bytes != y->stats.peak_live_bytes)
        return x->stats.peak_live_bytes > y->stats.peak_live_bytes ? -1 : 1;
    return by_id(a, b);
}

void report_order_by_peak(const struct report *r, uint32_t *ids, uint32_t count)
{
    qsort_r(ids, count, sizeof(uint32_t), by_stack_peak, (void *)r);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The registry's walk gives blocks shard by shard, in no useful order; the
 * merge sorts below run about twice as fast on blocks already in allocation
 * order (as a single table gave them). A radix sort by sequence, 8 bits a
 * pass (256 write streams stay in cache; three passes up to 16M
 * allocations), puts them back in that order. Without memory for it they
 * stay as they came: only slower. */
static void order_by_sequence(struct report *r)
{
    size_t n = r->block_count, bytes = n * sizeof(struct report_block);
    uint64_t highest = 0;
    for (size_t i = 0; i < n; i++)
        if (r->blocks[i].sequence > highest)
            highest = r->blocks[i].sequence;
    struct report_block *spare = n > 1 ? pages_alloc(bytes) : NULL;
    size_t starts[256];
    if (!spare)
        return;
    struct report_block *from = r->blocks, *to = spare;
    for (int shift = 0; shift < 64 && (highest >> shift) != 0; shift += 8) {
        memset(starts, 0, sizeof(starts));
        for (size_t i = 0; i < n; i++)
            starts[(from[i].sequence >> shift) & 0xff]++;
        size_t at = 0;
        for (int digit = 0; digit < 256; digit++) {
            size_t count = starts[digit];
            starts[digit] = at;
            at += count;
        }
        for (size_t i = 0; i < n; i++)
            to[starts[(from[i].sequence >> shift) & 0xff]++] = from[i];
        struct report_block *swap = from;
        from = to;
        to = swap;
    }
    if (from != r->blocks)
        memcpy(r->blocks, from, bytes);
    pages_free(spare, bytes);
}

static int make_groups(struct report *r)
{
    order_by_sequence(r);
    qsort(r->blocks, r->block_count, sizeof(*r->blocks), by_group_key);
    r->groups = report_alloc(r, (r->block_count + 1) * sizeof(*r->groups));
    if (!r->groups)
        return -1;
    struct report_group *g = NULL;
    for (size_t i = 0; i < r->block_count; i++) {
        const struct report_block *b = &r->blocks[i];
        if (!g || by_group_key(b, &r->blocks[i - 1]) != 0) {
            g = &r->groups[r->group_count++];
            g->stack_id = b->stack_id;
            g->kind = b->kind;
            g->api = b->api;
            g->device = b->device;
            g->held_at_end = b->held_at_end;
            g->oldest_ms = b->time_ms;
        }
        g->bytes += b->size;
        g->blocks++;
        if (b->size > g->largest)
            g->largest = b->size;
        if (b->time_ms < g->oldest_ms)
            g->oldest_ms = b->time_ms;
    }
    qsort(r->groups, r->group_count, sizeof(*r->groups), by_group_bytes);
    qsort(r->blocks, r->block_count, sizeof(*r->blocks), by_size_descending);
    return 0;
}

/* Stacks worth writing out: those holding memory now, those freed only by a
 * context teardown, those behind failures, and the top ones by peak. */
static int choose_stacks(struct report *r)
{
    r->shown = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    r->by_peak = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    uint8_t *wanted = report_alloc(r, r->stack_count + 1);
    if (!r->shown || !r->by_peak || !wanted)
        return -1;
    for (uint32_t id = 1; id <= r->stack_count; id++) {
        const struct stack_stats *s = &r->stacks[id - 1].stats;
        if (s->live_blocks || s->implicit_blocks)
            wanted[id] = 1;
    }
    uint64_t total = r->failures.total;
    for (uint64_t n = RING_FIRST(r->failures.ring, total); n <= total; n++) {
        const struct report_failure *f = RING_ENTRY(r->failures.ring, n);
        if (f->stack_id <= r->stack_count)
            wanted[f->stack_id] = 1;
    }
    if (r->last_oom.stack_id <= r->stack_count)
        wanted[r->last_oom.stack_id] = 1;
    for (size_t i = 0; i < r->held_count; i++)
        if (r->held[i].stack_id <= r->stack_count)
            wanted[r->held[i].stack_id] = 1;
    for (int i = 0; i < r->classes.site_count; i++)
        if (r->classes.sites[i].stack_id <= r->stack_count)
            wanted[r->classes.sites[i].stack_id] = 1;
    /* The growth verdicts', which may hold nothing now. */
    for (uint32_t i = 0; i < r->growing_count; i++)
        wanted[r->growing[i]] = 1;
    for (uint32_t i = 0; i < r->released_count; i++)
        wanted[r->released[i]] = 1;
    /* The timeline's stacks, so that memory at any moment can be drawn by stack. */
    for (size_t i = 0; i < r->timeline_count; i++)
        if (r->timeline[i].stack_id <= r->stack_count)
            wanted[r->timeline[i].stack_id] = 1;
    wanted[0] = 0;
    /* The top ones by peak: a simple selection, options.top is small. A
     * cache's segments are not a line's doing where its blocks are known. */
    for (int round = 0; round < r->options.top; round++) {
        uint32_t best = 0;
        for (uint32_t id = 1; id <= r->stack_count; id++)
            if (wanted[id] != 2 && !report_cache_segment(r, id) &&
                (!best || r->stacks[id - 1].stats.peak_live_bytes >
                              r->stacks[best - 1].stats.peak_live_bytes))
                best = id;
        if (!best)
            break;
        wanted[best] = 2;
    }
    for (uint32_t id = 1; id <= r->stack_count; id++)
        if (wanted[id])
            r->shown[r->shown_count++] = id;
    qsort_r(r->shown, r->shown_count, sizeof(uint32_t), by_stack_live, r);
    memcpy(r->by_peak, r->shown, r->shown_count * sizeof(uint32_t));
    report_order_by_peak(r, r->by_peak, r->shown_count);
    return 0;
}

static int by_growth_rate(const void *a, const void *b, void *report)
{
    const struct report *r = report;
    double rx = growth_rate(&stack_of_id(a, r)->growth, &r->growth);
    double ry = growth_rate(&stack_of_id(b, r)->growth, &r->growth);
    return rx < ry ? 1 : rx > ry ? -1 : 0;
}

static int by_growth_peak(const void *a, const void *b, void *report)
{
    const struct report *r = report;
    uint64_t x = stack_of_id(a, r)->growth.peak_bytes, y = stack_of_id(b, r)->growth.peak_bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Leak suspects: stacks whose live bytes keep rising, and those that grew
 * so until shortly before the end, then were freed (growth.h). */
static int find_growing(struct report *r)
{
    r->growing = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    r->released = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    if (!r->growing || !r->released)
        return -1;
    for (uint32_t id = 1; r->has_growth && id <= r->stack_count; id++) {
        const struct stack *s = &r->stacks[id - 1];
        if (report_cache_segment(r, id))
            continue;
        if (growth_suspect(&s->growth, report_growth_bytes(r, s), &r->growth))
            r->growing[r->growing_count++] = id;
        else if (growth_released(&s->growth, report_growth_bytes(r, s), &r->growth))
            r->released[r->released_count++] = id;
    }
    qsort_r(r->growing, r->growing_count, sizeof(uint32_t), by_growth_rate, r);
    qsort_r(r->released, r->released_count, sizeof(uint32_t), by_growth_peak, r);
    return 0;
}

static int by_file(const void *a, const void *b)
{
    return strcmp((*(struct symbol *const *)a)->file, (*(struct symbol *const *)b)->file);
}

/* The script run as ../train.py is named as if run by its absolute path:
 * here, once a distinct file, rather than when a frame is recorded; a
 * file's memory is the report's. */
int report_real_paths(struct report *r)
{
    size_t count = 0;
    for (size_t i = 0; i < r->address_count; i++)
        count += r->symbols[i].python && r->symbols[i].file;
    if (!count)
        return 0;
    struct symbol **list = report_alloc(r, count * sizeof(*list));
    if (!list)
        return -1;
    count = 0;
    for (size_t i = 0; i < r->address_count; i++)
        if (r->symbols[i].python && r->symbols[i].file)
            list[count++] = &r->symbols[i];
    qsort(list, count, sizeof(*list), by_file);
    const char *start_dir = r->start_dir[0] ? r->start_dir : NULL;
    char real[OUTPUT_PATH_MAX];
    for (size_t first = 0, end; first < count; first = end) {
        for (end = first + 1; end < count && by_file(&list[first], &list[end]) == 0;)
            end++;
        if (!output_real_path(list[first]->file, start_dir, real, sizeof(real)))
            continue;
        size_t length = strlen(real) + 1;
        char *path = report_alloc(r, length);
        if (!path)
            return -1;
        memcpy(path, real, length);
        for (size_t k = first; k < end; k++)
            list[k]->file = path;
    }
    return 0;
}

static int symbolize_frames(struct report *r)
{
    size_t count = 0;
    for (uint32_t i = 0; i < r->shown_count; i++)
        count += r->stacks[r->shown[i] - 1].depth;
    r->addresses = report_alloc(r, count * sizeof(uintptr_t));
    if (!r->addresses)
        return -1;
    for (uint32_t i = 0; i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        memcpy(r->addresses + r->address_count, r->frames + s->first_frame,
               s->depth * sizeof(uintptr_t));
        r->address_count += s->depth;
    }
    qsort(r->addresses, r->address_count, sizeof(uintptr_t), by_address);
    size_t unique = 0;
    for (size_t i = 0; i < r->address_count; i++)
        if (i == 0 || r->addresses[i] != r->addresses[unique - 1])
            r->addresses[unique++] = r->addresses[i];
    r->address_count = unique;
    r->symbols = report_alloc(r, unique * sizeof(struct symbol));
    if (!r->symbols)
        return -1;
    for (size_t i = 0; i < unique; i++) {
        uintptr_t address = r->addresses[i];
        if (!is_python_frame(address)) {
            symbolize(r->symbolizer, address, 1, &r->symbols[i]);
            continue;
        }
        uint32_t id = (uint32_t)(address & ~PYTHON_FRAME_MASK);
        const struct python_location *l =
            r->python && id >= 1 && id <= r->python_count ? &r->python[id - 1] : NULL;
        struct symbol *s = &r->symbols[i];
        memset(s, 0, sizeof(*s));
        s->address = address;
        s->python = 1;
        if (l) {
            s->function = l->function;
            s->file = l->file;
            s->line = l->line;
        }
    }
    return report_real_paths(r);
}

int report_classify_frames(struct report *r)
{
    r->origins = report_alloc(r, r->address_count);
    if (!r->origins)
        return -1;
    if (r->options.user_packages && r->options.user_packages[0])
        r->user_packages = r->options.user_packages;
    for (size_t i = 0; i < r->address_count; i++)
        r->origins[i] = (uint8_t)origin_of(&r->symbols[i], r->user_packages);
    return 0;
}

void report_options_of(const struct config *settings, struct report_options *o)
{
    *o = (struct report_options){
        .top = settings->top,
        .all_frames = settings->all_frames,
        .max_blocks = settings->max_blocks,
        .depth = settings->depth,
        .min_size = settings->min_size,
        .formats = settings->formats,
        .file_mode = settings->file_mode,
        .quiet = settings->quiet,
        .user_packages = settings->user_packages,
    };
}

int report_finish(struct report *r, struct symbolizer *symbolizer)
{
    r->symbolizer = symbolizer;
    r->all_frames = r->options.all_frames;
    if (make_groups(r) < 0 || find_growing(r) < 0 || choose_stacks(r) < 0 ||
        symbolize_frames(r) < 0 || report_classify_frames(r) < 0)
        return -1;
    return 0;
}

void report_release(struct report *r)
{
    symbolizer_close(r->symbolizer);
    for (int i = 0; i < r->page_count; i++)
        pages_free(r->pages[i], r->page_sizes[i]);
    r->page_count = 0;
    r->carve_at = NULL;
    r->carve_left = 0;
}

uint64_t report_growth_bytes(const struct report *r, const struct stack *s)
{
    return r->growth.ended ? s->growth.last_bytes : s->stats.live_bytes;
}

void report_growth_rates(const struct report *r, const struct stack_growth *g, int to_peak,
                         char *text, size_t size)
{
    char rate[24], call[24];
    format_bytes(growth_rate_bytes(to_peak ? growth_peak_rate(g, &r->growth)
                                           : growth_rate(g, &r->growth)),
                 rate, sizeof(rate));
    if (r->growth.mode == GROWTH_MARKS) {
        snprintf(text, size, "+%s per mark", rate);
        return;
    }
    uint64_t calls = to_peak ? g->peak_calls : g->calls;
    uint64_t per_call = growth_rate_bytes(to_peak ? growth_peak_call_rate(g) : growth_call_rate(g));
    format_bytes(per_call, call, sizeof(call));
    if (per_call) /* below a byte a call, a figure of 0 B would mislead */
        snprintf(text, size, "+%s a call over %llu call%s, +%s per second", call,
                 (unsigned long long)calls, calls == 1 ? "" : "s", rate);
    else
        snprintf(text, size, "+%s per second", rate);
}

uint32_t report_torch_age_ms(const struct report *r)
{
    return r->now_ms >= r->torch.time_ms ? r->now_ms - r->torch.time_ms : 0;
}

/* Libraries whose allocations deserve a name of their own. The innermost
 * frame of a stack that lies in one of them labels the stack: NCCL's
 * communication buffers (cuMemCreate/cuMemMap with NCCL_CUMEM_ENABLE, or
 * cudaMalloc), the math libraries' workspaces. */
static const struct {
    const char *module; /* start of the file name */
    const char *label;
} library_labels[] = {
    {"libnccl", "nccl"},   {"libcublas", "cublas"},     {"libcudnn", "cudnn"},
    {"libcufft", "cufft"}, {"libcusparse", "cusparse"}, {"libcusolver", "cusolver"},
};

const char *report_stack_label(const struct report *r, uint32_t stack_id)
{
    if (stack_id == 0 || stack_id > r->stack_count)
        return NULL;
    const struct stack *s = &r->stacks[stack_id - 1];
    for (uint32_t f = 0; f < s->depth; f++) {
        long i = report_frame_index(r, r->frames[s->first_frame + f]);
        const char *module = i >= 0 ? r->symbols[i].module : NULL;
        if (!module)
            continue;
        const char *name = output_base_name(module);
        for (size_t k = 0; k < sizeof(library_labels) / sizeof(library_labels[0]); k++)
            if (strncmp(name, library_labels[k].module, strlen(library_labels[k].module)) == 0)
                return library_labels[k].label;
    }
    return NULL;
}

long report_frame_index(const struct report *r, uintptr_t address)
{
    size_t low = 0, high = r->address_count;
    while (low < high) {
        size_t mid = (low + high) / 2;
        if (r->addresses[mid] < address)
            low = mid + 1;
        else
            high = mid;
    }
    return low < r->address_count && r->addresses[low] == address ? (long)low : -1;
}

size_t report_ranges_below(const void *ranges, size_t count, size_t size, size_t start,
                           uint64_t address)
{
    const char *base = (const char *)ranges + start;
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        uint64_t at;
        memcpy(&at, base + middle * size, sizeof(at));
        if (at <= address)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

const char *report_mark_label(const struct report *r, uint64_t number)
{
    uint64_t total = r->marks.total;
    return number >= RING_FIRST(r->marks.ring, total) && number <= total
               ? RING_ENTRY(r->marks.ring, number)->label
               : NULL;
}

const char *report_api_name(const struct report *r, int api)
{
    return api >= 0 && api < r->api_count ? r->api_names[api] : "unknown";
}

const struct counters *report_counters(const struct report *r, int slot, int set)
{
    return &r->counters->sets[slot][set];
}

int report_cache_segment(const struct report *r, uint32_t stack_id)
{
    if (stack_id == 0 || stack_id > r->stack_count)
        return 0;
    uint32_t flags = r->stacks[stack_id - 1].flags;
    for (int i = 0; i < CACHE_KINDS; i++)
        if ((flags & STACK_CACHE_SEGMENT(KIND_TORCH_TENSOR + i)) &&
            r->cache_views[i].view == CACHE_BLOCKS)
            return 1;
    return 0;
}
