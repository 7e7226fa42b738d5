/* tracker_thread.h - what the tracker's own other files (run_events.c,
 * cache_segments.c) take of its per-thread state, which stays private to
 * tracker.c so that its record path keeps every read inlined.
 *
 * Not for the layers above: they use tracker.h. */
#ifndef CUMEMTRACE_TRACKER_THREAD_H
#define CUMEMTRACE_TRACKER_THREAD_H

#include <stdint.h>

/* tracker_enter, or the event counted as lost (LOST_REENTRY) when this
 * thread is already inside: 1 if entered (leave with tracker_leave). */
int tracker_enter_to_record(void);
/* This thread's number, registering it on first use; with a shard lock or
 * tracker_lock held. */
uint16_t tracker_thread_number(void);
/* Marks the process as traced at this thread's first event. */
void tracker_note_traced(void);
/* How far this thread's allocation numbers have gone: it moves at each
 * allocation the thread records, so two equal readings mean none between. */
uint64_t tracker_thread_allocations(void);
/* With tracker_lock() held: the record `b` is freed (`implicit`: by its
 * context's end, not by a call), accounted, and its record released. */
struct block;
void tracker_forget_locked(struct block *b, int implicit);
/* The stack of this thread's last physical allocation (cuMemCreate) made
 * inside a cache's allocator, forgotten as it is taken; 0 if none. */
uint32_t tracker_take_physical_stack(void);

#endif
