/* tracker.c - the core's bookkeeping of CUDA memory events (see tracker.h).
 *
 * One mutex guards the registry, the stack table, the counters and the small
 * tables here. Work done under it is table updates only: stacks are captured
 * before it is taken, symbols are resolved only when a report is written. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "counters.h"
#include "crashdump.h"
#include "growth.h"
#include "log.h"
#include "names.h"
#include "python.h"
#include "report.h"
#include "signals.h"
#include "stacks.h"
#include "tracker.h"

#define MAX_THREADS 65535
#define MAX_HANDLES 65535

struct tracker_state tracker;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int initialized;
static pid_t exit_report_pid;

struct thread_state {
    uint16_t number;       /* 0 until this thread's first recorded event */
    uint8_t inside;        /* inside the tracer: CUDA calls pass through */
};
static __thread struct thread_state this_thread;

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

uint32_t tracker_now_ms(void)
{
    return (uint32_t)((monotonic_ns() - tracker.start_ns) / 1000000u);
}

static void reset_state(void)
{
    registry_reset();
    stacks_reset();
    counters_reset();
    growth_reset();
    const char *const *names = tracker.api_names;
    int count = tracker.api_count;
    int (*memory_info)(int, uint64_t *, uint64_t *) = tracker.memory_info;
    int (*pool_info)(int, uint64_t[4]) = tracker.pool_info;
    memset(&tracker, 0, sizeof(tracker));
    tracker.api_names = names;
    tracker.api_count = count;
    tracker.memory_info = memory_info;
    tracker.pool_info = pool_info;
    tracker.threads = pages_alloc(MAX_THREADS * sizeof(struct thread_info));
    tracker.handles = pages_alloc(MAX_HANDLES * sizeof(uint64_t));
    tracker.start_ns = monotonic_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tracker.start_unix = ts.tv_sec + ts.tv_nsec / 1e9;
}

static void init_once_fn(void)
{
    config_load();
    registry_init();
    stacks_init();
    reset_state();
    initialized = 1;
}

void tracker_init(void)
{
    pthread_once(&init_once, init_once_fn);
}

int tracker_enabled(void)
{
    tracker_init();
    return config.enabled;
}

/* The hot-path functions guard themselves: a CUDA call made while this
 * thread is inside the tracker (from a signal handler that interrupted it, or
 * from code the tracker calls) passes through, counted, instead of taking the
 * lock a second time. */
static int enter(void)
{
    if (this_thread.inside) {
        tracker_lost(LOST_REENTRY);
        return 0;
    }
    this_thread.inside = 1;
    return 1;
}

static void leave(void)
{
    this_thread.inside = 0;
}

int tracker_enter(void)
{
    if (this_thread.inside)
        return 0;
    this_thread.inside = 1;
    return 1;
}

void tracker_leave(void)
{
    this_thread.inside = 0;
}

void tracker_lock(void)
{
    pthread_mutex_lock(&lock);
}

void tracker_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

int tracker_trylock(void)
{
    return pthread_mutex_trylock(&lock) == 0;
}

int tracker_inside(void)
{
    return this_thread.inside;
}

/* Called with the lock held: this thread's number, registering it on first use. */
static uint16_t thread_number(void)
{
    if (this_thread.number == 0 && tracker.threads && tracker.threads_used < MAX_THREADS) {
        struct thread_info *info = &tracker.threads[tracker.threads_used];
        info->tid = (int)syscall(SYS_gettid);
        pthread_getname_np(pthread_self(), info->name, sizeof(info->name));
        this_thread.number = (uint16_t)++tracker.threads_used;
    }
    return this_thread.number;
}

/* Called with the lock held: a small number for a stream or pool handle. */
static uint16_t handle_number(uint64_t handle)
{
    if (handle == 0 || !tracker.handles)
        return 0;
    for (uint32_t i = tracker.handles_used; i > 0; i--)
        if (tracker.handles[i - 1] == handle)
            return (uint16_t)i;
    if (tracker.handles_used >= MAX_HANDLES)
        return 0;
    tracker.handles[tracker.handles_used++] = handle;
    return (uint16_t)tracker.handles_used;
}

void tracker_count_call(int api)
{
    if (api >= 0 && api < MAX_APIS)
        __atomic_fetch_add(&tracker.api_calls[api], 1, __ATOMIC_RELAXED);
}

void tracker_lost(enum lost_reason reason)
{
    __atomic_fetch_add(&tracker.lost[reason], 1, __ATOMIC_RELAXED);
}

static void stats_on_alloc(struct stack_stats *s, uint64_t size)
{
    s->live_bytes += size;
    s->live_blocks++;
    s->allocations++;
    s->allocated_bytes += size;
    if (s->live_bytes > s->peak_live_bytes)
        s->peak_live_bytes = s->live_bytes;
}

