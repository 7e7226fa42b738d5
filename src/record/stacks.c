/* stacks.c - stack capture and the deduplicated stack table.
 *
 * Stacks are walked by unwind.c's rules, and where a rule is new or a frame
 * has none, by libgcc's unwinder (_Unwind_Backtrace). libgcc_s.so.1 is in
 * every Linux system's base set (manylinux's included) and already in any
 * process with a C++ runtime, so a run records the same frames everywhere:
 * libunwind, present on some machines and not on others, is not used even
 * where it is, lest a prepared machine and a bare one record different
 * stacks. libgcc_s is loaded with dlopen(RTLD_LOCAL), not linked: a
 * preloaded library's dependencies come first in the process's symbol
 * lookup, and the program's own exceptions must keep finding the C++ ABI's
 * _Unwind_* functions where they did. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "config.h"
#include "hot_path.h"
#include "log.h"
#include "stacks.h"
#include "unwind.h"

/* The two things we take from libgcc's unwinder, declared here as the C++
 * ABI (the Itanium ABI's unwinding section) defines them: a trace
 * function's context is opaque, and it stops the walk by returning any
 * code but _URC_NO_REASON. _Unwind_GetIPInfo tells a signal frame (its
 * address is the interrupted instruction, not a return address). */
#define URC_NO_REASON 0
#define URC_END_OF_STACK 5
typedef int (*gcc_trace_fn)(void *context, void *argument);
static struct {
    int (*backtrace)(gcc_trace_fn trace, void *argument);   /* _Unwind_Backtrace */
    uintptr_t (*ip_info)(void *context, int *signal_frame); /* _Unwind_GetIPInfo */
} gcc;

static uintptr_t skip_low, skip_high;

/* The table is read without a lock: a stack already interned is found by any
 * thread at once, and only a new stack takes `insert_lock`. For that, nothing
 * a reader may be looking at ever moves or is unmapped:
 *
 * - Stacks sit in chunks of STACK_CHUNK records that never move; id n is
 *   record (n - 1) % STACK_CHUNK of chunk (n - 1) / STACK_CHUNK. Their
 *   histories sit in chunks of their own, the same way.
 * - Frames sit in chunks of FRAME_CHUNK; a stack's frames never straddle two
 *   chunks, and first_frame is an index into that chunked space.
 * - The index (open addressing over ids, a power of two, under 70% full) is
 *   rebuilt at twice the size when it fills; the new one is published with
 *   one pointer store and the old ones stay mapped, since a reader may still
 *   be probing one. (A reader that misses a newer stack in an old index takes
 *   the lock and looks again.)
 *
 * A writer fills a stack record and its frames, then publishes the count and
 * the index slot with release stores; readers load them with acquire. The
 * index is therefore not map.h's map, which moves keys and frees its old
 * slots under its owner's lock. */
#define STACK_CHUNK 1024u       /* 64 KiB of records */
#define MAX_STACK_CHUNKS 65536u /* 64M stacks */
#define FRAME_CHUNK (1u << 15)  /* 256 KiB of frames */
#define MAX_FRAME_CHUNKS 16384u /* 512M frames */
_Static_assert(CONFIG_MAX_DEPTH <= FRAME_CHUNK, "a stack fits in a frame chunk");

struct stack_index {
    uint32_t capacity;
    uint32_t slots[]; /* stack ids, 0: empty */
};

static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stack_record *stack_chunks[MAX_STACK_CHUNKS];
static struct stack_history *history_chunks[MAX_STACK_CHUNKS];
static uint32_t stacks_used; /* published with release */
static uintptr_t *frame_chunks[MAX_FRAME_CHUNKS];
static uint64_t frames_used;          /* next free frame index */
static struct stack_index *index_now; /* published with release */
static size_t table_bytes;            /* everything mapped, for reports */

/* The stacks this thread interned last, two ways a set, the newer first,
 * by their depth and a few of their frames: the innermost four, which vary
 * most from one allocation to the next, and the middle one. A stack found
 * here is compared whole with the table's copy of its frames, which never
 * moves, so its id is the one stack_intern would give: without hashing
 * every frame (some 180 instructions at 24 frames) nor reading the index,
 * the record and the chunk pointers (four or five cache lines a tensor,
 * callgrind on bench/torch_tensors.py). A stack whose set other stacks
 * keep taking is hashed and interned as before. Per thread: no lock;
 * emptied by stack_reset, whose table its ids would no longer name (in a
 * forked child the only thread is the one that forked). 8 KiB in static
 * TLS, which the C library zeroes for each thread it creates. */
