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

#include "counters.h"
#include "host.h"
#include "registry.h"
#include "ring.h"
#include "run_facts.h"

#define MAX_CONTEXTS 255

struct allocation {
    uint64_t value;  /* address, or handle for VMM and arrays */
    uint64_t size;   /* bytes */
    uint64_t handle; /* stream or pool it was allocated on, 0 if none */
    int device;      /* -1 if not known */
    int kind;        /* enum kind, optionally | BLOCK_FROM_RUNTIME */
    int api;         /* entry point index (host.h: api_names) */
    int context;     /* interned context, 0 if none */
    /* A framework's block: the code address of the operation this thread
     * runs for it, 0 if none; asked only where it is needed. NULL: none. */
    uint64_t (*operation)(void);
};

struct failure {
    uint64_t size;
    int32_t device, kind, api, code, oom;
    uint32_t stack_id, time_ms;
    uint32_t oom_number; /* which of the process's OOMs it is part of; 0 if none */
    uint16_t thread;
};

struct mark {
    char label[64];
    uint32_t time_ms;
    uint64_t sequence;     /* allocations made before the mark */
    uint64_t device_bytes; /* device memory live at the mark, all devices */
    uint64_t self_time_ns; /* our own time in CUDA calls so far (SELF_TIME) */
};

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
/* Instead of tracker_start, in a copy of the tracer that another copy loaded
 * first traces for: off (config.enabled 0) without reading the settings,
 * which the other reads and speaks of. */
void tracker_stand_aside(void);

/* Enter the tracer on this thread. 0 means it is already inside (a CUDA call
 * made by the tracer itself): the caller passes the call through untracked. */
int tracker_enter(void);
void tracker_leave(void);

void tracker_count_call(int api);
/* The calls and allocations per entry point, summed from every stripe. */
void tracker_api_totals(uint64_t calls[MAX_APIS], uint64_t allocations[MAX_APIS]);
void tracker_add_self_time(uint64_t ns); /* CUMEMTRACE_SELF_TIME, from the wrappers */
uint64_t tracker_self_time_ns(void);
/* Returns the block's allocation number (its `sequence`), 0 if not recorded. */
uint64_t tracker_alloc(const struct allocation *a);
int tracker_take(uint64_t value, int space, struct block *saved);
/* The same, only if the block carries `flag` (e.g. BLOCK_FROM_RUNTIME). */
int tracker_take_if(uint64_t value, int space, int flag, struct block *saved);
int tracker_device_of(uint64_t value, int space); /* -1 if unknown */
void tracker_put_back(const struct block *saved);
/* The final verdict of an OOM report, kept for the reports after it
 * (run_oom_verdict). */
struct oom_verdict {
    char verdict[24]; /* "" while no OOM was reported */
    char text[OOM_VERDICT_TEXT];
    uint64_t size;
    uint32_t stack_id, time_ms;
};
void tracker_lost(enum lost_reason reason);
int tracker_has_runtime_blocks(void); /* any BLOCK_FROM_RUNTIME records live */

/* ---- frameworks' caches ----------------------------------------------------
 *
 * PyTorch, CuPy and JAX take memory from the driver in large segments and
 * carve their tensors, blocks and arrays out of them. Where a framework tells
 * us about its blocks, each block is a record of its own (a kind for which
 * kind_in_cache() holds, key space SPACE_FRAMEWORK), inside a driver
 * allocation that is recorded too: its bytes count once, as the driver's.
 * The driver allocations that are a cache's segments are marked by their
 * stacks (STACK_CACHE_SEGMENT).
 *
 * The seam: src/frameworks says a block in a framework's terms
 * (cache_blocks.h) and calls the functions below; the recorder never calls
 * it back. Those that take a block take it as an allocation of a cache's
 * kind (kind_in_cache holds, its api the cache's); any thread may call them
 * at any time, and each enters and leaves the tracer itself (a call made
 * from inside it is counted lost, LOST_REENTRY). */

/* Record block `a` with the stack frames[0..depth), innermost first (tagged
 * Python frames, python_frame_at), known rather than captured on this
 * thread, as tracker_alloc would (no frames kept below CUMEMTRACE_MIN_SIZE
 * or with CUMEMTRACE_DEPTH=0). Its allocation number, 0 if not recorded. */