static void stats_on_free(struct stack_stats *s, uint64_t size, int implicit)
{
    s->live_bytes -= size;
    s->live_blocks--;
    if (implicit) {
        s->implicit_bytes += size;
        s->implicit_blocks++;
    }
}

/* Unlink a block and account for its end. Lock held. */
static void forget_block(struct block *b, int implicit)
{
    struct stack *s = stack_get(b->stack_id);
    registry_unlink(b);
    counters_on_free(b->device, block_kind(b), b->size, implicit);
    if (s)
        stats_on_free(&s->stats, b->size, implicit);
    if (b->kind & BLOCK_FROM_RUNTIME)
        tracker.runtime_blocks--;
}

/* ---- out-of-memory reports ---------------------------------------------
 *
 * At an OOM the report is collected at once (the program may die next) and
 * written with the retry "pending". PyTorch answers an OOM by freeing its
 * cache and asking again for the same size on the same thread: when that
 * retry succeeds or fails, the same report (the picture of the OOM moment)
 * is written again with the outcome. */
static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int active;
    uint16_t thread;
    uint64_t size;
    struct report *report;
    char template_[sizeof(config.output) + 32];
} pending_oom;
static int ooms_reported;

static void finish_pending_oom(int outcome)
{
    pthread_mutex_lock(&oom_lock);
    if (pending_oom.active) {
        pending_oom.active = 0;
        pending_oom.report->event.retry = outcome;
        report_emit(pending_oom.report, pending_oom.template_, 0);
        report_delete(pending_oom.report);
        pending_oom.report = NULL;
    }
    pthread_mutex_unlock(&oom_lock);
}

/* Called on the allocating thread, inside the tracer, without the lock. */
static void check_retry(uint64_t size, int succeeded)
{
    if (!__atomic_load_n(&pending_oom.active, __ATOMIC_ACQUIRE) ||
        pending_oom.thread != this_thread.number || pending_oom.size != size)
        return;
    pthread_mutex_lock(&lock);
    if (succeeded)
        tracker.oom_retries_succeeded++;
    else
        tracker.oom_retries_failed++;
    pthread_mutex_unlock(&lock);
    finish_pending_oom(succeeded ? RETRY_SUCCEEDED : RETRY_FAILED);
}

static void report_oom(const struct allocation *a, int code, uint32_t stack_id)
{
    if (config.oom == OOM_OFF || (config.oom == OOM_FIRST && ooms_reported > 0))
        return;
    finish_pending_oom(RETRY_NONE);     /* an earlier one never saw its retry */
    int number = ++ooms_reported;
    struct report *r = report_new("oom");
    if (!r)
        return;
    struct report_event *e = &r->event;
    e->type = EVENT_OOM;
    e->size = a->size;
    e->api = a->api;
    e->kind = a->kind & BLOCK_KIND_MASK;
    e->device = a->device;
    e->code = code;
    e->stack_id = stack_id;
    e->retry = RETRY_PENDING;
    if (a->device >= 0 && tracker.memory_info &&
        tracker.memory_info(a->device, &e->free, &e->total) == 0)
        e->has_memory_info = 1;

    pthread_mutex_lock(&oom_lock);
    if (config.oom == OOM_FIRST)
        snprintf(pending_oom.template_, sizeof(pending_oom.template_), "%s-oom", config.output);
    else
        snprintf(pending_oom.template_, sizeof(pending_oom.template_), "%s-oom-%d",
                 config.output, number);
    report_emit(r, pending_oom.template_, 1);
    pending_oom.report = r;
    pending_oom.thread = this_thread.number;
    pending_oom.size = a->size;
    __atomic_store_n(&pending_oom.active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&oom_lock);
}

/* Registered at the first CUDA event, after the CUDA libraries set up their
 * own exit handlers: ours then runs before theirs tear the contexts down,
 * while the driver can still answer cuMemGetInfo. */
static void ensure_exit_handler(void)
{
    static int registered;
    if (!__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL))
        atexit(tracker_report_at_exit);
}