#define RECENT_BITS 8
struct recent_stack {
    const uintptr_t *frames; /* the table's copy */
    uint32_t id, depth;      /* id 0: empty; depth | RECENT_DRIVER for the driver's */
};
#define RECENT_DRIVER (1u << 31)
static __thread struct recent_stack recent[1 << RECENT_BITS][2];

/* Stacks known by a key of other words than their frames: a thread's
 * Python frames as they are read (python_frames_key), before each is looked
 * up to its location and the locations to their stack. A model's forward
 * comes back to the same few hundred stacks; finding one by its key costs a
 * tensor some 20 instructions a frame fewer, and none of the lines of the
 * frames' memo or of recent[] (callgrind, bench/torch_tensors.py). A key's
 * hash is the caller's, of more than its words (python.c says what), and is
 * compared whole, as the words are. Two ways a set, the newer first; a way's
 * words lie in one of its set's two slots, which the ways swap rather than
 * copy. Per thread, mapped at its first key (not in static TLS: every thread
 * the program makes would pay for its zeroing) and unmapped when the thread
 * ends; emptied by stack_reset, as recent[] is. */
#define KEYED_BITS 7
#define KEYED_STRIDE (STACK_KEY_WORDS + 8) /* a line more: slots start on different cache sets */
struct keyed_stack {
    uint64_t hash;
    uint32_t id;          /* 0: empty */
    uint16_t words, slot; /* slot: which of its set's two */
};
struct keyed_table {
    struct keyed_stack sets[1 << KEYED_BITS][2];
    uintptr_t words[1 << KEYED_BITS][2][KEYED_STRIDE];
};
static __thread struct keyed_table *keyed;
static pthread_key_t keyed_owner;
static int keyed_owner_made;

static void keyed_clear(struct keyed_table *t)
{
    memset(t->sets, 0, sizeof(t->sets));
    for (int i = 0; i < 1 << KEYED_BITS; i++)
        t->sets[i][1].slot = 1;
}

void stack_init(void *(*lookup)(void *handle, const char *name))
{
    if (!lookup)
        return;
    void *libgcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libgcc) {
        log_line("cannot load libgcc_s.so.1 (%s); blocks are recorded without stacks", dlerror());
        return;
    }
    *(void **)&gcc.backtrace = lookup(libgcc, "_Unwind_Backtrace");
    *(void **)&gcc.ip_info = lookup(libgcc, "_Unwind_GetIPInfo");
    if (!gcc.backtrace || !gcc.ip_info) {
        gcc.backtrace = NULL;
        log_line("libgcc_s.so.1 has no _Unwind_Backtrace; blocks are recorded without stacks");
        return;
    }
    unwind_init(libgcc, lookup);
}

/* After fork, in the child (one thread): forget everything. The parent's
 * pages stay mapped; the lock is made anew, the parent's may have been held. */
void stack_reset(void)
{
    pthread_mutex_init(&insert_lock, NULL);
    unwind_reset();
    /* Only the entries that can be set (up to the chunk of the next record):
     * at start-up the arrays are untouched zero pages and stay so. */
    uint64_t stack_chunks_used = stacks_used / STACK_CHUNK + 1;
    uint64_t frame_chunks_used = frames_used / FRAME_CHUNK + 1;
    if (stack_chunks_used > MAX_STACK_CHUNKS)
        stack_chunks_used = MAX_STACK_CHUNKS;
    if (frame_chunks_used > MAX_FRAME_CHUNKS)
        frame_chunks_used = MAX_FRAME_CHUNKS;
    memset(stack_chunks, 0, stack_chunks_used * sizeof(stack_chunks[0]));
    memset(history_chunks, 0, stack_chunks_used * sizeof(history_chunks[0]));
    memset(frame_chunks, 0, frame_chunks_used * sizeof(frame_chunks[0]));
    stacks_used = 0;
    frames_used = 0;
    index_now = NULL;
    memset(recent, 0, sizeof(recent));
    if (keyed)
        keyed_clear(keyed);
    table_bytes = 0;
}

