/* collect.c - a report of this process, now.
 *
 * What the tracker holds is copied under its lock (counters, stacks with
 * their frames, live blocks) and the lock let go; grouping, sorting and
 * symbolizing happen after, on the copy (report_finish), so threads that
 * allocate are held up only for the copy. The process (pid, command line,
 * ranks) and its devices (the driver's free and total, the pools) are read
 * around it.
 *
 * The work on the copy (the caches' view, what was held at the end,
 * grouping, symbolizing) takes `finishing`: the modules libdw has read are
 * kept between reports (symbolize.c) and used by one report at a time; and
 * a fork waits for it (report_fork_prepare), since that work is dlopen,
 * dladdr, libdw's own and the C library's sorting, any of which may hold a
 * lock of the loader or the C library (qsort's malloc: ASan's allocator
 * has no fork handler) that the child would inherit held. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "collect.h"
#include "config.h"
#include "frames.h"
#include "log.h"
#include "python_locations.h"
#include "registry.h"
#include "torch_stats.h"
#include "tracker.h"

static pthread_mutex_t finishing = PTHREAD_MUTEX_INITIALIZER;

/* The caches' view when the program ended (report_keep_end), which the exit
 * report shows: by then the interpreter's teardown may have freed the
 * blocks module globals held, and with them the holes between them, so the
 * view at exit would call a fragmented cache idle. Under `finishing`;
 * end_cache_count -1 while there is none. */
static struct report_cache end_caches[REPORT_MAX_CACHES];
static int end_cache_count = -1;
/* What the tensors were then, by the exit hook's reading. */
static struct report_classes end_classes;

void report_fork_prepare(void)
{
    pthread_mutex_lock(&finishing);
}

void report_fork_parent(void)
{
    pthread_mutex_unlock(&finishing);
}

void report_fork_child(void)
{
    pthread_mutex_init(&finishing, NULL);
    end_cache_count = -1; /* the child's program has not ended */
}

/* torch_stats_for_report's answer: what the tensors of its reading are. */
static void match_classes(const struct torch_classes *c, const char *why, void *report)
{
    report_classes(report, c, why);
}

void report_block_of(const struct block *b, struct report_block *out)
{
    out->value = block_value(b);
    out->size = b->size;
    out->sequence = b->sequence;
    out->stack_id = b->stack_id;
    out->time_ms = b->time_ms;
    out->thread = b->thread;
    out->handle = b->handle;
    out->device = b->device;
    out->kind = (uint8_t)block_kind(b);
    out->api = b->api;
    out->context = b->context;
    out->held_at_end = (b->kind & BLOCK_HELD_AT_END) != 0;
}

/* The live blocks into r->blocks, allocated for registry_count() of them.
 * Tracker lock held. */
static void copy_blocks(struct report *r)
{
    size_t i = 0;
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b && i < r->block_count;
         b = registry_next(&cursor), i++)
        report_block_of(b, &r->blocks[i]);
}

/* The recorder's bookkeeping, `t`, into the report's sections (run.h): the
 * one place that knows both. Their text fields are the same size on both
 * sides, so that nothing is cut on the way. Tracker lock held; the lists
 * (threads, handles, end stacks) allocated for t's counts. */
_Static_assert(sizeof(((struct mark *)0)->label) == sizeof(((struct report_mark *)0)->label),
               "a mark's label");
_Static_assert(sizeof(((struct thread_info *)0)->name) == sizeof(((struct report_thread *)0)->name),
               "a thread's name");
_Static_assert(sizeof(((struct cache_state *)0)->why) ==
                   sizeof(((struct report_cache_view *)0)->why),
               "a cache view's why");
_Static_assert(sizeof(((struct oom_verdict *)0)->verdict) ==
                   sizeof(((struct report_last_oom *)0)->verdict),
               "an OOM's verdict");
_Static_assert(sizeof(((struct oom_verdict *)0)->text) ==
                   sizeof(((struct report_last_oom *)0)->text),
               "an OOM verdict's text");

