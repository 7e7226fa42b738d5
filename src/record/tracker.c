/* tracker.c - the core's bookkeeping of CUDA memory events (see tracker.h).
 *
 * Locking. There is no process-wide lock on the hot path:
 * - A block's record is guarded by the lock of its registry shard (64 shards
 *   by a hash of the address): tracker_alloc and take hold one shard lock,
 *   for table updates only. Stacks are captured and interned before it is
 *   taken (the stack table is read without a lock, stacks.c); symbols are
 *   resolved only when a report is written.
 * - Counters (counters.c), per-stack totals (stack_totals.c) and the figures
 *   in `tracker` that the hot path changes are changed only while holding a
 *   shard lock (or the queue's lock, below, for a queued block that never
 *   enters the registry): in per-thread stripes where they can be put together
 *   later (pending changes of current bytes and of a stack's totals, freed
 *   totals, calls per API, batches of allocation numbers), atomically where
 *   every thread must see one figure (the peaks, and the stripes' overflow).
 * - tracker_lock() takes the queue's lock and every shard lock, in order:
 *   with it held, nothing above moves. Reports, growth samples, marks, failures,
 *   context teardown and unmaps of address ranges take it; the crash dump
 *   tries it.
 * - A framework's tensors, hundreds a step, are not entered by the thread
 *   that makes them: it takes the stack and queues the event (pending.h,
 *   the framework event queue). The queue's lock (pending_lock) makes its
 *   holder the one reader, who enters queued events in order: the tracer's
 *   thread (tracker_apply), a thread finding the queue long, or
 *   tracker_lock() before it takes the shards, so whoever holds that lock
 *   sees them all, a chunk at a time (a block that ends within its chunk
 *   never enters the registry: apply_chunk_event).
 * - tables_lock guards adding to the thread and handle tables; it is taken
 *   inside a shard lock, and only for a thread's first event or a new handle.
 * Lock order: the queue's lock, shards (in index order), then the stack
 * table's insert lock or tables_lock. Nothing here decides about reports: the
 * interposer tells runtime/triggers.c what happened once the event is
 * recorded. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "clock.h"
#include "config.h"
#include "counters.h"
#include "growth.h"
#include "host.h"
#include "hot_path.h"
#include "kinds.h"
#include "log.h"
#include "pending.h"
#include "python.h"
#include "stack_totals.h"
#include "stacks.h"
#include "stripes.h"
#include "timeline.h"
#include "tracker.h"
#include "tracker_thread.h"

#define MAX_THREADS 65535
#define MAX_HANDLES 65535

struct tracker_state tracker;

static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int initialized;

struct thread_state {
    uint16_t number;                      /* 0 until this thread's first recorded event */
    uint8_t inside;                       /* inside the tracer: CUDA calls pass through */
    uint8_t cache_allocating;             /* tracker_cache_allocating: a cache kind, or 0 */
    uint8_t sweeping;                     /* tracker_cache_sweep: no growth sample until it ends */
    uint8_t applying;                     /* enters the queue's events: counts in STRIPE_APPLY */
    uint8_t traced;                       /* has set tracker.traced: note_traced */
    uint32_t physical_stack;              /* of this thread's last cuMemCreate, until a
                                      * framework event: segments_taken */
    uint64_t sequence_next, sequence_end; /* this thread's batch of numbers */
};
static __thread struct thread_state this_thread;
enum { SWEEP_RUNNING = 1, SWEEP_RECORDED = 2 }; /* this_thread.sweeping */

/* Calls and allocations per entry point: every event counts one, so they are
 * kept in stripes (stripes.h) and summed when read (tracker_api_totals). A
 * thread that owns a stripe adds to it with plain stores (one writer, no lock
 * prefix); the others share stripe 0 and add atomically. */
struct api_stripe {
    _Alignas(64) uint64_t calls[MAX_APIS];
    uint64_t allocations[MAX_APIS];
    uint64_t self_time_ns; /* CUMEMTRACE_SELF_TIME: our time in wrappers */
};
static struct api_stripe api_stripes[STRIPE_COUNT];

/* Set once a framework's block is recorded other than through the queue
 * (CuPy's, JAX's: record, tracker_put_back), never cleared but in a forked
 * child. Until then the only records at a framework's addresses are the
 * queue's own: an address that a chunk has just freed holds none, so an
 * allocation there needs no look for a missed free, nor its shard. */
static int framework_recorded;

/* The stripe this thread counts in now: the queue's while it enters the
 * framework events (one thread at a time reads the queue, so one writer),
 * else its own, if its number has one (STRIPE_APPLY is no thread's). The
 * tracer's own thread, which enters most of them, has no number: without
 * that stripe, every count it made was an atomic add to a shared line. */
static int stripe_number(void)
{
    if (this_thread.applying)
        return STRIPE_APPLY;
    return this_thread.number < STRIPE_APPLY ? this_thread.number : 0;
}

static void add_to_stripe(uint64_t *counter, uint64_t amount)
{
    if (stripe_owned(stripe_number()))
        __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + amount,
                         __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(counter, amount, __ATOMIC_RELAXED);
}

