/* report.c - collect the tracker's state and write the configured reports. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "log.h"
#include "names.h"
#include "registry.h"
#include "report.h"

void *report_alloc(struct report *r, size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    if (r->page_count == (int)(sizeof(r->pages) / sizeof(r->pages[0])))
        return NULL;
    void *p = pages_alloc(bytes);
    if (p) {
        r->pages[r->page_count] = p;
        r->page_sizes[r->page_count++] = bytes;
    }
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

static const struct report *sorting;     /* for by_stack_live: qsort has no context */
static int by_stack_live(const void *a, const void *b)
{
    const struct stack *x = &sorting->stacks[*(const uint32_t *)a - 1];
    const struct stack *y = &sorting->stacks[*(const uint32_t *)b - 1];
    uint64_t kx = x->stats.live_bytes + x->stats.implicit_bytes;
    uint64_t ky = y->stats.live_bytes + y->stats.implicit_bytes;
    if (kx != ky)
        return kx > ky ? -1 : 1;
    if (x->stats.peak_live_bytes != y->stats.peak_live_bytes)
        return x->stats.peak_live_bytes > y->stats.peak_live_bytes ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_stack_peak(const void *a, const void *b)
{
    const struct stack *x = &sorting->stacks[*(const uint32_t *)a - 1];
    const struct stack *y = &sorting->stacks[*(const uint32_t *)b - 1];
    if (x->stats.peak_live_bytes != y->stats.peak_live_bytes)
        return x->stats.peak_live_bytes > y->stats.peak_live_bytes ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Copy under the lock: counters, stacks with their frames, live blocks. */
static int copy_state(struct report *r)
{
    tracker_lock();
    r->state = tracker;
    tracker_api_totals(r->api_calls, r->api_allocations);
    r->now_ms = tracker_now_ms();
    if (growth.mode == GROWTH_TIME && config.sample_ms > 0)
        growth_sample(r->now_ms, 0);   /* where every stack stands now */
    r->growth = growth;
    r->has_growth = 1;
    r->series = report_alloc(r, sizeof(*r->series));
    if (r->series)
        *r->series = series;
    r->registry_bytes = registry_memory_bytes();
    r->self_time_ns = config.self_time ? (int64_t)tracker_self_time_ns() : -1;
    r->stacks_bytes = stacks_memory_bytes();
    r->counters = report_alloc(r, sizeof(*r->counters));
    r->stack_count = stack_count();
    r->stacks = report_alloc(r, r->stack_count * sizeof(struct stack));
    uint64_t frame_count = 0;
    for (uint32_t id = 1; id <= r->stack_count; id++)
        frame_count += stack_get(id)->depth;
    r->frames = report_alloc(r, frame_count * sizeof(uintptr_t));
    r->block_count = registry_count();
    r->blocks = report_alloc(r, r->block_count * sizeof(struct report_block));
    r->state.threads = report_alloc(r, tracker.threads_used * sizeof(struct thread_info));
    r->state.handles = report_alloc(r, tracker.handles_used * sizeof(uint64_t));
    if (!r->counters || !r->stacks || !r->frames || !r->blocks || !r->state.threads ||
        !r->state.handles) {
        tracker_unlock();
        return -1;
    }
    counters_snapshot(r->counters);
    memcpy(r->state.threads, tracker.threads, tracker.threads_used * sizeof(struct thread_info));
    memcpy(r->state.handles, tracker.handles, tracker.handles_used * sizeof(uint64_t));
    uint64_t at = 0;
    for (uint32_t id = 1; id <= r->stack_count; id++) {
        struct stack *s = stack_get(id);
        r->stacks[id - 1] = *s;
        r->stacks[id - 1].first_frame = at;
        memcpy(r->frames + at, stack_frames(s), s->depth * sizeof(uintptr_t));
        at += s->depth;
    }
    size_t i = 0;
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b && i < r->block_count;
         b = registry_next(&cursor), i++) {
        struct report_block *c = &r->blocks[i];
        c->value = block_value(b);
        c->size = b->size;
        c->sequence = b->sequence;
        c->stack_id = b->stack_id;
        c->time_ms = b->time_ms;
        c->thread = b->thread;
        c->handle = b->handle;
        c->device = b->device;
        c->kind = (uint8_t)block_kind(b);
        c->api = b->api;
        c->context = b->context;
    }
    if (timeline.events) {
        r->timeline = report_alloc(r, timeline.capacity * sizeof(struct timeline_event));
        if (r->timeline) {
            r->has_timeline = 1;
            r->timeline_capacity = timeline.capacity;
            r->timeline_count = timeline_copy(r->timeline, &r->timeline_total);
        }
    }
    tracker_unlock();
    /* Threads may read the clock in one order and claim slots in another:
     * keep times from going backwards, by microseconds at most. */
    for (size_t k = 1; k < r->timeline_count; k++)
        if (r->timeline[k].time_us < r->timeline[k - 1].time_us)
            r->timeline[k].time_us = r->timeline[k - 1].time_us;
    return 0;
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
    uint64_t total = r->state.failures_total < FAILURE_RING ? r->state.failures_total : FAILURE_RING;
    for (uint64_t i = 0; i < total; i++)
        if (r->state.failures[i].stack_id <= r->stack_count)
            wanted[r->state.failures[i].stack_id] = 1;
    /* The timeline's stacks, so that memory at any moment can be drawn by stack. */
    for (size_t i = 0; i < r->timeline_count; i++)
        if (r->timeline[i].stack_id <= r->stack_count)
            wanted[r->timeline[i].stack_id] = 1;
    wanted[0] = 0;
    /* The top ones by peak: a simple selection, config.top is small. */
    for (int round = 0; round < config.top; round++) {
        uint32_t best = 0;
        for (uint32_t id = 1; id <= r->stack_count; id++)
            if (wanted[id] != 2 && (!best || r->stacks[id - 1].stats.peak_live_bytes >
                                             r->stacks[best - 1].stats.peak_live_bytes))
                best = id;
        if (!best)
            break;
        wanted[best] = 2;
    }
    for (uint32_t id = 1; id <= r->stack_count; id++)
        if (wanted[id])
            r->shown[r->shown_count++] = id;
    sorting = r;
    qsort(r->shown, r->shown_count, sizeof(uint32_t), by_stack_live);
    memcpy(r->by_peak, r->shown, r->shown_count * sizeof(uint32_t));
    qsort(r->by_peak, r->shown_count, sizeof(uint32_t), by_stack_peak);
    return 0;
}

static int by_growth_rate(const void *a, const void *b)
{
    const struct stack *x = &sorting->stacks[*(const uint32_t *)a - 1];
    const struct stack *y = &sorting->stacks[*(const uint32_t *)b - 1];
    double rx = growth_rate(&x->growth, &sorting->growth);
    double ry = growth_rate(&y->growth, &sorting->growth);
    return rx < ry ? 1 : rx > ry ? -1 : 0;
}

/* Leak suspects: stacks whose live bytes keep rising (growth.h). */
static int find_growing(struct report *r)
{
    r->growing = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    if (!r->growing)
        return -1;
    for (uint32_t id = 1; r->has_growth && id <= r->stack_count; id++) {
        const struct stack *s = &r->stacks[id - 1];
        if (growth_suspect(&s->growth, s->stats.live_bytes, &r->growth))
            r->growing[r->growing_count++] = id;
    }
    sorting = r;
    qsort(r->growing, r->growing_count, sizeof(uint32_t), by_growth_rate);
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
            r->python ? (id >= 1 && id <= r->python_count ? &r->python[id - 1] : NULL)
                      : python_location(address);
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
    return 0;
}

/* A rank variable set by torchrun, mpirun, ...; -1 if not set or not a number. */
static int rank_variable(const char *name)
{
    const char *value = getenv(name);
    char *end;
    long n = value && *value ? strtol(value, &end, 10) : -1;
    return value && *value && *end == '\0' && n >= 0 && n < (1l << 30) ? (int)n : -1;
}

static void read_process_info(struct report *r)
{
    gethostname(r->hostname, sizeof(r->hostname) - 1);
    r->rank = rank_variable("RANK");
    r->local_rank = rank_variable("LOCAL_RANK");
    r->world_size = rank_variable("WORLD_SIZE");
    r->pid = (int)getpid();
    r->ppid = (int)getppid();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->now_unix = ts.tv_sec + ts.tv_nsec / 1e9;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, r->argv, sizeof(r->argv) - 1);
        r->argv_bytes = n > 0 ? (size_t)n : 0;
        close(fd);
    }
}