void tracker_alloc(const struct allocation *a)
{
    if (!enter())
        return;
    uintptr_t frames[CONFIG_MAX_DEPTH];
    int depth = 0;
    if (config.depth > 0 && a->size >= config.min_size)
        depth = python_capture(frames, stack_capture(frames, config.depth), CONFIG_MAX_DEPTH);
    uint64_t hash = stack_hash(frames, depth);
    int kind = a->kind & BLOCK_KIND_MASK;
    uint64_t key = block_key(a->value, kind_space(kind));
    uint32_t now = tracker_now_ms();
    check_retry(a->size, 1);

    pthread_mutex_lock(&lock);
    tracker.traced = 1;
    struct block *old = registry_find(key);
    if (old) {              /* we missed its free: the address was reused */
        forget_block(old, 0);
        registry_release(old);
        tracker.lost[LOST_MISSED_FREE]++;
    }
    struct block *b = registry_new(key);
    if (!b) {
        tracker.lost[LOST_NO_MEMORY]++;
        pthread_mutex_unlock(&lock);
        leave();
        return;
    }
    b->size = a->size;
    b->sequence = ++tracker.sequence;
    b->stack_id = stack_intern(frames, depth, hash);
    b->time_ms = now;
    b->handle = handle_number(a->handle);
    b->thread = thread_number();
    b->device = (int8_t)(a->device >= -1 && a->device < 127 ? a->device : -1);
    b->kind = (uint8_t)a->kind;
    b->api = (uint8_t)a->api;
    b->context = (uint8_t)a->context;
    if (registry_add(b) < 0) {
        registry_release(b);
        tracker.lost[LOST_NO_MEMORY]++;
        pthread_mutex_unlock(&lock);
        leave();
        return;
    }
    counters_on_alloc(b->device, kind, b->size);
    struct stack *s = stack_get(b->stack_id);
    if (s)
        stats_on_alloc(&s->stats, b->size);
    growth_tick(now);
    if (a->api >= 0 && a->api < MAX_APIS)
        tracker.api_allocations[a->api]++;
    if (b->kind & BLOCK_FROM_RUNTIME)
        tracker.runtime_blocks++;
    pthread_mutex_unlock(&lock);
    ensure_exit_handler();
    leave();
}

static int take(uint64_t value, int space, int flag, struct block *saved)
{
    if (!enter())
        return 0;
    uint64_t key = block_key(value, space);
    pthread_mutex_lock(&lock);
    struct block *b = registry_find(key);
    if (b && flag && !(b->kind & flag))
        b = NULL;
    else if (b) {
        *saved = *b;
        forget_block(b, 0);
        registry_release(b);
    } else if (!flag) {
        tracker.lost[LOST_UNKNOWN_FREE]++;
    }
    pthread_mutex_unlock(&lock);
    leave();
    return b != NULL;
}

int tracker_take(uint64_t value, int space, struct block *saved)
{
    return take(value, space, 0, saved);
}

int tracker_take_if(uint64_t value, int space, int flag, struct block *saved)
{
    return take(value, space, flag, saved);
}

int tracker_device_of(uint64_t value, int space)
{
    if (!enter())
        return -1;
    pthread_mutex_lock(&lock);
    struct block *b = registry_find(block_key(value, space));
    int device = b ? b->device : -1;
    pthread_mutex_unlock(&lock);
    leave();
    return device;
}

void tracker_put_back(const struct block *saved)
{
    if (!enter())
        return;
    pthread_mutex_lock(&lock);
    struct block *b = registry_find(saved->key) ? NULL : registry_new(saved->key);
    if (b) {
        *b = *saved;
        if (registry_add(b) < 0) {
            registry_release(b);
            b = NULL;
        }
    }
    if (b) {
        /* Undo the free: the block was never gone. */
        counters_on_alloc(b->device, block_kind(b), b->size);
        int slot = counters_slot(b->device);
        struct counters *c = &counter_table.sets[slot][block_kind(b)];
        c->bytes_allocated -= b->size;
        c->blocks_allocated--;
        c->bytes_freed -= b->size;
        c->blocks_freed--;
        if (kind_uses_device_memory(block_kind(b))) {
            c = &counter_table.sets[slot][COUNTER_DEVICE_MEMORY];
            c->bytes_allocated -= b->size;
            c->blocks_allocated--;
            c->bytes_freed -= b->size;
            c->blocks_freed--;
        }
        struct stack *s = stack_get(b->stack_id);
        if (s) {
            s->stats.live_bytes += b->size;
            s->stats.live_blocks++;
        }
        if (b->kind & BLOCK_FROM_RUNTIME)
            tracker.runtime_blocks++;
    }
    pthread_mutex_unlock(&lock);
    leave();
}

void tracker_take_range(int space, uint64_t start, uint64_t size)
{
    uint64_t end = start + size;
    if (!enter())
        return;
    pthread_mutex_lock(&lock);
    uint64_t at = start;
    while (at < end) {
        struct block *b = registry_find(block_key(at, space));
        if (!b)
            break;
        at += b->size ? b->size : 1;
        forget_block(b, 0);
        registry_release(b);
    }
    if (at < end) {         /* not back to back: look at every block */
        struct registry_cursor cursor;
        for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
            uint64_t value = block_value(b);
            if (kind_space(block_kind(b)) == space && value >= at && value < end) {
                forget_block(b, 0);
                registry_release(b);
            }
        }
    }
    pthread_mutex_unlock(&lock);
    leave();
}