static struct api_stripe *own_stripe(void)
{
    int number = stripe_number();
    return &api_stripes[stripe_owned(number) ? number : 0];
}

static void count_in_stripe(int api, int allocation)
{
    struct api_stripe *stripe = own_stripe();
    add_to_stripe(allocation ? &stripe->allocations[api] : &stripe->calls[api], 1);
}

uint32_t tracker_now_ms(void)
{
    return (uint32_t)((monotonic_ns() - tracker.start_ns) / 1000000u);
}

/* The program's work, as the growth clock counts it (growth.h): the
 * framework events claimed (pending.h numbers them in the order they were
 * made) and the blocks recorded at the driver. */
static uint64_t driver_events;

static void reset_state(void)
{
    memset(api_stripes, 0, sizeof(api_stripes));
    registry_init();
    stack_reset();
    stack_totals_reset();
    counters_reset();
    growth_reset();
    driver_events = 0;
    memset(&tracker, 0, sizeof(tracker));
    tracker.threads = pages_alloc(MAX_THREADS * sizeof(struct thread_info));
    tracker.handles = pages_alloc(MAX_HANDLES * sizeof(uint64_t));
    tracker.start_ns = monotonic_ns();
    tracker.pid = (int)getpid();
    timeline_reset(tracker.start_ns);
    pending_reset();
    framework_recorded = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tracker.start_unix = ts.tv_sec + ts.tv_nsec / 1e9;
}

static void init_once_fn(void)
{
    log_once_per_line(1); /* what the check at load said is not said again */
    config_load();
    log_once_per_line(0);
    reset_state();
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

/* Every wrapper asks, several times an event: once set up, a load, not a
 * pthread_once call. */
void tracker_init(void)
{
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE))
        pthread_once(&init_once, init_once_fn);
}

static void stand_aside_fn(void)
{
    config.enabled = 0;
    reset_state();
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
}

void tracker_stand_aside(void)
{
    pthread_once(&init_once, stand_aside_fn);
}

void tracker_start(const struct host *lent)
{
    host = *lent;
    tracker_init();
    stack_init(host.lookup);
}