static void read_device_memory(struct report *r)
{
    for (int slot = 0; slot <= MAX_DEVICES; slot++) {
        if (!r->counters->device_seen[slot])
            continue;
        struct report_device *d = &r->devices[r->device_count++];
        d->slot = slot;
        if (slot != COUNTER_NO_DEVICE && host.memory_info &&
            host.memory_info(slot, &d->free, &d->total) == 0)
            d->has_memory_info = 1;
        const struct counters *async = report_counters(r, slot, KIND_STREAM_ORDERED);
        if (slot != COUNTER_NO_DEVICE && async->blocks_allocated && host.pool_info &&
            host.pool_info(slot, &d->pool) == 0)
            d->has_pool = 1;
    }
    for (int i = 0; host.created_pool_info && i < REPORT_MAX_POOLS; i++) {
        struct report_pool *p = &r->pools[i];
        if (host.created_pool_info(i, &p->handle, &p->device, &p->figures) < 0)
            break;
        r->pool_count = i + 1;
    }
}

int report_collect(struct report *r, const char *reason)
{
    memset(r, 0, sizeof(*r));
    r->reason = reason;
    read_process_info(r);
    if (copy_state(r) < 0)
        return -1;
    r->start_unix = r->state.start_unix;
    r->api_names = host.api_names;
    r->api_count = host.api_count < MAX_APIS ? host.api_count : MAX_APIS;
    read_device_memory(r);
    torch_stats_get(&r->torch);
    return report_finish(r, symbolizer_open(host.lookup));
}

