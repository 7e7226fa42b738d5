/* tracker.h - what the interposition layer tells the core.
 *
 * The preload layer calls these around each real CUDA call; the tracker turns
 * them into registry records, stack statistics and counters. The hot path
 * (tracker_alloc, tracker_take) captures and interns the stack first, then
 * takes the lock of one registry shard (the block's) only for table updates;
 * threads working on different addresses do not wait for each other.
 *
 * Rule from the native heap profilers: a block leaves the registry *before*
 * the real free runs (tracker_take), otherwise another thread may be handed
 * the same address and record it first. If the real free then fails, the
 * wrapper puts the record back (tracker_put_back). */
#ifndef CUMEMTRACE_TRACKER_H
#define CUMEMTRACE_TRACKER_H

#include <stdint.h>

#include "host.h"
#include "registry.h"
#include "ring.h"

#define MAX_APIS 128
#define MAX_CONTEXTS 255

struct allocation {
    uint64_t value;     /* address, or handle for VMM and arrays */
    uint64_t size;      /* bytes */
    uint64_t handle;    /* stream or pool it was allocated on, 0 if none */
    int device;         /* -1 if not known */
    int kind;           /* enum kind, optionally | BLOCK_FROM_RUNTIME */
    int api;            /* entry point index (host.h: api_names) */
    int context;        /* interned context, 0 if none */
};

/* Why an event could not be recorded (counted, and shown in reports). */
enum lost_reason {
    LOST_REENTRY,        /* a CUDA call made from inside the tracer */
    LOST_NO_MEMORY,      /* the tracer's own tables could not grow */
    LOST_UNRESOLVED,     /* a real function could not be found */
    LOST_UNKNOWN_FREE,   /* a free of something never seen allocated */
    LOST_MISSED_FREE,    /* an address handed out again while still recorded */
    LOST_UNWRAPPED,      /* a lookup returned the real function unwrapped */
    LOST_COUNT
};

struct failure {
    uint64_t size;
    int32_t device, kind, api, code, oom;
    uint32_t stack_id, time_ms;
    uint16_t thread;
};
#define FAILURE_RING 64

struct mark {
    char label[64];
    uint32_t time_ms;
    uint64_t sequence;         /* allocations made before the mark */
    uint64_t device_bytes;     /* device memory live at the mark, all devices */
    uint64_t self_time_ns;     /* our own time in CUDA calls so far (SELF_TIME) */
};
#define MARK_RING 256

struct thread_info {
    int tid;
    char name[16];
};

/* Settings read and tables made, once; any caller, any time (the
 * interposer, the public API, tests). */
void tracker_init(void);
/* The interposer, at its first event: lend the core what only it can do
 * (host.h), once, and start capturing stacks. */
void tracker_start(const struct host *lent);
int tracker_enabled(void);

/* Enter the tracer on this thread. 0 means it is already inside (a CUDA call
 * made by the tracer itself): the caller passes the call through untracked. */
int tracker_enter(void);
void tracker_leave(void);

void tracker_count_call(int api);
/* The calls and allocations per entry point, summed from every stripe. */
void tracker_api_totals(uint64_t calls[MAX_APIS], uint64_t allocations[MAX_APIS]);
void tracker_add_self_time(uint64_t ns);   /* CUMEMTRACE_SELF_TIME, from the wrappers */
uint64_t tracker_self_time_ns(void);
void tracker_alloc(const struct allocation *a);
int tracker_take(uint64_t value, int space, struct block *saved);
/* The same, only if the block carries `flag` (e.g. BLOCK_FROM_RUNTIME). */
int tracker_take_if(uint64_t value, int space, int flag, struct block *saved);
int tracker_device_of(uint64_t value, int space);   /* -1 if unknown */
void tracker_put_back(const struct block *saved);
void tracker_take_range(int space, uint64_t start, uint64_t size);
/* Returns the id of the failed allocation's stack (0: none, or not recorded). */
uint32_t tracker_failure(const struct allocation *a, int code, int oom);
/* PyTorch's retry of a reported OOM was seen (report/triggers.c). */
void tracker_oom_retried(int succeeded);
void tracker_context_gone(int context);
void tracker_lost(enum lost_reason reason);
void tracker_mark(const char *label);
int tracker_has_runtime_blocks(void);   /* any BLOCK_FROM_RUNTIME records live */

/* fork handling (pthread_atfork). */
void tracker_fork_prepare(void);
void tracker_fork_parent(void);
void tracker_fork_child(void);

/* For reports, growth samples and the crash dump: every registry shard's
 * lock, in order. While it is held the registry, the stack totals, the
 * counters and `tracker` below are still. */
void tracker_lock(void);
void tracker_unlock(void);
int tracker_trylock(void);     /* 1 if all taken (never waits); for the crash dump */
int tracker_inside(void);      /* this thread is inside the tracer */
struct tracker_state {
    uint64_t sequence;                     /* numbers handed out, in batches */
    uint64_t lost[LOST_COUNT];
    uint64_t api_failures[MAX_APIS];       /* calls and allocations: tracker_api_totals */
    struct failure failures[FAILURE_RING];
    uint64_t failures_total;
    uint64_t oom_retries_succeeded, oom_retries_failed;
    struct mark marks[MARK_RING];
    uint64_t marks_total;
    struct thread_info *threads;       /* index = thread number - 1 */
    uint32_t threads_used;
    uint64_t *handles;                 /* index = handle number - 1 */
    uint32_t handles_used;
    uint64_t start_ns;                 /* CLOCK_MONOTONIC at start */
    double start_unix;                 /* wall clock at start */
    uint64_t runtime_blocks;           /* live BLOCK_FROM_RUNTIME records */
    int traced;                        /* any CUDA event in this process */
};
extern struct tracker_state tracker;
uint32_t tracker_now_ms(void);

#endif