void stack_set_skip_range(uintptr_t low, uintptr_t high)
{
    skip_low = low;
    skip_high = high;
}

/* Fork and unwinding. libgcc's unwinder takes locks while it unwinds (the
 * loader's, through dl_iterate_phdr, and its own for frames registered at
 * run time); a fork while another thread
 * holds one gives a child whose first stack capture, or exit, waits for
 * ever. So fork waits until no capture is in flight: a capture counts
 * itself in its thread's stripe and backs off while a fork is coming. A
 * thread that forks from inside a capture of its own (from a signal
 * handler) does not wait for itself. */
#define CAPTURE_STRIPES 64
static struct {
    _Alignas(64) int count;
} capturing[CAPTURE_STRIPES];
static int forking;
static __thread int stripe = -1;
static __thread int own_captures;
/* The most of the tracer's own frames a capture on this thread walked
 * before it had all it keeps (stack_capture). */
static __thread int own_frames;

static void capture_begin(void)
{
    if (stripe < 0) {
        static unsigned next;
        stripe = (int)(__atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % CAPTURE_STRIPES);
    }
    for (;;) {
        __atomic_add_fetch(&capturing[stripe].count, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&forking, __ATOMIC_SEQ_CST))
            break;
        __atomic_sub_fetch(&capturing[stripe].count, 1, __ATOMIC_RELEASE);
        struct timespec pause = {0, 100000};
        while (__atomic_load_n(&forking, __ATOMIC_ACQUIRE))
            nanosleep(&pause, NULL);
    }
    own_captures++;
}

static void capture_end(void)
{
    own_captures--;
    __atomic_sub_fetch(&capturing[stripe].count, 1, __ATOMIC_RELEASE);
}

void stacks_fork_prepare(void)
{
    __atomic_store_n(&forking, 1, __ATOMIC_SEQ_CST);
    struct timespec pause = {0, 50000};
    for (int waited = 0; waited < 40000; waited++) { /* 2 s at most */
        int in_flight = 0;
        for (int i = 0; i < CAPTURE_STRIPES; i++)
            in_flight += __atomic_load_n(&capturing[i].count, __ATOMIC_ACQUIRE);
        if (in_flight <= own_captures)
            break;
        nanosleep(&pause, NULL);
    }
}

void stacks_fork_parent(void)
{
    __atomic_store_n(&forking, 0, __ATOMIC_RELEASE);
}

void stacks_fork_child(void)
{
    memset(capturing, 0, sizeof(capturing)); /* the other threads are gone */
    if (stripe >= 0)
        capturing[stripe].count = own_captures;
    __atomic_store_n(&forking, 0, __ATOMIC_RELEASE);
}

/* The first `max` frames of raw[1..n) that are not the tracer's own (the
 * wrappers, which also sit between cudart and the program), wherever they
 * are, into out[]: how many. *walked: how many of raw[] that took. */
static int keep_frames(void *const *raw, int n, uintptr_t *out, int max, int *walked)
{
    uintptr_t low = skip_low, span = skip_high - skip_low;
    int depth = 0, i = 1;
    for (; i < n && depth < max; i++) {
        uintptr_t address = (uintptr_t)raw[i];
        out[depth] = address;
        depth += address - low >= span; /* outside [low, high), without a branch */
    }
    *walked = i;
    return depth;
}

/* libgcc's walk: the return addresses, innermost first, into raw[0..max);
 * how many. It ends, as unwind_walk does, at an address below 0x4000 (the
 * outermost frame's undefined return address is 0; nothing real lies that
 * low). */
struct gcc_walk {
    void **raw;
    int count, max;
};

static int gcc_frame(void *context, void *argument)
{
    struct gcc_walk *w = argument;
    int signal_frame;
    uintptr_t address = gcc.ip_info(context, &signal_frame);
    if (address < 0x4000 || w->count == w->max)
        return URC_END_OF_STACK;
    w->raw[w->count++] = (void *)address;
    return URC_NO_REASON;
}

/* In line, so that raw[0] is the caller's own place, as unwind_walk's
 * first frame is. */
static inline __attribute__((always_inline)) int gcc_backtrace(void **raw, int max)
{
    struct gcc_walk w = {raw, 0, max};
    if (max > 0)
        gcc.backtrace(gcc_frame, &w);
    return w.count;
}

