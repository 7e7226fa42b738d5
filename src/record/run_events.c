/* run_events.c - the run's rare events (see run_events.h): failed
 * allocations and the OOMs they make, a range or a context's blocks freed at
 * once, marks, a cache's view, the program's end, an OOM's outcome. Each changes `tracker` as a whole under
 * tracker_lock(), the lock reports copy it under; none is on the record
 * path, which stays in tracker.c. */
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "config.h"
#include "counters.h"
#include "growth.h"
#include "kinds.h"
#include "python.h"
#include "registry.h"
#include "run_events.h"
#include "stacks.h"
#include "timeline.h"
#include "tracker.h"
#include "tracker_thread.h"

/* This thread's OOM that may go on (oom_number): its number, the size
 * refused, and how far the thread's allocations had gone then. */
static __thread struct {
    uint32_t number;
    uint64_t size, allocations;
} open_oom;

/* The number of the OOM that this thread's failed allocation of `size`
 * (`kind`) belongs to, with the tracker locked. One OOM is what the program
 * met once: a driver's refusal, its retry of the same size, and then a
 * caching allocator's own failure when it gives up, all on one thread with
 * no allocation recorded on that thread between them (its sequence numbers
 * have not moved). Told by what happened, not by how close in time: a slow
 * retry is still the same OOM, and a second OOM right after a recovered one
 * is another. */
static uint32_t oom_number(int kind, uint64_t size)
{
    int framework = kind_space(kind) == SPACE_FRAMEWORK;
    uint64_t allocations = tracker_thread_allocations();
    /* An OOM numbered before a fork is not the child's: its count restarts. */
    int goes_on = open_oom.number && open_oom.number <= tracker.ooms_total &&
                  open_oom.allocations == allocations && (framework || open_oom.size == size);
    uint32_t number = goes_on ? open_oom.number : ++tracker.ooms_total;
    open_oom.number = framework ? 0 : number; /* a framework's failure ends it */
    open_oom.size = size;
    open_oom.allocations = allocations;
    return number;
}

uint32_t run_failure(const struct allocation *a, int code, int oom)
{
    if (!tracker_enter_to_record())
        return 0;
    uintptr_t frames[CONFIG_MAX_DEPTH];
    int depth =
        config.depth > 0
            ? python_capture(frames, config.native ? stack_capture(frames, config.depth) : 0,
                             CONFIG_MAX_DEPTH)
            : 0;
    int kind = a->kind & BLOCK_KIND_MASK;
    uint32_t stack_id =
        stack_intern(frames, depth,
                     stack_hash_in(frames, depth,
                                   kind_space(kind) == SPACE_FRAMEWORK ? 0 : STACK_DRIVER));
    tracker_note_traced();

    tracker_lock(); /* rare: the failure ring and its counters, all at once */
    counters_on_failure(a->device, kind, oom);
    if (a->api >= 0 && a->api < MAX_APIS)
        tracker.api_failures[a->api]++;
    uint64_t number = ++tracker.failures_total;
    struct failure *f = RING_ENTRY(tracker.failures, number);
    f->size = a->size;
    f->device = a->device;
    f->kind = kind;
    f->api = a->api;
    f->code = code;
    f->oom = oom;
    f->oom_number = oom ? oom_number(kind, a->size) : 0;
    f->stack_id = stack_id;
    f->time_ms = tracker_now_ms();
    f->thread = tracker_thread_number();
    timeline_record(oom ? TIMELINE_OOM : TIMELINE_FAILURE, a->value, a->size, a->device, kind,
                    a->api, stack_id);
    tracker_unlock();
    tracker_leave();
    return stack_id;
}

void run_range_freed(int space, uint64_t start, uint64_t size)
{
    uint64_t end = start + size;
    if (!tracker_enter_to_record())
        return;
    tracker_lock(); /* the range may span shards */
    uint64_t at = start;
    while (at < end) {
        struct block *b = registry_find(block_key(at, space));
        if (!b)
            break;
        at += b->size ? b->size : 1;
        tracker_forget_locked(b, 0);
    }
    if (at < end) { /* not back to back: look at every block */
        struct registry_cursor cursor;
        for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
            uint64_t value = block_value(b);
            if (kind_space(block_kind(b)) == space && value >= at && value < end) {
                tracker_forget_locked(b, 0);
            }
        }
    }
    tracker_unlock();
    tracker_leave();
}