void tracker_failure(const struct allocation *a, int code, int oom)
{
    if (!enter())
        return;
    uintptr_t frames[CONFIG_MAX_DEPTH];
    int depth = config.depth > 0
                    ? python_capture(frames, stack_capture(frames, config.depth), CONFIG_MAX_DEPTH)
                    : 0;
    uint64_t hash = stack_hash(frames, depth);
    int kind = a->kind & BLOCK_KIND_MASK;

    pthread_mutex_lock(&lock);
    tracker.traced = 1;
    counters_on_failure(a->device, kind, oom);
    if (a->api >= 0 && a->api < MAX_APIS)
        tracker.api_failures[a->api]++;
    struct failure *f = &tracker.failures[tracker.failures_total++ % FAILURE_RING];
    f->size = a->size;
    f->device = a->device;
    f->kind = kind;
    f->api = a->api;
    f->code = code;
    f->oom = oom;
    f->stack_id = stack_intern(frames, depth, hash);
    f->time_ms = tracker_now_ms();
    f->thread = thread_number();
    uint32_t stack_id = f->stack_id;
    pthread_mutex_unlock(&lock);
    ensure_exit_handler();
    check_retry(a->size, 0);
    if (oom)
        report_oom(a, code, stack_id);
    leave();
}

void tracker_context_gone(int context)
{
    if (context <= 0 || !enter())
        return;
    pthread_mutex_lock(&lock);
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
        if (b->context == context && kind_freed_by_context(block_kind(b))) {
            forget_block(b, 1);
            registry_release(b);
        }
    }
    pthread_mutex_unlock(&lock);
    leave();
}

void tracker_mark(const char *label)
{
    if (!enter())
        return;
    pthread_mutex_lock(&lock);
    struct mark *m = &tracker.marks[tracker.marks_total++ % MARK_RING];
    snprintf(m->label, sizeof(m->label), "%s", label);
    m->time_ms = tracker_now_ms();
    m->sequence = tracker.sequence;
    m->device_bytes = 0;
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        m->device_bytes += counter_table.sets[slot][COUNTER_DEVICE_MEMORY].bytes_current;
    growth_sample(m->time_ms, 1);
    pthread_mutex_unlock(&lock);
    leave();
}

int tracker_has_runtime_blocks(void)
{
    return __atomic_load_n(&tracker.runtime_blocks, __ATOMIC_RELAXED) != 0;
}

struct block *tracker_find_locked(uint64_t value, int space)
{
    return registry_find(block_key(value, space));
}

void tracker_set_api_names(const char *const *names, int count)
{
    tracker.api_names = names;
    tracker.api_count = count < MAX_APIS ? count : MAX_APIS;
}

void tracker_set_memory_info(int (*fn)(int device, uint64_t *free, uint64_t *total))
{
    tracker.memory_info = fn;
}

static int (*call_in_progress)(void);

void tracker_set_pool_info(int (*fn)(int device, uint64_t figures[4]))
{
    tracker.pool_info = fn;
}

void tracker_set_call_in_progress(int (*fn)(void))
{
    call_in_progress = fn;
}

void tracker_report(const char *reason)
{
    static int once;
    if (!initialized)
        return;
    /* exit() called from a signal handler that interrupted this thread inside
     * the tracer: the lock may be ours already; waiting for it would hang. */
    if (!tracker_enter()) {
        log_once(&once, "exit while inside the tracer (from a signal handler?); no %s report",
                 reason);
        return;
    }
    report_write_to(reason, config.output, strcmp(reason, "exit") == 0);
    tracker_leave();
}

/* The exit report, once per process: a forked child that inherited the
 * handler writes its own only if it made CUDA calls itself. */
void tracker_report_at_exit(void)
{
    if (!initialized || !config.enabled || !tracker.traced)
        return;
    pid_t pid = getpid();
    if (__atomic_exchange_n(&exit_report_pid, pid, __ATOMIC_ACQ_REL) == pid)
        return;
    /* exit() called from a signal handler that interrupted this thread
     * inside a CUDA call or inside the tracer: the CUDA libraries, malloc or
     * our own lock may be held by the very code that was interrupted, so the
     * full report could hang. Write the async-signal-safe dump instead. */
    if ((call_in_progress && call_in_progress()) || tracker_inside()) {
        crashdump_write(0);
        return;
    }
    signals_drain();
    tracker_report("exit");
}

void tracker_fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void tracker_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

/* The child has one thread and no CUDA context: it starts with empty tables
 * and reports under its own pid, only if it makes CUDA calls of its own. */
void tracker_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    if (initialized)
        reset_state();
    this_thread.number = 0;
}