static void translate_failures(const struct tracker_state *t, struct report *r)
{
    struct report_failures *out = &r->failures;
    out->total = t->failures_total;
    out->ooms = t->ooms_total;
    out->retries_succeeded = t->oom_retries_succeeded;
    out->retries_failed = t->oom_retries_failed;
    for (uint64_t n = RING_FIRST(t->failures, t->failures_total); n <= t->failures_total; n++) {
        const struct failure *f = RING_ENTRY(t->failures, n);
        *RING_ENTRY(out->ring, n) = (struct report_failure){.size = f->size,
                                                            .device = f->device,
                                                            .kind = f->kind,
                                                            .api = f->api,
                                                            .code = f->code,
                                                            .oom = f->oom,
                                                            .stack_id = f->stack_id,
                                                            .time_ms = f->time_ms,
                                                            .oom_number = f->oom_number,
                                                            .thread = f->thread};
    }
    const struct oom_verdict *v = &t->oom;
    struct report_last_oom *last = &r->last_oom;
    memcpy(last->verdict, v->verdict, sizeof(last->verdict));
    memcpy(last->text, v->text, sizeof(last->text));
    last->size = v->size;
    last->stack_id = v->stack_id;
    last->time_ms = v->time_ms;
}

static void translate_marks(const struct tracker_state *t, struct report_marks *out)
{
    out->total = t->marks_total;
    for (uint64_t n = RING_FIRST(t->marks, t->marks_total); n <= t->marks_total; n++) {
        const struct mark *m = RING_ENTRY(t->marks, n);
        struct report_mark *x = RING_ENTRY(out->ring, n);
        memcpy(x->label, m->label, sizeof(x->label));
        x->time_ms = m->time_ms;
        x->sequence = m->sequence;
        x->device_bytes = m->device_bytes;
        x->self_time_ns = m->self_time_ns;
    }
}

static void translate_end(const struct tracker_state *t, struct report_end *out)
{
    out->ended = t->program_ended;
    out->time_ms = t->program_end_ms;
    out->stack_count = t->end_stacks;
    for (uint32_t i = 0; i < t->end_stacks; i++) {
        const struct end_totals *e = &t->end_totals[i];
        out->stacks[i] = (struct report_end_stack){.bytes = e->bytes,
                                                   .blocks = e->blocks,
                                                   .device = e->device,
                                                   .kind = e->kind,
                                                   .api = e->api};
    }
    out->has_device_bytes = t->program_ended;
    memcpy(out->device_bytes, t->end_device_bytes, sizeof(out->device_bytes));
}

static void translate(const struct tracker_state *t, struct report *r)
{
    r->start_unix = t->start_unix;
    memcpy(r->lost, t->lost, sizeof(r->lost));
    memcpy(r->api_failures, t->api_failures, sizeof(r->api_failures));
    translate_failures(t, r);
    translate_marks(t, &r->marks);
    r->threads.count = t->threads_used;
    for (uint32_t i = 0; i < t->threads_used; i++) {
        r->threads.list[i].tid = t->threads[i].tid;
        memcpy(r->threads.list[i].name, t->threads[i].name, sizeof(r->threads.list[i].name));
    }
    r->handles.count = t->handles_used;
    memcpy(r->handles.list, t->handles, t->handles_used * sizeof(uint64_t));
    translate_end(t, &r->end);
    for (int k = 0; k < CACHE_KINDS; k++) {
        const struct cache_state *c = &t->caches[k];
        struct report_cache_view *v = &r->cache_views[k];
        v->view = c->view;
        v->since_ms = c->since_ms;
        memcpy(v->why, c->why, sizeof(v->why));
    }
}

/* Copy under the lock: counters, stacks with their frames, live blocks, the
 * recorder's bookkeeping. */