int report_finish(struct report *r, struct symbolizer *symbolizer)
{
    r->symbolizer = symbolizer;
    if (make_groups(r) < 0 || choose_stacks(r) < 0 || find_growing(r) < 0 ||
        symbolize_frames(r) < 0)
        return -1;
    return 0;
}

const char *report_verdict(const struct report_event *event)
{
    if (event->type != EVENT_OOM || !event->has_memory_info)
        return "unknown";
    return event->free < event->size ? "exhausted" : "fragmented";
}

static void torch_fragmentation(const struct report *r, struct report_fragmentation *f)
{
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
    f->torch_cached = f->torch_reserved > f->torch_allocated
                          ? f->torch_reserved - f->torch_allocated : 0;
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
    if (r->event.type == EVENT_OOM && strcmp(report_verdict(&r->event), "fragmented") == 0)
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

void report_release(struct report *r)
{
    symbolizer_close(r->symbolizer);
    for (int i = 0; i < r->page_count; i++)
        pages_free(r->pages[i], r->page_sizes[i]);
    r->page_count = 0;
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
    const char *module;      /* start of the file name */
    const char *label;
} library_labels[] = {
    {"libnccl", "nccl"},     {"libcublas", "cublas"},   {"libcudnn", "cudnn"},
    {"libcufft", "cufft"},   {"libcusparse", "cusparse"}, {"libcusolver", "cusolver"},
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
        const char *name = strrchr(module, '/') ? strrchr(module, '/') + 1 : module;
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

int64_t report_timeline_baseline(const struct report *r, int slot, int kind)
{
    int64_t bytes = (int64_t)report_counters(r, slot, kind)->bytes_current;
    for (size_t i = 0; i < r->timeline_count; i++) {
        const struct timeline_event *e = &r->timeline[i];
        if (counters_slot(e->device) == slot && e->kind == kind)
            bytes -= timeline_delta(e);
    }
    return bytes;
}

const char *report_api_name(const struct report *r, int api)
{
    return api >= 0 && api < r->api_count ? r->api_names[api] : "unknown";
}

const struct counters *report_counters(const struct report *r, int slot, int set)
{
    return &r->counters->sets[slot][set];
}

static int write_file(const struct report *r, int format, const char *template_,
                      const char *suffix)
{
    char path[4096];
    int result = -1;
    struct out *out = pages_alloc(sizeof(*out));
    if (!out)
        return -1;
    if (output_path(template_, suffix, path, sizeof(path)) < 0 ||
        output_claim(path, sizeof(path)) < 0) {
        log_line("the output path template '%s' makes a path that is too long; no %s report "
                 "written", template_, suffix + 1);
    } else if (out_open(out, path) < 0) {
        log_line("cannot write report to '%s': %s", path, strerror(errno));
    } else {
        switch (format) {
        case FORMAT_JSON: report_json(r, out); break;
        case FORMAT_HTML: report_html(r, out); break;
        case FORMAT_FOLDED: report_folded(r, out); break;
        case FORMAT_PERFETTO: report_perfetto(r, out); break;
        case FORMAT_MEMVIZ: report_memviz(r, out); break;
        default: report_text(r, out, 0); break;
        }
        if (out_close(out, path) < 0) {
            log_line("cannot write report to '%s': %s", path, strerror(errno));
        } else {
            result = 0;
            if (!config.quiet)
                log_line("%s report written to %s", r->reason, path);
        }
    }
    pages_free(out, sizeof(*out));
    return result;
}

int report_emit(const struct report *r, const char *template_, int summary)
{
    int result = 0;
    if (summary && !config.quiet) {
        struct out *out = pages_alloc(sizeof(*out));
        if (out) {
            out_fd(out, STDERR_FILENO);
            report_text(r, out, 1);
            out_flush(out);
            pages_free(out, sizeof(*out));
        }
    }
    if ((config.formats & FORMAT_TEXT) && write_file(r, FORMAT_TEXT, template_, ".txt") < 0)
        result = -1;
    if ((config.formats & FORMAT_JSON) && write_file(r, FORMAT_JSON, template_, ".json") < 0)
        result = -1;
    if ((config.formats & FORMAT_HTML) && write_file(r, FORMAT_HTML, template_, ".html") < 0)
        result = -1;
    if ((config.formats & FORMAT_FOLDED) &&
        write_file(r, FORMAT_FOLDED, template_, ".folded") < 0)
        result = -1;
    if ((config.formats & FORMAT_PERFETTO) &&
        write_file(r, FORMAT_PERFETTO, template_, ".trace.json") < 0)
        result = -1;
    if ((config.formats & FORMAT_MEMVIZ) &&
        write_file(r, FORMAT_MEMVIZ, template_, ".pickle") < 0)
        result = -1;
    return result;
}

struct report *report_new(const char *reason)
{
    struct report *r = pages_alloc(sizeof(*r));
    if (r && report_collect(r, reason) < 0) {
        report_delete(r);
        r = NULL;
    }
    if (!r)
        log_line("out of memory while collecting the %s report; none written", reason);
    return r;
}

void report_delete(struct report *r)
{
    report_release(r);
    pages_free(r, sizeof(*r));
}

int report_write_to(const char *reason, const char *template_, int summary)
{
    if (!config.formats && (!summary || config.quiet))
        return 0;      /* nothing would be written: no collecting, no symbols */
    struct report *r = report_new(reason);
    if (!r)
        return -1;
    int result = report_emit(r, template_, summary);
    report_delete(r);
    return result;
}