/* Frames kept by a walk with new rules, compared with libgcc's walk of the
 * same stack, whose frames are kept if the two differ. Apart, so that its
 * room is taken only then; called from stack_capture, so libgcc's walk has
 * one frame more than stack_capture's own, this function's. */
static __attribute__((noinline)) int check_walk(uintptr_t *out, int depth, int max, int most,
                                                const struct unwind_proof *proof)
{
    void *raw[CONFIG_MAX_DEPTH + 33];
    uintptr_t frames[CONFIG_MAX_DEPTH];
    int walked, n = gcc_backtrace(raw, most + 1);
    int kept = n > 1 ? keep_frames(raw + 1, n - 1, frames, max, &walked) : 0;
    int same = kept == depth && memcmp(out, frames, depth * sizeof(*out)) == 0;
    unwind_settle(proof, same);
    if (!same)
        memcpy(out, frames, kept * sizeof(*out));
    return kept;
}

/* With libgcc alone, where a frame has no rule: each frame it walks costs
 * some 1,400 instructions (it finds and runs the frame's call frame
 * information anew, with no cache: a walk of 34 frames, 49,000; libunwind's
 * cached walk took 3,000), and a program's stack is often far deeper than
 * the frames kept, so the walk asks for the frames kept and as many of the
 * tracer's own as this thread has met, not the 32 more it allows. When it
 * stopped short of them (more of our frames this time), it is made again at
 * full length: the frames are the same as one walk of that length would
 * give. */
static inline __attribute__((always_inline)) int gcc_capture(uintptr_t *out, int max, int most)
{
    void *raw[CONFIG_MAX_DEPTH + 32];
    int wanted = max + 1 + own_frames; /* raw[0] is stack_capture */
    if (wanted > most)
        wanted = most;
    int walked, depth;
    for (;;) {
        int n = gcc_backtrace(raw, wanted);
        depth = keep_frames(raw, n, out, max, &walked);
        if (depth == max || n < wanted || wanted == most)
            break;
        wanted = most;
    }
    if (walked - 1 - depth > own_frames)
        own_frames = walked - 1 - depth;
    return depth;
}

/* By the rules unwind.c remembers, checked against libgcc's walk where a
 * rule was new; by libgcc alone where a frame has no rule. Either way the
 * frames are those libgcc's walk of up to max + 32 frames gives, less the
 * tracer's own. */
int stack_capture(uintptr_t *out, int max)
{
    int most = max + 32;
    if (most > CONFIG_MAX_DEPTH + 32)
        most = CONFIG_MAX_DEPTH + 32;
    if (!gcc.backtrace || max <= 0)
        return 0;
    if (max > CONFIG_MAX_DEPTH)
        max = CONFIG_MAX_DEPTH;
    struct unwind_proof proof;
    capture_begin();
    int depth = unwind_walk(out, max, most, skip_low, skip_high, &proof);
    if (depth < 0)
        depth = gcc_capture(out, max, most);
    else if (proof.count)
        depth = check_walk(out, depth, max, most, &proof);
    capture_end();
    return depth;
}

/* Four independent lanes, folded at the end: one multiply chain per frame
 * would make the hash wait on each multiply in turn (32 frames, ~50 ns). */
uint64_t stack_hash(const uintptr_t *f, int depth)
{
    uint64_t a = 0x9e3779b97f4a7c15ULL ^ (uint64_t)depth, b = 0x94d049bb133111ebULL,
             c = 0x2545f4914f6cdd1dULL, d = 0xd6e8feb86659fd93ULL;
    int i = 0;
    for (; i + 4 <= depth; i += 4) {
        a = stack_mix(a, f[i]);
        b = stack_mix(b, f[i + 1]);
        c = stack_mix(c, f[i + 2]);
        d = stack_mix(d, f[i + 3]);
    }
    for (; i < depth; i++)
        a = stack_mix(a, f[i]);
    uint64_t h = stack_mix(stack_mix(stack_mix(a, b), c), d);
    return h ? h : 1;
}

static size_t index_bytes(uint32_t capacity)
{
    return sizeof(struct stack_index) + (size_t)capacity * sizeof(uint32_t);
}

struct stack_record *stack_get(uint32_t id)
{
    if (id == 0 || id > __atomic_load_n(&stacks_used, __ATOMIC_ACQUIRE))
        return NULL;
    return &stack_chunks[(id - 1) / STACK_CHUNK][(id - 1) % STACK_CHUNK];
}

