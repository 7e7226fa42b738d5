/* run_events.h - the run's rare events: each is kept in `tracker` (tracker.h)
 * for the reports, which copy it whole under tracker_lock(). None is on the
 * record path: they may take every lock. Any caller, any thread; a call from
 * inside the tracer (tracker_inside) is counted as lost and kept nowhere. */
#ifndef CUMEMTRACE_RUN_EVENTS_H
#define CUMEMTRACE_RUN_EVENTS_H

#include <stdint.h>

#include "tracker.h"

/* A failed allocation `a` with the CUDA error `code`, `oom` when it was for
 * want of memory: into the failure ring with this thread's stack, and, for
 * an OOM, the number of the OOM it is part of (a driver's refusal, its
 * retry and the cache's giving up after them are one). Returns the id of
 * its stack (0: none, or not recorded). */
uint32_t run_failure(const struct allocation *a, int code, int oom);
/* Every block of `space` in [start, start + size) was freed at once (a VMM
 * range unmapped). */
void run_range_freed(int space, uint64_t start, uint64_t size);
/* The CUDA context numbered `context` was destroyed: the blocks it frees
 * with it (kind_freed_by_context) are freed, implicitly. */
void run_context_gone(int context);
/* The program's mark `label` (cumemtrace_mark): the time, the allocations
 * and device bytes so far, and a restart of growth's grid there. */
void run_mark(const char *label);
/* What a framework's cache (`cache_kind`) is recorded as now (enum
 * cache_view), and why in words for the reports; "" or NULL: no words. */
void run_cache_view(int cache_kind, int view, const char *why);
/* A Python program ends before its process does: the interpreter then tears
 * down module globals, which frees what they held (model weights, a list of
 * kept tensors). At the interpreter's exit hooks (frameworks/torch_stats.c)
 * the program has ended: what is live then is held at the end (blocks get
 * BLOCK_HELD_AT_END, each stack's live totals are kept), the growth samples
 * stop, and what is freed afterwards is the teardown's doing. Once. */
void run_program_end(void);
/* The retry of a reported OOM was seen, and whether it succeeded
 * (runtime/triggers.c). */
void run_oom_retried(int succeeded);
/* The final verdict of an OOM report (runtime/triggers.c, from inside the
 * tracer), kept for the reports after it (the exit report's findings repeat
 * it): `verdict` a word of report_verdict's, `text` its finding's, about a
 * request of `size` bytes from the stack `stack_id`. */
void run_oom_verdict(const char *verdict, const char *text, uint64_t size, uint32_t stack_id);

#endif