uint64_t tracker_alloc_with_frames(const struct allocation *a, const uintptr_t *frames, int depth);
/* A block of `cache_kind` (one for which kind_in_cache holds: the caller
 * checks) at `value`, entered in the registry later (pending.h), for a
 * framework whose blocks come and go by the hundred a step (PyTorch's
 * tensors): this thread's stack is taken now, the record is made by the
 * next tracker_apply, report, mark or tracker_lock, in the order the events
 * happened, keyed in SPACE_FRAMEWORK, on the cache's entry point
 * (host.cache_api). `stream` is its handle, `operation` as struct
 * allocation's. No allocation number. Fields, not a struct allocation:
 * this is every tensor's path on the framework's thread. */
void tracker_defer_alloc(int cache_kind, int device, uint64_t value, uint64_t size, uint64_t stream,
                         uint64_t (*operation)(void));
/* The end of the block at `value` in SPACE_FRAMEWORK, queued behind the
 * events before it. A free of a block that tracker_alloc recorded must not
 * be deferred. Both keep errno: a framework calls them from inside its
 * allocator, around which the program may be reading it. */
void tracker_defer_free(uint64_t value);
/* Enter the pending framework events (the tracer's own thread calls it
 * every few milliseconds), and note whether a growth sample is due, for
 * the next framework allocation to take: whether there were any events. */
int tracker_apply(void);
/* How many framework events wait to be entered now. */
uint64_t tracker_queued(void);
/* End the record at `value` in `space` only if its allocation number is
 * `number`: whether it did. A record not there is no lost event (a block
 * said late may have ended already). */
int tracker_take_numbered(uint64_t value, int space, uint64_t number);
/* A sweep records a cache's blocks all at once on this thread (JAX's live
 * arrays) from on = 1 to on = 0: no growth sample is taken in its middle,
 * where it would see some blocks of this moment and some of the last. At
 * its end one is taken if due and the sweep recorded a block: as samples
 * are taken at allocations, never while a program only waits. */
void tracker_cache_sweep(int on);

/* While a framework's allocator runs on this thread (`cache_kind`, or 0 when
 * it returns), every driver allocation it makes is a segment of its cache.
 * Returns the kind set before, to be put back (allocators may nest). */
int tracker_cache_allocating(int cache_kind);

struct cache_state {
    int view;          /* enum cache_view */
    uint32_t since_ms; /* when blocks began to be recorded */
    char why[160];
};

/* A stack's figures when the program ended (run_program_end). */
struct end_totals {
    uint64_t bytes, blocks; /* a stack's live totals when the program ended */
    int8_t device;          /* of its live blocks then; -1 when they were on several */
    uint8_t kind, api;      /* of one of them */
};

/* fork handling (pthread_atfork). */
void tracker_fork_prepare(void);
void tracker_fork_parent(void);
void tracker_fork_child(void);

/* For reports, growth samples and the crash dump: every registry shard's
 * lock, in order. While it is held the registry, the stack totals, the
 * counters and `tracker` below are still. */
void tracker_lock(void);
void tracker_unlock(void);
int tracker_trylock(void); /* 1 if all taken (never waits); for the crash dump */
int tracker_inside(void);  /* this thread is inside the tracer */
struct tracker_state {
    uint64_t sequence; /* numbers handed out, in batches */
    uint64_t lost[LOST_COUNT];
    uint64_t api_failures[MAX_APIS]; /* calls and allocations: tracker_api_totals */
    struct failure failures[FAILURE_RING];
    uint64_t failures_total;
    uint32_t ooms_total; /* OOMs as the program met them: oom_number */
    uint64_t oom_retries_succeeded, oom_retries_failed;
    struct oom_verdict oom; /* the last OOM report's final verdict */
    struct mark marks[MARK_RING];
    uint64_t marks_total;
    struct thread_info *threads; /* index = thread number - 1 */
    uint32_t threads_used;
    uint64_t *handles; /* index = handle number - 1 */
    uint32_t handles_used;
    uint64_t start_ns;                      /* CLOCK_MONOTONIC at start */
    double start_unix;                      /* wall clock at start */
    uint64_t runtime_blocks;                /* live BLOCK_FROM_RUNTIME records */
    int traced;                             /* any CUDA event in this process */
    struct cache_state caches[CACHE_KINDS]; /* index = kind - KIND_TORCH_TENSOR */
    int program_ended;
    uint32_t program_end_ms;
    struct end_totals *end_totals;                    /* index = stack id - 1 */
    uint32_t end_stacks;                              /* stacks when the program ended */
    uint64_t end_device_bytes[COUNTER_NO_DEVICE + 1]; /* device memory live then, by slot */
    uint64_t end_timeline;                            /* timeline events recorded before it */
    int pid; /* the process this describes (not a vfork child) */
};
extern struct tracker_state tracker;
uint32_t tracker_now_ms(void);

#endif