struct stack_history *stack_history(uint32_t id)
{
    if (id == 0 || id > __atomic_load_n(&stacks_used, __ATOMIC_ACQUIRE))
        return NULL;
    return &history_chunks[(id - 1) / STACK_CHUNK][(id - 1) % STACK_CHUNK];
}

void stack_view(uint32_t id, struct stack *view)
{
    const struct stack_record *e = stack_get(id);
    const struct stack_history *h = stack_history(id);
    *view = (struct stack){
        .hash = e->hash,
        .first_frame = e->first_frame,
        .depth = e->depth,
        .flags = __atomic_load_n(&e->flags, __ATOMIC_RELAXED),
        .stats =
            {
                .live_bytes = e->live_bytes,
                .live_blocks = e->live_blocks,
                .peak_live_bytes = e->peak_live_bytes,
                .allocations = e->allocations,
                .allocated_bytes = e->allocated_bytes,
                .implicit_bytes = h->implicit_bytes,
                .implicit_blocks = h->implicit_blocks,
            },
    };
}

void stack_flag(uint32_t id, uint32_t flags)
{
    struct stack_record *s = stack_get(id);
    if (s && (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & flags) != flags)
        __atomic_fetch_or(&s->flags, flags, __ATOMIC_RELAXED);
}

const uintptr_t *stack_frames(const struct stack_record *stack)
{
    return frame_chunks[stack->first_frame / FRAME_CHUNK] + stack->first_frame % FRAME_CHUNK;
}

static int same_stack(const struct stack_record *s, const uintptr_t *f, int depth, uint64_t hash)
{
    return s->hash == hash && s->depth == (uint32_t)depth &&
           memcmp(stack_frames(s), f, depth * sizeof(*f)) == 0;
}

/* The id of this stack in `index`, or 0; sets *slot to where the probe ended. */
static uint32_t look_up(const struct stack_index *index, const uintptr_t *f, int depth,
                        uint64_t hash, uint32_t *slot)
{
    if (!index)
        return 0;
    uint32_t mask = index->capacity - 1;
    uint32_t i = (uint32_t)hash & mask;
    for (;; i = (i + 1) & mask) {
        uint32_t id = __atomic_load_n(&index->slots[i], __ATOMIC_ACQUIRE);
        if (id == 0)
            break;
        if (same_stack(stack_get(id), f, depth, hash))
            return id;
    }
    if (slot)
        *slot = i;
    return 0;
}

/* Insert lock held. A new index twice the size, published whole. */
static int grow_index(void)
{
    uint32_t capacity = index_now ? index_now->capacity * 2 : 4096;
    struct stack_index *index = pages_alloc(index_bytes(capacity));
    if (!index)
        return -1;
    index->capacity = capacity;
    for (uint32_t id = 1; id <= stacks_used; id++) {
        uint32_t i = (uint32_t)stack_get(id)->hash & (capacity - 1);
        while (index->slots[i])
            i = (i + 1) & (capacity - 1);
        index->slots[i] = id;
    }
    table_bytes += index_bytes(capacity);
    __atomic_store_n(&index_now, index, __ATOMIC_RELEASE);
    return 0;
}

/* Insert lock held. Room for one more stack record, its history and
 * `depth` frames. */
static struct stack_record *reserve_stack(int depth)
{
    uint32_t chunk = stacks_used / STACK_CHUNK;
    if (chunk >= MAX_STACK_CHUNKS)
        return NULL;
    if (!stack_chunks[chunk]) {
        stack_chunks[chunk] = pages_alloc(STACK_CHUNK * sizeof(struct stack_record));
        if (!stack_chunks[chunk])
            return NULL;
        table_bytes += STACK_CHUNK * sizeof(struct stack_record);
    }
    if (!history_chunks[chunk]) {
        history_chunks[chunk] = pages_alloc(STACK_CHUNK * sizeof(struct stack_history));
        if (!history_chunks[chunk])
            return NULL;
        table_bytes += STACK_CHUNK * sizeof(struct stack_history);
    }
    uint64_t at = frames_used;
    if (at % FRAME_CHUNK + depth > FRAME_CHUNK) /* would straddle: next chunk */
        at = (at / FRAME_CHUNK + 1) * FRAME_CHUNK;
    uint64_t frame_chunk = at / FRAME_CHUNK;
    if (frame_chunk >= MAX_FRAME_CHUNKS)
        return NULL;
    if (!frame_chunks[frame_chunk]) {
        frame_chunks[frame_chunk] = pages_alloc(FRAME_CHUNK * sizeof(uintptr_t));
        if (!frame_chunks[frame_chunk])
            return NULL;
        table_bytes += FRAME_CHUNK * sizeof(uintptr_t);
    }
    frames_used = at;
    struct stack_record *s = &stack_chunks[chunk][stacks_used % STACK_CHUNK];
    memset(s, 0, sizeof(*s));
    memset(&history_chunks[chunk][stacks_used % STACK_CHUNK], 0, sizeof(struct stack_history));
    s->first_frame = at;
    return s;
}

