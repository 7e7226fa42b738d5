/* run.h - what the recording said of the run besides its blocks and stacks,
 * in the report's own types: the failed allocations, the OOM verdict, the
 * marks, the threads, the streams and pools, the program's end, the
 * frameworks' caches as they were seen.
 *
 * Each is one section of struct report (report.h). src/runtime/collect.c
 * fills them from the recorder's bookkeeping, the only place that knows
 * both; the command's loaders fill them from a JSON report or a crash dump.
 * Nothing here is the recorder's: a field added to the recorder is not part
 * of a report until a section says it. run_facts.h (src/record) holds the
 * plain definitions both sides count in. */
#ifndef CUMEMTRACE_RUN_H
#define CUMEMTRACE_RUN_H

#include <stdint.h>

#include "counters.h"
#include "ring.h"
#include "run_facts.h"

/* An allocation that failed. */
struct report_failure {
    uint64_t size;
    int32_t device, kind, api, code, oom;
    uint32_t stack_id, time_ms;
    uint32_t oom_number; /* which of the process's OOMs it is part of; 0 if none */
    uint16_t thread;
};

/* The failed allocations: the newest FAILURE_RING of them, as a ring
 * (ring.h: entry n of `total` in ring[(n - 1) % FAILURE_RING]). */
struct report_failures {
    struct report_failure ring[FAILURE_RING];
    uint64_t total;
    uint32_t ooms;                              /* OOMs as the program met them: oom_number */
    uint64_t retries_succeeded, retries_failed; /* PyTorch's retries of a reported OOM */
};

/* The final verdict of the last OOM report, which the reports after it
 * repeat. */
struct report_last_oom {
    char verdict[24]; /* "" while no OOM was reported */
    char text[OOM_VERDICT_TEXT];
    uint64_t size;
    uint32_t stack_id, time_ms;
};

/* A mark the program made (cumemtrace_mark). */
struct report_mark {
    char label[64];
    uint32_t time_ms;
    uint64_t sequence;     /* allocations made before the mark */
    uint64_t device_bytes; /* device memory live at the mark, all devices */
    uint64_t self_time_ns; /* our own time in CUDA calls so far */
};

/* The marks: the newest MARK_RING of them, as a ring (ring.h). */
struct report_marks {
    struct report_mark ring[MARK_RING];
    uint64_t total;
};

/* The threads that allocated, by thread number - 1 (a block's `thread`). */
struct report_thread {
    int tid;
    char name[16];
};
struct report_threads {
    struct report_thread *list;
    uint32_t count;
};

/* The streams and pools blocks were allocated on, by number - 1 (a
 * block's `handle`). */
struct report_handles {
    uint64_t *list;
    uint32_t count;
};

/* A stack's live totals when the program ended. */
struct report_end_stack {
    uint64_t bytes, blocks;
    int8_t device;     /* of its live blocks; -1 when on several */
    uint8_t kind, api; /* of one of them */
};

/* The end of a Python program, before its interpreter's teardown. */
struct report_end {
    int ended; /* 0: not seen; the rest is zero */
    uint32_t time_ms;
    struct report_end_stack *stacks;              /* by stack id - 1; NULL: not known (JSON) */
    uint32_t stack_count;                         /* stacks when it ended */
    int has_device_bytes;                         /* device_bytes known (an older report
                                            * read back has none) */
    uint64_t device_bytes[COUNTER_NO_DEVICE + 1]; /* device memory live then, by slot */
};

/* How a framework's cache was seen (the report's cache_views, by kind -
 * KIND_TORCH_TENSOR). */
struct report_cache_view {
    int view;          /* enum cache_view */
    uint32_t since_ms; /* when its blocks began to be recorded */
    char why[160];
};

#endif