static int copy_state(struct report *r)
{
    tracker_lock();
    tracker_api_totals(r->api_calls, r->api_allocations);
    r->now_ms = tracker_now_ms();
    growth_view(&r->growth, r->now_ms);
    r->has_growth = 1;
    r->series = report_alloc(r, sizeof(*r->series));
    if (r->series) {
        *r->series = series;
        series_now(r->series, r->now_ms);
    }
    r->registry_bytes = registry_memory_bytes();
    r->self_time_ns = config.self_time ? (int64_t)tracker_self_time_ns() : -1;
    r->stacks_bytes = stack_table_bytes();
    r->counters = report_alloc(r, sizeof(*r->counters));
    r->stack_count = stack_count();
    r->stacks = report_alloc(r, r->stack_count * sizeof(struct stack));
    uint64_t frame_count = 0;
    for (uint32_t id = 1; id <= r->stack_count; id++)
        frame_count += stack_get(id)->depth;
    r->frames = report_alloc(r, frame_count * sizeof(uintptr_t));
    r->block_count = registry_count();
    r->blocks = report_alloc(r, r->block_count * sizeof(struct report_block));
    r->threads.list = report_alloc(r, tracker.threads_used * sizeof(struct report_thread));
    r->handles.list = report_alloc(r, tracker.handles_used * sizeof(uint64_t));
    r->end.stacks = report_alloc(r, tracker.end_stacks * sizeof(struct report_end_stack));
    if (!r->counters || !r->stacks || !r->frames || !r->blocks || !r->threads.list ||
        !r->handles.list || !r->end.stacks) {
        tracker_unlock();
        return -1;
    }
    counters_snapshot(r->counters);
    translate(&tracker, r);
    uint64_t end_timeline = tracker.end_timeline;
    uint64_t at = 0;
    for (uint32_t id = 1; id <= r->stack_count; id++) {
        const struct stack_record *s = stack_get(id);
        stack_view(id, &r->stacks[id - 1]);
        growth_of(id, &r->growth, &r->stacks[id - 1].growth);
        r->stacks[id - 1].first_frame = at;
        memcpy(r->frames + at, stack_frames(s), s->depth * sizeof(uintptr_t));
        at += s->depth;
    }
    copy_blocks(r);
    if (timeline.events) {
        r->timeline = report_alloc(r, timeline.capacity * sizeof(struct timeline_event));
        if (r->timeline) {
            r->has_timeline = 1;
            r->timeline_capacity = timeline.capacity;
            r->timeline_count = timeline_copy(r->timeline, &r->timeline_total);
        }
    }
    tracker_unlock();
    r->timeline_end = r->timeline_count;
    for (size_t k = 0; r->end.ended && k < r->timeline_count; k++)
        if (r->timeline[k].stamp > end_timeline) {
            r->timeline_end = k;
            break;
        }
    /* Threads may read the clock in one order and claim slots in another:
     * keep times from going backwards, by microseconds at most. */
    for (size_t k = 1; k < r->timeline_count; k++)
        if (r->timeline[k].time_us < r->timeline[k - 1].time_us)
            r->timeline[k].time_us = r->timeline[k - 1].time_us;
    return 0;
}

/* The Python frames' locations this process knows, into r->python: every
 * id a copied stack holds was made before the copy. 0, or -1 when out of
 * memory. */
static int copy_python_locations(struct report *r)
{
    uint32_t count = locations_count();
    r->python = report_alloc(r, (count + 1) * sizeof(struct python_location));
    if (!r->python)
        return -1;
    for (uint32_t id = 1; id <= count; id++) {
        const struct python_location *l = python_location(PYTHON_FRAME_TAG | id);
        if (l)
            r->python[id - 1] = *l;
    }
    r->python_count = count;
    return 0;
}

/* The cache segments report_caches found, flagged in this process's stack
 * table too, for good: the next reports' copies, and the verdicts made in
 * the process, know them from there. */