int tracker_enabled(void)
{
    tracker_init();
    return config.enabled;
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

/* The recording functions guard themselves: a CUDA call made while this
 * thread is inside the tracker (from a signal handler that interrupted it, or
 * from code the tracker calls) passes through, counted as lost, instead of
 * taking the lock a second time. */
static int enter_to_record(void)
{
    if (tracker_enter())
        return 1;
    tracker_lost(LOST_REENTRY);
    return 0;
}

int tracker_enter_to_record(void)
{
    return enter_to_record();
}

static void enter_pending(void);

/* With every shard held, the threads' pending stack totals are still: they
 * are moved into the stacks, so whoever holds the lock reads exact totals.
 * The framework events made before it are entered first, and the queue's
 * lock is kept: the end of a block that never entered the registry is
 * counted under the queue's lock alone (pass_free), so no figure moves
 * under this lock. */
void tracker_lock(void)
{
    pending_lock();
    enter_pending();
    registry_lock_all();
    stack_totals_flush();
}

void tracker_unlock(void)
{
    registry_unlock_all();
    pending_unlock();
}

/* From the crash dump's signal handler: tries, never waits. */
int tracker_trylock(void)
{
    if (!pending_trylock())
        return 0;
    enter_pending();
    if (!registry_trylock_all()) {
        pending_unlock();
        return 0;
    }
    stack_totals_flush();
    return 1;
}

int tracker_inside(void)
{
    return this_thread.inside;
}

/* Called with a shard lock or the queue's lock held: this thread's number,
 * registering it on first use. The tables only grow, and only with one of
 * those and tables_lock held, so they are still while tracker_lock() (which
 * holds all of them) is held. */
static uint16_t thread_number(void)
{
    if (this_thread.number != 0 || !tracker.threads)
        return this_thread.number;
    pthread_mutex_lock(&tables_lock);
    uint32_t used = tracker.threads_used;
    if (used < MAX_THREADS) {
        struct thread_info *info = &tracker.threads[used];
        info->tid = (int)syscall(SYS_gettid);
        pthread_getname_np(pthread_self(), info->name, sizeof(info->name));
        this_thread.number = (uint16_t)(used + 1);
        __atomic_store_n(&tracker.threads_used, used + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tables_lock);
    return this_thread.number;
}

uint16_t tracker_thread_number(void)
{
    return thread_number();
}

static uint16_t find_handle(uint64_t handle, uint32_t used)
{
    for (uint32_t i = used; i > 0; i--)
        if (tracker.handles[i - 1] == handle)
            return (uint16_t)i;
    return 0;
}

/* Called with a shard lock or the queue's lock held (thread_number says why): a
 * small number for a stream or pool handle.
 * Handles once added never change: a known one is found without tables_lock. */
static uint16_t handle_number(uint64_t handle)
{
    if (handle == 0 || !tracker.handles)
        return 0;
    uint16_t number = find_handle(handle, __atomic_load_n(&tracker.handles_used, __ATOMIC_ACQUIRE));
    if (number)
        return number;
    pthread_mutex_lock(&tables_lock);
    uint32_t used = tracker.handles_used;
    number = find_handle(handle, used);
    if (!number && used < MAX_HANDLES) {
        tracker.handles[used] = handle;
        number = (uint16_t)(used + 1);
        __atomic_store_n(&tracker.handles_used, used + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tables_lock);
    return number;
}

static void count(uint64_t *counter, int64_t amount)
{
    __atomic_fetch_add(counter, (uint64_t)amount, __ATOMIC_RELAXED);
}

/* Looked up at every event on this thread's own line, and on the shared
 * one only at its first: a tensor's event touches one line fewer.
 * tracker.traced is cleared only before any event (reset_state) and in a
 * forked child, whose one thread's flag is cleared with it. */
static void note_traced(void)
{
    if (this_thread.traced)
        return;
    this_thread.traced = 1;
    if (!__atomic_load_n(&tracker.traced, __ATOMIC_RELAXED))
        __atomic_store_n(&tracker.traced, 1, __ATOMIC_RELAXED);
}

void tracker_note_traced(void)
{
    note_traced();
}

void tracker_count_call(int api)
{
    if (api >= 0 && api < MAX_APIS)
        count_in_stripe(api, 0);
}

void tracker_add_self_time(uint64_t ns)
{
    add_to_stripe(&own_stripe()->self_time_ns, ns);
}

uint64_t tracker_self_time_ns(void)
{
    uint64_t total = 0;
    for (int i = 0; i < STRIPE_COUNT; i++)
        total += __atomic_load_n(&api_stripes[i].self_time_ns, __ATOMIC_RELAXED);
    return total;
}

void tracker_api_totals(uint64_t calls[MAX_APIS], uint64_t allocations[MAX_APIS])
{
    for (int api = 0; api < MAX_APIS; api++) {
        calls[api] = allocations[api] = 0;
        for (int i = 0; i < STRIPE_COUNT; i++) {
            calls[api] += __atomic_load_n(&api_stripes[i].calls[api], __ATOMIC_RELAXED);
            allocations[api] += __atomic_load_n(&api_stripes[i].allocations[api], __ATOMIC_RELAXED);
        }
    }
}

void tracker_lost(enum lost_reason reason)
{
    __atomic_fetch_add(&tracker.lost[reason], 1, __ATOMIC_RELAXED);
}

/* Account for the end of block `b`, whether or not it is in the registry.
 * Its shard's lock held, or, for a queued block never entered, the queue's
 * lock. */
static void account_free(const struct block *b, int implicit)
{
    struct stack_record *s = stack_get(b->stack_id);
    counters_on_free(stripe_number(), b->device, block_kind(b), b->size, implicit);
    timeline_record(implicit ? TIMELINE_FREE_IMPLICIT : TIMELINE_FREE, block_value(b), b->size,
                    b->device, block_kind(b), b->api, b->stack_id);
    if (s)
        stack_totals_free(stripe_number(), s, b->stack_id, b->size, implicit);
    if (b->kind & BLOCK_FROM_RUNTIME)
        count(&tracker.runtime_blocks, -1);
}

/* Unlink a block and account for its end. Its shard's lock held. */
static void forget_block(struct block *b, int implicit)
{
    registry_unlink(b);
    account_free(b, implicit);
}

void tracker_forget_locked(struct block *b, int implicit)
{
    forget_block(b, implicit);
    registry_release(b);
}

static uint64_t work_done(void)
{
    return pending_claimed() + __atomic_load_n(&driver_events, __ATOMIC_RELAXED);
}

/* Observations of the stacks' growth need every shard: taken here, with no
 * shard lock held, by the thread whose event made one due (growth_tick
 * checks again), so that it falls at the same event on every run. */
static void sample_growth_if_due(uint64_t work)
{
    if (!growth_due(work))
        return;
    tracker_lock();
    growth_tick(work, tracker_now_ms());
    tracker_unlock();
}

/* Allocation numbers, taken from the shared count SEQUENCE_BATCH at a time:
 * one shared write per batch, not per allocation. So they are unique and
 * increase on each thread; across threads they follow the order of the
 * allocations to within a batch. */
#define SEQUENCE_BATCH 64

static uint64_t next_sequence(void)
{
    if (this_thread.sequence_next == this_thread.sequence_end) {
        uint64_t start = __atomic_fetch_add(&tracker.sequence, SEQUENCE_BATCH, __ATOMIC_RELAXED);
        this_thread.sequence_next = start + 1;
        this_thread.sequence_end = start + 1 + SEQUENCE_BATCH;
    }
    return this_thread.sequence_next++;
}

uint64_t tracker_thread_allocations(void)
{
    return this_thread.sequence_next;
}

/* A new record's fields, entered at `time_ms`. Its shard's lock held. */
static void fill_block(struct block *b, const struct pending_event *e, uint32_t time_ms)
{
    b->size = e->size;
    b->sequence = next_sequence();
    b->stack_id = e->stack_id;
    b->time_ms = time_ms;
    b->handle = handle_number(e->handle);
    b->thread = e->thread ? e->thread : thread_number();
    b->device = e->device;
    b->kind = e->kind;
    b->api = e->api;
    b->context = e->context;
}

/* Count a block just added. Its shard's lock held, or, for a queued block
 * never entered, the queue's lock. */
static void account_alloc(const struct block *b, int api)
{
    counters_on_alloc(stripe_number(), b->device, block_kind(b), b->size);
    timeline_record(TIMELINE_ALLOC, block_value(b), b->size, b->device, block_kind(b), b->api,
                    b->stack_id);
    struct stack_record *s = stack_get(b->stack_id);
    if (s) {
        stack_totals_alloc(stripe_number(), s, b->stack_id, b->size);
        stack_record_note_use(s, block_kind(b), b->api);
    }
    if (api >= 0 && api < MAX_APIS)
        count_in_stripe(api, 1);
    if (b->kind & BLOCK_FROM_RUNTIME)
        count(&tracker.runtime_blocks, 1);
}

/* The native frames of a block, innermost first. A framework's block
 * allocated by a thread that runs Python is placed by its Python frames (the
 * user's line, and the framework's own Python down to the operation); its
 * native frames, the allocator's and the dispatcher's, cost more than all
 * the rest of the event (measured on a transformer step: docs/
 * PERFORMANCE.md), so only CUMEMTRACE_BLOCK_DEPTH of them are taken. A
 * thread that runs no Python (PyTorch's autograd engine) gets as many, then
 * the frame of the operation the framework says it runs (the backward
 * node's apply, recorded as a return address inside it): unwinding some
 * thirty frames down to that node took about 1 us a tensor. Where the
 * framework names no operation, it gets every frame. Kept out of line: GCC
 * once inlined it into capture() and made that a function of its own, and
 * the unwinder stepping through that frame cost some 80 more instructions
 * a pair (callgrind, bench/run.py --only record). */
HOT_PATH __attribute__((noinline)) static int
native_frames(int kind, uint64_t (*operation_of)(void), uintptr_t *frames)
{
    if (!config.native)
        return 0;
    if (!kind_in_cache(kind) || config.block_depth >= config.depth)
        return stack_capture(frames, config.depth);
    if (python_runs_here()) /* none at the default depth 0: not even the call */
        return config.block_depth ? stack_capture(frames, config.block_depth) : 0;
    uint64_t operation = operation_of ? operation_of() : 0;
    if (!operation)
        return stack_capture(frames, config.depth);
    int depth = stack_capture(frames, config.block_depth);
    frames[depth++] = operation + 1; /* symbolized at address - 1, as a return address */
    return depth;
}

/* A driver allocation made inside a framework's allocator is a segment of
 * its cache; a framework's own block ends what segments_taken may
 * still claim of this thread's allocations. */
static void note_cache_role(int kind, uint32_t stack_id, int depth)
{
    if (kind_in_cache(kind)) {
        this_thread.physical_stack = 0;
        return;
    }
    if (depth == 0)
        return; /* the stack every stackless block shares: not one site */
    if (this_thread.cache_allocating)
        stack_flag(stack_id, STACK_CACHE_SEGMENT(this_thread.cache_allocating));
    if (kind == KIND_VMM_PHYSICAL)
        this_thread.physical_stack = stack_id;
}

/* Whether a block of `size` bytes takes a stack at all (CUMEMTRACE_DEPTH,
 * CUMEMTRACE_MIN_SIZE). */
static inline int takes_stack(uint64_t size)
{
    return config.depth > 0 && size >= config.min_size;
}

/* This thread's stack for a block of `kind` and `size` bytes, as the
 * settings ask, in frames[]: its depth. `operation` as struct allocation's.
 * Keeps errno, which the walks may change (process_vm_readv, the
 * unwinder's reads): a framework's event needs it kept, and with no walk
 * it is not touched. */
HOT_PATH static int capture(int kind, uint64_t size, uint64_t (*operation)(void), uintptr_t *frames)
{
    frames[0] = 0; /* none read when depth is 0; says so to the compiler */
    if (__builtin_expect(!takes_stack(size), 0))
        return 0; /* laid out apart: a stack is the usual case */
    int saved_errno = errno;
    int depth = python_capture(frames, native_frames(kind, operation, frames), CONFIG_MAX_DEPTH);
    errno = saved_errno;
    return depth;
}

/* framework_stack's stack when the thread's key is none it made lately:
 * captured and interned, and remembered by the key (`words` of them, 0:
 * none), but only if the key says every frame of the stack
 * (python_key_kept): a walk that stopped short (something wrong, out of
 * memory) is not remembered for ever after. Out of line: the frames' array
 * and the calls stay off the path of a known key. */
__attribute__((noinline)) static uint32_t new_framework_stack(int kind, uint64_t size,
                                                              uint64_t (*operation)(void),
                                                              const uintptr_t *key, int words,
                                                              uint64_t hash)
{
    uintptr_t frames[CONFIG_MAX_DEPTH];
    int depth = capture(kind, size, operation, frames);
    uint32_t id = stack_intern_here(frames, depth, 0);
    if (words && python_key_kept(key, words, depth))
        stack_remember_by_key(key, words, hash, id);
    return id;
}

/* The stack of a framework's block of `kind` and `size` bytes made now by
 * this thread, `operation` as capture()'s, interned: its id. Where the
 * block takes no native frames but the operation's (native_frames' rule for
 * a framework's block at block depth 0, the default), a thread finds it by
 * the key of its Python frames, or of the main thread's it borrows
 * (python_frames_key), if it made it lately, with no look-up of each
 * frame. */
HOT_PATH static inline __attribute__((always_inline)) uint32_t
framework_stack(int kind, uint64_t size, uint64_t (*operation)(void))
{
    uintptr_t key[STACK_KEY_WORDS];
    uint64_t hash = 0;
    int words = 0;
    /* Nearly every tensor's way: expected, so that it is laid out in line. */
    if (__builtin_expect(kind_in_cache(kind) && takes_stack(size) && config.block_depth == 0 &&
                             (words = python_frames_key(key, &hash, operation)) != 0,
                         1)) {
        uint32_t id = stack_known_by_key(key, words, hash);
        if (__builtin_expect(id != 0, 1))
            return id;
    }
    return new_framework_stack(kind, size, operation, words ? key : NULL, words, hash);
}

/* An event's device: one it can hold, or -1 (not known). */
static int8_t event_device(int device)
{
    return (int8_t)(device >= -1 && device < 127 ? device : -1);
}

/* The event of allocation `a` with the stack frames[0..depth), made now by
 * this thread: the stack interned, its role noted. What a record is made of
 * (its thread is 0, this one, until someone takes a number for it) but its
 * time, which is when it is entered: a queued event's clock read is then
 * one per batch, not one per tensor on PyTorch's thread, where it cost
 * some 300 cycles with its lines out of cache (H100, rdtsc around it). */
static struct pending_event event_of(const struct allocation *a, const uintptr_t *frames, int depth)
{
    int kind = a->kind & BLOCK_KIND_MASK;
    uint32_t stack_id =
        stack_intern_here(frames, depth, kind_space(kind) == SPACE_FRAMEWORK ? 0 : STACK_DRIVER);
    note_cache_role(kind, stack_id, depth);
    note_traced();
    return (struct pending_event){
        .value = a->value,
        .size = a->size,
        .handle = a->handle,
        .stack_id = stack_id,
        .device = event_device(a->device),
        .type = PENDING_ALLOC,
        .kind = (uint8_t)a->kind,
        .api = (uint8_t)a->api,
        .context = (uint8_t)a->context,
    };
}

/* A record still at `key`, which a new block is taking: we missed its free
 * (the address was reused). Its shard's lock held. */
static void end_missed(uint64_t key)
{
    struct block *old = registry_find(key);
    if (old) {
        forget_block(old, 0);
        registry_release(old);
        tracker_lost(LOST_MISSED_FREE);
    }
}

/* Enter allocation event `e` in the registry at `key`, at `time_ms`: its
 * allocation number, 0 if it could not be recorded. Takes the key's shard. */
static uint64_t enter_block(uint64_t key, const struct pending_event *e, uint32_t time_ms)
{
    registry_lock(key);
    end_missed(key);
    struct block *b = e->size <= BLOCK_SIZE_MAX ? registry_new(key) : NULL;
    if (b) {
        fill_block(b, e, time_ms);
        if (registry_add(b) < 0) {
            registry_release(b);
            b = NULL;
        }
    }
    uint64_t number = b ? b->sequence : 0;
    if (b)
        account_alloc(b, e->api);
    else
        tracker_lost(LOST_NO_MEMORY);
    registry_unlock(key);
    return number;
}

/* End the record at `key` (a free), saving it in *saved: whether one was
 * there. With `flag`, only a record that has it. Takes the key's shard. */
static int forget_at(uint64_t key, int flag, struct block *saved)
{
    registry_lock(key);
    struct block *b = registry_find(key);
    if (b && flag && !(b->kind & flag))
        b = NULL;
    else if (b) {
        *saved = *b;
        forget_block(b, 0);
        registry_release(b);
    } else if (!flag) {
        tracker_lost(LOST_UNKNOWN_FREE);
    }
    registry_unlock(key);
    return b != NULL;
}

static void note_framework_record(int kind)
{
    if (kind_space(kind) == SPACE_FRAMEWORK &&
        !__atomic_load_n(&framework_recorded, __ATOMIC_RELAXED))
        __atomic_store_n(&framework_recorded, 1, __ATOMIC_RELEASE);
}

/* Record a block with the stack frames[0..depth): its allocation number, 0
 * if it could not be recorded. Inside the tracer. */
static uint64_t record(const struct allocation *a, const uintptr_t *frames, int depth)
{
    note_framework_record(a->kind & BLOCK_KIND_MASK);
    struct pending_event e = event_of(a, frames, depth);
    uint32_t now = tracker_now_ms();
    uint64_t number =
        enter_block(block_key(a->value, kind_space(a->kind & BLOCK_KIND_MASK)), &e, now);
    uint64_t work = pending_claimed() + __atomic_add_fetch(&driver_events, 1, __ATOMIC_RELAXED);
    if (!this_thread.sweeping)
        sample_growth_if_due(work);
    else
        this_thread.sweeping = SWEEP_RECORDED;
    return number;
}

uint64_t tracker_alloc(const struct allocation *a)
{
    if (!enter_to_record())
        return 0;
    uintptr_t frames[CONFIG_MAX_DEPTH];
    uint64_t number =
        record(a, frames, capture(a->kind & BLOCK_KIND_MASK, a->size, a->operation, frames));
    tracker_leave();
    return number;
}

static int take(uint64_t value, int space, int flag, struct block *saved)
{
    if (!enter_to_record())
        return 0;
    int found = forget_at(block_key(value, space), flag, saved);
    tracker_leave();
    return found;
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
    if (!enter_to_record())
        return -1;
    uint64_t key = block_key(value, space);
    registry_lock(key);
    struct block *b = registry_find(key);
    int device = b ? b->device : -1;
    registry_unlock(key);
    tracker_leave();
    return device;
}

void tracker_put_back(const struct block *saved)
{
    if (!enter_to_record())
        return;
    note_framework_record(block_kind(saved));
    registry_lock(saved->key);
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
        counters_on_restore(stripe_number(), b->device, block_kind(b), b->size);
        timeline_record(TIMELINE_ALLOC, block_value(b), b->size, b->device, block_kind(b), b->api,
                        b->stack_id);
        struct stack_record *s = stack_get(b->stack_id);
        if (s)
            stack_totals_restore(s, b->size);
        if (b->kind & BLOCK_FROM_RUNTIME)
            count(&tracker.runtime_blocks, 1);
    }
    registry_unlock(saved->key);
    tracker_leave();
}

int tracker_has_runtime_blocks(void)
{
    return __atomic_load_n(&tracker.runtime_blocks, __ATOMIC_RELAXED) != 0;
}

/* The seam for the frameworks' blocks (tracker.h): a stack given, and the
 * deferred path below, which takes this thread's. */
uint64_t tracker_alloc_with_frames(const struct allocation *a, const uintptr_t *frames, int depth)
{
    if (!enter_to_record())
        return 0;
    uintptr_t copy[CONFIG_MAX_DEPTH];
    int n = 0;
    copy[0] = 0; /* none read when n is 0; says so to the compiler */
    if (takes_stack(a->size))
        for (; n < depth && n < CONFIG_MAX_DEPTH; n++)
            copy[n] = frames[n];
    uint64_t number = record(a, copy, n);
    tracker_leave();
    return number;
}

/* ---- framework blocks entered later (pending.h) ------------------------------ */

/* Enters more than this many pending events at once cost the thread that
 * finds them waiting: they are otherwise left to tracker_apply's caller. */
#define APPLY_BATCH 2048

/* Allocation event `e`, whose free comes later in its chunk, at `time_ms`:
 * counted as enter_block would. With `absent`, its address is known to
 * hold no record: nothing of the registry is touched; what is counted
 * moves under the queue's lock, which tracker_lock's holder holds too. */
static void pass_alloc(const struct pending_event *e, uint32_t time_ms, int absent)
{
    struct block b;
    uint64_t key = block_key(e->value, SPACE_FRAMEWORK);
    b.key = key;
    if (absent) {
        fill_block(&b, e, time_ms);
        account_alloc(&b, e->api);
        return;
    }
    registry_lock(key);
    end_missed(key);
    fill_block(&b, e, time_ms);
    account_alloc(&b, e->api);
    registry_unlock(key);
}

/* The free of allocation event `e`, passed: no shard is taken, as no record
 * is touched; what is counted moves under the queue's lock, which
 * tracker_lock's holder holds too. What account_free reads is the event's, as fill_block
 * made the block. */
static void pass_free(const struct pending_event *e)
{
    struct block b = {
        .key = block_key(e->value, SPACE_FRAMEWORK),
        .size = e->size,
        .stack_id = e->stack_id,
        .device = e->device,
        .kind = e->kind,
        .api = e->api,
    };
    account_free(&b, 0);
}

static void apply_event(const struct pending_event *e, uint32_t time_ms)
{
    uint64_t key = block_key(e->value, SPACE_FRAMEWORK);
    struct block saved;
    if (e->type == PENDING_ALLOC)
        enter_block(key, e, time_ms);
    else
        forget_at(key, 0, &saved);
}

/* Event i of chunk `c`, paired or not; `alone`: no framework block was
 * recorded but through the queue when the chunk began (framework_recorded).
 * A block that ends within its chunk is counted, and its end counted, each
 * at its place in the order, exactly as entering and forgetting its record
 * would (counters, peaks, stack totals, allocation number, handle, the
 * timeline), but no record is made: the registry's probes, its record slab
 * and a second look-up were most of the tracer's thread's time, their lines
 * cold after its sleep (bench/run.py --only tensors). Only the check for a
 * missed free at the allocation's address stays. */
static void apply_chunk_event(const struct pending_chunk *c, uint32_t i, uint32_t time_ms,
                              int alone)
{
    const struct pending_event *e = c->events[i];
    if (c->partner[i] == PENDING_UNPAIRED)
        apply_event(e, time_ms);
    else if (e->type == PENDING_ALLOC)
        pass_alloc(e, time_ms, alone && c->freed_before[i]);
    else
        pass_free(c->events[c->partner[i]]);
}

/* Enter every published pending event, in order, a chunk at a time, all at
 * the time the batch begins. The queue's lock held, no shard. */
static void enter_pending(void)
{
    if (pending_count() == 0)
        return;
    this_thread.applying = 1;
    uint32_t now = tracker_now_ms();
    const struct pending_chunk *c;
    while ((c = pending_chunk())) {
        int alone = !__atomic_load_n(&framework_recorded, __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < c->count; i++)
            apply_chunk_event(c, i, now, alone);
        pending_chunk_done();
    }
    this_thread.applying = 0;
}

/* enter_pending; with `wait` 0, only if no one else is entering them (-1 if
 * someone is). Holds no shard when called. */
static int apply_pending(int wait)
{
    if (pending_count() == 0)
        return 0;
    if (wait)
        pending_lock();
    else if (!pending_trylock())
        return -1;
    enter_pending();
    pending_unlock();
    return 0;
}

/* apply_pending by a thread that made an event, then the growth sample if
 * one is due. Not for tracker_lock, which a sample takes. */
static void apply_and_sample(int wait)
{
    if (apply_pending(wait) == 0)
        sample_growth_if_due(work_done());
}

int tracker_apply(void)
{
    if (pending_count() == 0)
        return 0;
    int entered_before = tracker_enter();
    apply_pending(1);
    if (entered_before)
        tracker_leave();
    return 1;
}

uint64_t tracker_queued(void)
{
    return pending_count();
}

/* apply_and_sample(0), keeping errno. Out of line: most events never
 * call it, and the path of those that do not stays short. */
static __attribute__((noinline)) void catch_up(void)
{
    int saved_errno = errno;
    apply_and_sample(0);
    errno = saved_errno;
}

/* Publish event `number` in `slot`: with the timeline on, it is entered at
 * once, so the timeline's times are the events' own; a queue this writer
 * finds long it enters itself, unless someone is entering it. */
HOT_PATH static void publish(struct pending_event *slot, uint64_t number)
{
    if (pending_publish(slot, number, APPLY_BATCH) > APPLY_BATCH || timeline.events)
        catch_up();
}

/* Queue event `e`, for which no slot was free: a full ring is emptied by
 * this thread first. Out of line, and keeping errno, as what it calls may
 * change it: the framework's thread pays for neither on its way. */
static __attribute__((noinline)) void defer_waiting(const struct pending_event *e)
{
    int saved_errno = errno;
    uint64_t number;
    struct pending_event *slot;
    while (!(slot = pending_claim(&number))) {
        /* Nothing queued, yet no slot: the ring has no memory (or was
         * emptied meanwhile). Either way nothing made before this event
         * waits, so it is entered now. */
        if (pending_count() == 0) {
            uint32_t now = tracker_now_ms();
            apply_event(e, now);
            sample_growth_if_due(work_done());
            errno = saved_errno;
            return;
        }
        apply_and_sample(1);
        if (pending_count() >= APPLY_BATCH)
            sched_yield(); /* a writer between its claim and its publish */
    }
    /* All but the stamp, which the reader may be reading: pending_publish
     * writes it. */
    size_t body = offsetof(struct pending_event, value);
    memcpy((char *)slot + body, (const char *)e + body, sizeof(*e) - body);
    publish(slot, number);
    errno = saved_errno;
}

/* This thread's number, registered with a shard held (thread_number says
 * why) the first time, keeping errno (it asks the system for the thread's
 * id and name). */
static uint16_t own_number(uint64_t key)
{
    if (this_thread.number == 0) {
        int saved_errno = errno;
        registry_lock(key);
        thread_number();
        registry_unlock(key);
        errno = saved_errno;
    }
    return this_thread.number;
}

/* Event `e`'s fields but its stamp (pending_publish writes that), for the
 * block of a cache's kind `kind` on its cache's entry point: what a record
 * is made of but its time (event_of says why). Written straight into a
 * claimed slot: the tensor's event is never built twice. */
static inline void block_event(struct pending_event *e, int kind, int device, uint64_t value,
                               uint64_t size, uint64_t stream, uint32_t stack_id, uint16_t thread)
{
    e->value = value;
    e->size = size;
    e->handle = stream;
    e->stack_id = stack_id;
    e->thread = thread;
    e->device = event_device(device);
    e->type = PENDING_ALLOC;
    e->kind = (uint8_t)kind;
    e->api = (uint8_t)host.cache_api[kind - KIND_TORCH_TENSOR];
    e->context = 0;
}

/* Block events that found no slot free (defer_waiting). Out of line: their
 * event is a local of the 64 bytes' alignment of a slot, which realigned
 * the stack frame of every event's function. */
static __attribute__((noinline)) void defer_block_waiting(int kind, int device, uint64_t value,
                                                          uint64_t size, uint64_t stream,
                                                          uint32_t stack_id, uint16_t thread)
{
    struct pending_event e = {0};
    block_event(&e, kind, device, value, size, stream, stack_id, thread);
    defer_waiting(&e);
}

/* A free's event that found no slot free (defer_waiting); out of line too. */
static __attribute__((noinline)) void defer_free_waiting(uint64_t value)
{
    struct pending_event e = {.value = value, .type = PENDING_FREE};
    defer_waiting(&e);
}

/* The growth observation due at a framework allocation's event `work`,
 * keeping errno. Out of line: most allocations take none. */
static __attribute__((noinline)) void take_due_sample(uint64_t work)
{
    int saved_errno = errno;
    sample_growth_if_due(work);
    errno = saved_errno;
}

/* The stack is taken and interned before a slot is claimed: the reader
 * stops at a claimed slot until it is published. errno is kept where
 * something may change it (the walks, a new stack, a thread's first event,
 * a full ring, a growth sample): the event of a known stack with no walk
 * reads not even its line. */
HOT_PATH void tracker_defer_alloc(int cache_kind, int device, uint64_t value, uint64_t size,
                                  uint64_t stream, uint64_t (*operation)(void))
{
    if (!enter_to_record())
        return;
    uint32_t stack_id = framework_stack(cache_kind, size, operation);
    note_cache_role(cache_kind, stack_id, 0); /* a framework's kind: the depth is not read */
    note_traced();
    uint16_t thread = own_number(block_key(value, SPACE_FRAMEWORK));
    uint64_t number;
    struct pending_event *slot = pending_claim(&number);
    if (slot) {
        block_event(slot, cache_kind, device, value, size, stream, stack_id, thread);
        publish(slot, number);
        uint64_t work = number + 1 + __atomic_load_n(&driver_events, __ATOMIC_RELAXED);
        if (growth_due(work))
            take_due_sample(work);
    } else {
        defer_block_waiting(cache_kind, device, value, size, stream, stack_id, thread);
    }
    tracker_leave();
}

/* A free's event is its address and its type: the reader reads no other
 * field of it (pending.h). Nothing on the way of a slot found free changes
 * errno. */
HOT_PATH void tracker_defer_free(uint64_t value)
{
    if (!enter_to_record())
        return;
    uint64_t number;
    struct pending_event *slot = pending_claim(&number);
    if (slot) {
        slot->value = value;
        slot->type = PENDING_FREE;
        publish(slot, number);
    } else {
        defer_free_waiting(value);
    }
    tracker_leave();
}

int tracker_take_numbered(uint64_t value, int space, uint64_t number)
{
    if (!enter_to_record())
        return 0;
    uint64_t key = block_key(value, space);
    registry_lock(key);
    struct block *b = registry_find(key);
    int found = b && b->sequence == number;
    if (found) {
        forget_block(b, 0);
        registry_release(b);
    }
    registry_unlock(key);
    tracker_leave();
    return found;
}

void tracker_cache_sweep(int on)
{
    int recorded = this_thread.sweeping == SWEEP_RECORDED;
    this_thread.sweeping = on ? SWEEP_RUNNING : 0;
    if (!on && recorded && tracker_enter()) {
        sample_growth_if_due(work_done());
        tracker_leave();
    }
}

uint32_t tracker_take_physical_stack(void)
{
    uint32_t id = this_thread.physical_stack;
    this_thread.physical_stack = 0;
    return id;
}

int tracker_cache_allocating(int cache_kind)
{
    int previous = this_thread.cache_allocating;
    this_thread.cache_allocating = (uint8_t)(kind_in_cache(cache_kind) ? cache_kind : 0);
    return previous;
}

/* No stack capture is in flight across fork (stacks.c says why), and every
 * shard and the Python location table are held, so the parent's tables are
 * whole while they are copied. tables_lock and the stack table's insert
 * lock are not: the child starts with empty tables and new locks anyway. */
void tracker_fork_prepare(void)
{
    stacks_fork_prepare(); /* first: a capture is made before a shard is taken */
    pending_lock();
    registry_lock_all();
    python_fork_prepare(); /* after: a report holds the shards, then the table */
}

void tracker_fork_parent(void)
{
    python_fork_parent();
    registry_unlock_all();
    pending_unlock();
    stacks_fork_parent();
}

/* The child has one thread and no CUDA context: it starts with empty tables
 * and reports under its own pid, only if it makes CUDA calls of its own. */
void tracker_fork_child(void)
{
    pthread_mutex_init(&tables_lock, NULL);
    pending_fork_child();
    if (initialized)
        reset_state();
    else
        registry_init(); /* unlocks: the shards were taken before fork */
    this_thread.number = 0;
    this_thread.cache_allocating = 0;
    this_thread.sweeping = 0;
    this_thread.applying = 0;
    this_thread.traced = 0;
    this_thread.physical_stack = 0;
    this_thread.sequence_next = this_thread.sequence_end = 0;
    python_fork_child();
    stacks_fork_child();
}