static uint32_t insert(const uintptr_t *f, int depth, uint64_t hash)
{
    uint32_t slot;
    uint32_t id = look_up(index_now, f, depth, hash, &slot);
    if (id)
        return id; /* another thread was first */
    if ((stacks_used + 1) * 10 >= (index_now ? index_now->capacity : 0) * 7) {
        if (grow_index() < 0)
            return 0;
        look_up(index_now, f, depth, hash, &slot);
    }
    struct stack_record *s = reserve_stack(depth);
    if (!s)
        return 0;
    s->hash = hash;
    s->depth = depth;
    memcpy(frame_chunks[s->first_frame / FRAME_CHUNK] + s->first_frame % FRAME_CHUNK, f,
           depth * sizeof(*f));
    frames_used += depth;
    id = stacks_used + 1;
    __atomic_store_n(&stacks_used, id, __ATOMIC_RELEASE);
    __atomic_store_n(&index_now->slots[slot], id, __ATOMIC_RELEASE);
    return id;
}

/* A new stack may map memory, which may change errno: kept here, so that
 * a caller whose stack is known (nearly every event) need not. */
uint32_t stack_intern(const uintptr_t *f, int depth, uint64_t hash)
{
    uint32_t id = look_up(__atomic_load_n(&index_now, __ATOMIC_ACQUIRE), f, depth, hash, NULL);
    if (id)
        return id;
    int saved_errno = errno;
    pthread_mutex_lock(&insert_lock);
    id = insert(f, depth, hash);
    pthread_mutex_unlock(&insert_lock);
    errno = saved_errno;
    return id;
}

/* The memo's set of stack f[0..depth): a hash of its depth, its first four
 * frames and its middle one. Written out for the stacks deeper than four,
 * nearly all of them, so that no loop's tests run at every event. */
static struct recent_stack *recent_set(const uintptr_t *f, int depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)depth;
    if (depth > 4)
        h = stack_mix(stack_mix(stack_mix(stack_mix(stack_mix(h, f[0]), f[1]), f[2]), f[3]),
                      f[depth / 2]);
    else
        for (int i = 0; i < depth; i++)
            h = stack_mix(h, f[i]);
    return recent[(h * 0x94d049bb133111ebULL) >> (64 - RECENT_BITS)];
}

/* Whether stack a[0..depth) is b's. A loop in the caller's code, not
 * memcmp: the C library's is a few cache lines of code of its own, fetched
 * again at each tensor once PyTorch and the interpreter have run between. */
static inline int same_frames(const uintptr_t *a, const uintptr_t *b, int depth)
{
    uintptr_t differ = 0;
    int i = 0;
    for (; i + 4 <= depth; i += 4) /* four a turn: some 1.5 instructions a frame */
        differ |=
            (a[i] ^ b[i]) | (a[i + 1] ^ b[i + 1]) | (a[i + 2] ^ b[i + 2]) | (a[i + 3] ^ b[i + 3]);
    for (; i < depth; i++)
        differ |= a[i] ^ b[i];
    return differ == 0;
}

HOT_PATH uint32_t stack_intern_here(const uintptr_t *f, int depth, int space)
{
    struct recent_stack *set = recent_set(f, depth);
    uint32_t tag = (uint32_t)depth | (space ? RECENT_DRIVER : 0);
    for (int way = 0; way < 2; way++)
        if (__builtin_expect(set[way].id && set[way].depth == tag &&
                                 same_frames(set[way].frames, f, depth),
                             1))
            return set[way].id;
    uint32_t id = stack_intern(f, depth, stack_hash_in(f, depth, space));
    if (id) {
        set[1] = set[0];
        set[0] = (struct recent_stack){stack_frames(stack_get(id)), id, tag};
    }
    return id;
}

