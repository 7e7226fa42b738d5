/* timeline.c - the event ring (see timeline.h). */
#include <sys/mman.h>

#include "arena.h"
#include "clock.h"
#include "config.h"
#include "timeline.h"

struct timeline_ring timeline;

void timeline_reset(uint64_t start_ns)
{
    uint64_t capacity = config.events > TIMELINE_MAX_EVENTS ? TIMELINE_MAX_EVENTS : config.events;
    timeline.start_ns = start_ns;
    if (capacity == 0)
        return;
    /* After fork the child starts with a fresh, empty mapping (cheaper than
     * clearing the parent's: untouched pages cost nothing). */
    if (timeline.events) {
        struct timeline_event *old = timeline.events;
        timeline.events = NULL;
        pages_free(old, timeline.capacity * sizeof(struct timeline_event));
    }
    struct timeline_event *events = pages_alloc(capacity * sizeof(struct timeline_event));
    if (!events)
        return; /* no timeline: the reports show none */
    /* Large pages where the kernel offers them: a first write to each 4 KiB
     * page costs microseconds in a VM, a hundred events' worth. */
    madvise(events, capacity * sizeof(struct timeline_event), MADV_HUGEPAGE);
    timeline.capacity = capacity;
    timeline.events = events;
    __atomic_store_n(&timeline.next, 0, __ATOMIC_RELEASE);
}

void timeline_add(int type, uint64_t value, uint64_t size, int device, int kind, int api,
                  uint32_t stack_id)
{
    uint64_t now = monotonic_ns();
    uint64_t number = __atomic_fetch_add(&timeline.next, 1, __ATOMIC_RELAXED);
    struct timeline_event *e = &timeline.events[number % timeline.capacity];
    __atomic_store_n(&e->stamp, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    e->time_us = now > timeline.start_ns ? (now - timeline.start_ns) / 1000 : 0;
    e->value = value;
    e->size = size;
    e->stack_id = stack_id;
    e->device = (int8_t)(device >= -1 && device < 127 ? device : -1);
    e->type = (uint8_t)type;
    e->kind = (uint8_t)kind;
    e->api = (uint8_t)api;
    __atomic_store_n(&e->stamp, number + 1, __ATOMIC_RELEASE);
}

size_t timeline_copy(struct timeline_event *out, uint64_t *total)
{
    size_t count = 0;
    uint64_t end = __atomic_load_n(&timeline.next, __ATOMIC_ACQUIRE);
    uint64_t begin = end > timeline.capacity ? end - timeline.capacity : 0;
    *total = end;
    if (!timeline.events)
        return 0;
    for (uint64_t number = begin; number < end; number++) {
        const struct timeline_event *e = &timeline.events[number % timeline.capacity];
        uint64_t stamp = __atomic_load_n(&e->stamp, __ATOMIC_ACQUIRE);
        out[count] = *e;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (stamp == number + 1 && __atomic_load_n(&e->stamp, __ATOMIC_RELAXED) == stamp)
            count++;
    }
    return count;
}

int64_t timeline_delta(const struct timeline_event *e)
{
    if (e->type == TIMELINE_ALLOC)
        return (int64_t)e->size;
    if (e->type == TIMELINE_FREE || e->type == TIMELINE_FREE_IMPLICIT)
        return -(int64_t)e->size;
    return 0;
}

const char *timeline_type_name(int type)
{
    static const char *names[] = {"none",    "alloc", "free", "free_implicit",
                                  "failure", "oom",   "mark"};
    return type >= 0 && type <= TIMELINE_MARK ? names[type] : "unknown";
}
