/* triggers.h - when a report is written, as the interposer sees events.
 *
 * The tracker records; it never decides about reports. The interposer tells
 * these, after the tracker has recorded an event, what happened, and they
 * decide: the report at an out-of-memory failure and its rewrite when the
 * retry is seen, and the report at exit or exec. (A signal's snapshot and the crash
 * dump are signals.c's; cumemtrace_snapshot() is api.c's.) */
#ifndef CUMEMTRACE_TRIGGERS_H
#define CUMEMTRACE_TRIGGERS_H

#include <stdint.h>

#include "tracker.h"

/* After tracker_alloc: the retry of a reported OOM, if this is one. */
void trigger_on_alloc(uint64_t size);
/* After run_failure, which gave `stack_id`: the OOM report. */
void trigger_on_failure(const struct allocation *a, int code, int oom, uint32_t stack_id);
/* A framework's allocator gave up on `request` bytes of `cache_kind` on
 * `device`, with `driver_free` bytes free on the device (from inside its
 * allocator, its lock held): the OOM report, in the cache's terms. */
void trigger_cache_oom(int cache_kind, int device, uint64_t request, uint64_t driver_free);
/* The exit report, once per process that traced anything: at exit, or from
 * the library's destructor when no exit handler of ours was registered. */
void trigger_exit_report(void);
/* Before the process replaces itself (exec): the same report, "exec", and
 * 1 if it was written. After an exec that failed (the process goes on),
 * trigger_exec_failed(that) lets the report at exit be written, in its
 * place. errno is left as it was. */
int trigger_exec_report(void);
void trigger_exec_failed(int written);

#endif