void run_context_gone(int context)
{
    if (context <= 0 || !tracker_enter_to_record())
        return;
    tracker_lock();
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
        if (b->context == context && kind_freed_by_context(block_kind(b))) {
            tracker_forget_locked(b, 1);
        }
    }
    tracker_unlock();
    tracker_leave();
}

void run_mark(const char *label)
{
    if (!tracker_enter_to_record())
        return;
    tracker_lock();
    uint64_t number = ++tracker.marks_total;
    struct mark *m = RING_ENTRY(tracker.marks, number);
    snprintf(m->label, sizeof(m->label), "%s", label);
    m->time_ms = tracker_now_ms();
    uint64_t calls[MAX_APIS], allocations[MAX_APIS];
    tracker_api_totals(calls, allocations);
    m->sequence = 0;
    for (int api = 0; api < MAX_APIS; api++)
        m->sequence += allocations[api];
    m->self_time_ns = tracker_self_time_ns();
    m->device_bytes = 0;
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        m->device_bytes += counters_current_bytes(slot, COUNTER_DEVICE_MEMORY);
    growth_mark(m->time_ms);
    timeline_record(TIMELINE_MARK, 0, tracker.marks_total, -1, 0, 0, 0);
    tracker_unlock();
    tracker_leave();
}

void run_cache_view(int cache_kind, int view, const char *why)
{
    if (!kind_in_cache(cache_kind) || !tracker_enter_to_record())
        return;
    tracker_lock(); /* reports copy `tracker` whole under it */
    struct cache_state *c = &tracker.caches[cache_kind - KIND_TORCH_TENSOR];
    c->view = view;
    if (view == CACHE_BLOCKS)
        c->since_ms = tracker_now_ms();
    snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
    tracker_unlock();
    tracker_leave();
}

void run_program_end(void)
{
    if (!tracker_enter_to_record())
        return;
    tracker_lock();
    if (!tracker.program_ended) {
        uint32_t now = tracker_now_ms();
        growth_end(now);
        uint32_t count = stack_count();
        tracker.end_totals = count ? pages_alloc(count * sizeof(struct end_totals)) : NULL;
        tracker.end_stacks = tracker.end_totals ? count : 0;
        for (uint32_t id = 1; id <= tracker.end_stacks; id++) {
            const struct stack_record *t = stack_get(id);
            tracker.end_totals[id - 1] =
                (struct end_totals){t->live_bytes, t->live_blocks, -2, 0, 0};
        }
        struct registry_cursor cursor;
        for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
            b->kind |= BLOCK_HELD_AT_END;
            if (b->stack_id == 0 || b->stack_id > tracker.end_stacks)
                continue;
            struct end_totals *e = &tracker.end_totals[b->stack_id - 1];
            if (e->device == -2) {
                e->device = b->device;
                e->kind = (uint8_t)block_kind(b);
                e->api = b->api;
            } else if (e->device != b->device) {
                e->device = -1;
            }
        }
        for (int slot = 0; slot <= COUNTER_NO_DEVICE; slot++)
            tracker.end_device_bytes[slot] = counters_current_bytes(slot, COUNTER_DEVICE_MEMORY);
        tracker.end_timeline = __atomic_load_n(&timeline.next, __ATOMIC_ACQUIRE);
        tracker.program_end_ms = now;
        tracker.program_ended = 1;
    }
    tracker_unlock();
    tracker_leave();
}

void run_oom_retried(int succeeded)
{
    __atomic_fetch_add(succeeded ? &tracker.oom_retries_succeeded : &tracker.oom_retries_failed, 1,
                       __ATOMIC_RELAXED);
}

void run_oom_verdict(const char *verdict, const char *text, uint64_t size, uint32_t stack_id)
{
    tracker_lock(); /* reports copy `tracker` whole under it */
    snprintf(tracker.oom.verdict, sizeof(tracker.oom.verdict), "%s", verdict);
    snprintf(tracker.oom.text, sizeof(tracker.oom.text), "%s", text);
    tracker.oom.size = size;
    tracker.oom.stack_id = stack_id;
    tracker.oom.time_ms = tracker_now_ms();
    tracker_unlock();
}