/* The thread's end (pthread_key_create's destructor, on that thread). */
static void keyed_free(void *t)
{
    pages_free(t, sizeof(struct keyed_table));
    keyed = NULL;
}

static void make_keyed_owner(void)
{
    keyed_owner_made = pthread_key_create(&keyed_owner, keyed_free) == 0;
}

/* This thread's table, mapped now if it has none; NULL if it cannot be (or
 * could not be unmapped when the thread ends: no key). Keeps errno. */
static struct keyed_table *keyed_table(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (keyed)
        return keyed;
    int saved_errno = errno;
    pthread_once(&once, make_keyed_owner);
    struct keyed_table *t = keyed_owner_made ? pages_alloc(sizeof(*t)) : NULL;
    if (t && pthread_setspecific(keyed_owner, t) != 0) {
        pages_free(t, sizeof(*t));
        t = NULL;
    }
    if (t)
        keyed_clear(t);
    errno = saved_errno;
    return keyed = t;
}

HOT_PATH uint32_t stack_known_by_key(const uintptr_t *key, int words, uint64_t hash)
{
    struct keyed_table *t = keyed;
    if (!t)
        return 0;
    unsigned set = (unsigned)(hash >> (64 - KEYED_BITS));
    const struct keyed_stack *ways = t->sets[set];
    /* The way of the same hash (two keys of one hash in a set: the second
     * is taken for new, and captured), compared by a plain loop rather than
     * same_frames' four words a turn: 3 lines of code where it took 5, for
     * some 25 more instructions, and the lines are what an event pays for
     * (hot_path.h). */
    const struct keyed_stack *way = ways[0].hash == hash   ? &ways[0]
                                    : ways[1].hash == hash ? &ways[1]
                                                           : NULL;
    if (!way || way->words != words)
        return 0;
    const uintptr_t *kept = t->words[set][way->slot];
    uintptr_t differ = 0;
    for (int i = 0; i < words; i++)
        differ |= kept[i] ^ key[i];
    return differ ? 0 : way->id;
}

void stack_remember_by_key(const uintptr_t *key, int words, uint64_t hash, uint32_t id)
{
    struct keyed_table *t = id && words > 0 && words <= STACK_KEY_WORDS ? keyed_table() : NULL;
    if (!t)
        return;
    unsigned set = (unsigned)(hash >> (64 - KEYED_BITS));
    struct keyed_stack *ways = t->sets[set];
    uint16_t slot = ways[1].slot; /* the older way's, taken over */
    memcpy(t->words[set][slot], key, (size_t)words * sizeof(*key));
    ways[1] = ways[0];
    ways[0] = (struct keyed_stack){hash, id, (uint16_t)words, slot};
}

uint32_t stack_count(void)
{
    return __atomic_load_n(&stacks_used, __ATOMIC_ACQUIRE);
}

size_t stack_table_bytes(void)
{
    return table_bytes;
}

void stack_record_note_use(struct stack_record *stack, int kind, int api)
{
    stack_flags_note_use(&stack->flags, kind, api);
}

/* A signal frame stops libgcc's walk: libgcc steps through the kernel's
 * signal frame (x86-64: glibc's __restore_rt, whose call frame information
 * says so; elsewhere libgcc knows the sigreturn code), and says so of the
 * frame of the interrupted code. */
struct signal_walk {
    int frames, found;
};

static int gcc_signal_frame(void *context, void *argument)
{
    struct signal_walk *w = argument;
    int signal_frame = 0;
    gcc.ip_info(context, &signal_frame);
    if (signal_frame)
        w->found = 1;
    return signal_frame || ++w->frames >= 512 ? URC_END_OF_STACK : URC_NO_REASON;
}

int stack_in_signal_handler(void)
{
    stack_t alternate;
    if (sigaltstack(NULL, &alternate) == 0 && (alternate.ss_flags & SS_ONSTACK))
        return 1;
    if (!gcc.backtrace)
        return -1;
    struct signal_walk w = {0, 0};
    gcc.backtrace(gcc_signal_frame, &w);
    return w.found;
}
