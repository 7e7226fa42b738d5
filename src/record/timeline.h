/* timeline.h - an optional, bounded ring of memory events with timestamps.
 *
 * With CUMEMTRACE_EVENTS=N (N > 0) the tracker records every allocation,
 * free, failed allocation and mark in a ring of N entries, so reports can
 * show memory over time (the HTML report, the Perfetto and memory_viz
 * exports). When the ring is full the oldest entries are overwritten; how
 * many were dropped is kept.
 *
 * Recording is lock-free: a writer claims a slot with one atomic add and
 * publishes it with a per-slot stamp (a sequence lock), so readers can tell a
 * finished entry from one being written. The ring is one mmap made when the
 * tracker starts; nothing is allocated per event. With N = 0 (the default)
 * timeline_record() costs one predictable branch. Measured on the 2-core KVM
 * development machine (tests' own microbenchmark, not a timed test): about
 * 50 ns per event, 42 of them clock_gettime (kvm-clock); 83 ns on the first
 * pass through a 1M ring, where the kernel maps the pages.
 *
 * Events are recorded where the tracker changes its counters, so the ring
 * and the counters agree: the live bytes at any recorded moment are the live
 * bytes at the end minus the changes recorded after that moment. */
#ifndef CUMEMTRACE_TIMELINE_H
#define CUMEMTRACE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

enum timeline_type {
    TIMELINE_ALLOC = 1,
    TIMELINE_FREE,
    TIMELINE_FREE_IMPLICIT, /* freed by a context destroy or device reset */
    TIMELINE_FAILURE,       /* an allocation failed, not for lack of memory */
    TIMELINE_OOM,           /* an allocation failed: out of memory */
    TIMELINE_MARK,          /* cumemtrace_mark(); size is the mark's number */
};

/* 40 bytes. `stamp` is the event's number + 1 once the entry is complete. */
struct timeline_event {
    uint64_t time_us; /* microseconds since tracing started */
    uint64_t value;   /* address, or handle for VMM and arrays */
    uint64_t size;
    uint32_t stack_id;
    int8_t device; /* -1: not known */
    uint8_t type;  /* enum timeline_type */
    uint8_t kind;  /* enum kind */
    uint8_t api;
    uint64_t stamp;
};

struct timeline_ring {
    struct timeline_event *events; /* NULL: the timeline is off */
    uint64_t capacity;
    uint64_t next;     /* events claimed so far */
    uint64_t start_ns; /* CLOCK_MONOTONIC of time 0 */
};
extern struct timeline_ring timeline;

#define TIMELINE_MAX_EVENTS (64ull << 20)

/* Make (or, after fork, empty) the ring of config.events entries; time 0 is
 * `start_ns`. Called when the tracker starts and in a forked child. */
void timeline_reset(uint64_t start_ns);

void timeline_add(int type, uint64_t value, uint64_t size, int device, int kind, int api,
                  uint32_t stack_id);

static inline void timeline_record(int type, uint64_t value, uint64_t size, int device, int kind,
                                   int api, uint32_t stack_id)
{
    if (__builtin_expect(timeline.events != NULL, 0))
        timeline_add(type, value, size, device, kind, api, stack_id);
}

/* Copy the complete entries, oldest first, into `out` (room for
 * timeline.capacity); returns how many. *total is how many were ever
 * recorded; entries not copied (overwritten, or being written) are dropped. */
size_t timeline_copy(struct timeline_event *out, uint64_t *total);

/* The change an event makes to live bytes: +size, -size or 0. */
int64_t timeline_delta(const struct timeline_event *e);
const char *timeline_type_name(int type);

#endif