static void keep_segment_flags(const struct report *r)
{
    for (uint32_t id = 1; id <= r->stack_count; id++) {
        uint32_t flags = r->stacks[id - 1].flags & STACK_CACHE_ANY;
        if (flags & ~__atomic_load_n(&stack_get(id)->flags, __ATOMIC_RELAXED))
            stack_flag(id, flags);
    }
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
    snprintf(r->start_dir, sizeof(r->start_dir), "%s", python_start_dir());
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

static int collect(struct report *r, const char *reason)
{
    memset(r, 0, sizeof(*r));
    r->reason = reason;
    report_options_of(&config, &r->options);
    read_process_info(r);
    if (copy_state(r) < 0 || copy_python_locations(r) < 0)
        return -1;
    r->api_names = host.api_names;
    r->api_count = host.api_count < MAX_APIS ? host.api_count : MAX_APIS;
    read_device_memory(r);
    int at_end = strcmp(reason, "exit") == 0 || strcmp(reason, "exec") == 0;
    int end_seen = at_end && r->end.ended;
    torch_stats_for_report(&r->torch, at_end, end_seen ? NULL : match_classes, r);
    r->classes.read = r->torch.read;
    pthread_mutex_lock(&finishing);
    int result = report_caches(r);
    if (result == 0)
        keep_segment_flags(r);
    if (result == 0 && report_caches_at_end(r) && end_cache_count >= 0) {
        memcpy(r->caches, end_caches, (size_t)end_cache_count * sizeof(*end_caches));
        r->cache_count = end_cache_count;
    }
    if (end_seen && end_cache_count >= 0)
        r->classes = end_classes;
    else if (end_seen)
        report_classes_unknown(&r->classes, "the program's end was seen, but not what its "
                                            "tensors were then");
    if (result == 0)
        result = report_held_at_end(r) < 0 || report_finish(r, symbolizer_open(host.lookup)) < 0 ||
                         frames_read_lines(r) < 0 || frames_tell_apart(r) < 0
                     ? -1
                     : 0;
    pthread_mutex_unlock(&finishing);
    return result;
}

void report_keep_end(void)
{
    struct report *r = pages_alloc(sizeof(*r));
    if (!r)
        return;
    memset(r, 0, sizeof(*r));
    tracker_lock();
    r->stack_count = stack_count();
    r->stacks = report_alloc(r, r->stack_count * sizeof(struct stack));
    r->block_count = registry_count();
    r->blocks = report_alloc(r, r->block_count * sizeof(struct report_block));
    if (r->stacks && r->blocks) {
        for (uint32_t id = 1; id <= r->stack_count; id++)
            stack_view(id, &r->stacks[id - 1]); /* report_caches reads flags and depth */
        copy_blocks(r);
    }
    tracker_unlock();
    struct torch_stats reading;
    if (r->stacks && r->blocks)
        torch_stats_for_report(&reading, 1, match_classes, r);
    pthread_mutex_lock(&finishing);
    if (r->stacks && r->blocks && report_caches(r) == 0) {
        keep_segment_flags(r);
        memcpy(end_caches, r->caches, (size_t)r->cache_count * sizeof(*end_caches));
        end_cache_count = r->cache_count;
        end_classes = r->classes;
        end_classes.read = reading.read;
    } else {
        log_line("out of memory at the program's end: the caches' view in the exit report "
                 "is the one after the interpreter's teardown");
    }
    pthread_mutex_unlock(&finishing);
    report_delete(r);
}

struct report *report_new(const char *reason)
{
    struct report *r = pages_alloc(sizeof(*r));
    if (r && collect(r, reason) < 0) {
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

char *report_template(char template_[REPORT_TEMPLATE_MAX], const char *kind, int number)
{
    if (!kind)
        snprintf(template_, REPORT_TEMPLATE_MAX, "%s", config.output);
    else if (number == 0)
        snprintf(template_, REPORT_TEMPLATE_MAX, "%s-%s", config.output, kind);
    else
        snprintf(template_, REPORT_TEMPLATE_MAX, "%s-%s-%d", config.output, kind, number);
    return template_;
}

int report_write_to(const char *reason, const char *template_, int summary)
{
    if (!config.formats && (!summary || config.quiet))
        return 0; /* nothing would be written: no collecting, no symbols */
    struct report *r = report_new(reason);
    if (!r)
        return -1;
    int result = report_emit(r, template_, summary, NULL);
    report_delete(r);
    return result;
}
