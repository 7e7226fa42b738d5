/* stacks.c - stack capture with libunwind and the deduplicated stack table.
 *
 * libunwind is loaded with dlopen(RTLD_LOCAL), not linked: libunwind.so.8
 * also exports the _Unwind_* functions of the C++ exception ABI, and a
 * preloaded library's dependencies come first in the process's symbol lookup,
 * so linking it would have moved every C++ exception of the traced program
 * (PyTorch's, ...) from libgcc_s to libunwind. Kept local, it serves us only. */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <string.h>

#include "arena.h"
#include "config.h"
#include "log.h"
#include "stacks.h"

/* The names behind libunwind's macros (e.g. _ULx86_64_set_caching_policy). */
#define NAME_OF(symbol) NAME_OF_(symbol)
#define NAME_OF_(symbol) #symbol

static int (*backtrace_fn)(void **, int);

static uintptr_t skip_low, skip_high;

/* Stacks: an array indexed by id - 1. Frames: one array holding every
 * stack's frames back to back. Index: open addressing over stack ids, sized a
 * power of two and kept under 70% full. All three grow by doubling. */
static struct stack *stacks;
static uint32_t stacks_used, stacks_capacity;
static uintptr_t *frames;
static uint64_t frames_used, frames_capacity;
static uint32_t *index_slots;
static uint32_t index_capacity;

void stacks_init(void)
{
    void *libunwind = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!libunwind) {
        log_line("cannot load libunwind.so.8 (%s); blocks are recorded without stacks",
                 dlerror());
        return;
    }
    int (*set_caching)(unw_addr_space_t, unw_caching_policy_t) =
        (int (*)(unw_addr_space_t, unw_caching_policy_t))dlsym(libunwind,
                                                               NAME_OF(unw_set_caching_policy));
    unw_addr_space_t *space = dlsym(libunwind, NAME_OF(unw_local_addr_space));
    *(void **)&backtrace_fn = dlsym(libunwind, "unw_backtrace");
    if (set_caching && space)
        set_caching(*space, UNW_CACHE_PER_THREAD);
    if (!backtrace_fn)
        log_line("libunwind.so.8 has no unw_backtrace; blocks are recorded without stacks");
}

void stacks_reset(void)
{
    stacks = NULL;
    frames = NULL;
    index_slots = NULL;
    stacks_used = stacks_capacity = index_capacity = 0;
    frames_used = frames_capacity = 0;
}

void stack_set_skip_range(uintptr_t low, uintptr_t high)
{
    skip_low = low;
    skip_high = high;
}

int stack_capture(uintptr_t *out, int max)
{
    void *raw[CONFIG_MAX_DEPTH + 32];
    int wanted = max + 32;
    if (wanted > (int)(sizeof(raw) / sizeof(raw[0])))
        wanted = sizeof(raw) / sizeof(raw[0]);
    if (!backtrace_fn)
        return 0;
    int n = backtrace_fn(raw, wanted);

    /* raw[0] is this function. The tracer's own frames (the wrappers, which
     * also sit between cudart and the program) are left out wherever they are. */
    int depth = 0;
    for (int i = 1; i < n && depth < max; i++) {
        uintptr_t address = (uintptr_t)raw[i];
        if (address < skip_low || address >= skip_high)
            out[depth++] = address;
    }
    return depth;
}

uint64_t stack_hash(const uintptr_t *f, int depth)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)depth;
    for (int i = 0; i < depth; i++) {
        h ^= f[i];
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

static int same_stack(const struct stack *s, const uintptr_t *f, int depth, uint64_t hash)
{
    return s->hash == hash && s->depth == (uint32_t)depth &&
           memcmp(frames + s->first_frame, f, depth * sizeof(*f)) == 0;
}

static int grow_index(void)
{
    uint32_t capacity = index_capacity ? index_capacity * 2 : 4096;
    uint32_t *slots = pages_alloc(capacity * sizeof(*slots));
    if (!slots)
        return -1;
    for (uint32_t id = 1; id <= stacks_used; id++) {
        uint32_t i = (uint32_t)stacks[id - 1].hash & (capacity - 1);
        while (slots[i])
            i = (i + 1) & (capacity - 1);
        slots[i] = id;
    }
    pages_free(index_slots, index_capacity * sizeof(*index_slots));
    index_slots = slots;
    index_capacity = capacity;
    return 0;
}

static int reserve_stack_and_frames(int depth)
{
    if (stacks_used == stacks_capacity) {
        uint32_t capacity = stacks_capacity ? stacks_capacity * 2 : 1024;
        void *p = pages_grow(stacks, stacks_capacity * sizeof(*stacks), capacity * sizeof(*stacks));
        if (!p)
            return -1;
        stacks = p;
        stacks_capacity = capacity;
    }
    if (frames_used + depth > frames_capacity) {
        uint64_t capacity = frames_capacity ? frames_capacity * 2 : 16384;
        while (frames_used + depth > capacity)
            capacity *= 2;
        void *p = pages_grow(frames, frames_capacity * sizeof(*frames), capacity * sizeof(*frames));
        if (!p)
            return -1;
        frames = p;
        frames_capacity = capacity;
    }
    return 0;
}

uint32_t stack_intern(const uintptr_t *f, int depth, uint64_t hash)
{
    if ((stacks_used + 1) * 10 >= index_capacity * 7 && grow_index() < 0)
        return 0;
    uint32_t i = (uint32_t)hash & (index_capacity - 1);
    for (; index_slots[i]; i = (i + 1) & (index_capacity - 1))
        if (same_stack(&stacks[index_slots[i] - 1], f, depth, hash))
            return index_slots[i];

    if (reserve_stack_and_frames(depth) < 0)
        return 0;
    struct stack *s = &stacks[stacks_used];
    memset(s, 0, sizeof(*s));
    s->hash = hash;
    s->depth = depth;
    s->first_frame = frames_used;
    memcpy(frames + frames_used, f, depth * sizeof(*f));
    frames_used += depth;
    index_slots[i] = ++stacks_used;
    return stacks_used;
}

struct stack *stack_get(uint32_t id)
{
    return id >= 1 && id <= stacks_used ? &stacks[id - 1] : NULL;
}

const uintptr_t *stack_frames(const struct stack *stack)
{
    return frames + stack->first_frame;
}

uint32_t stack_count(void)
{
    return stacks_used;
}

size_t stacks_memory_bytes(void)
{
    return stacks_capacity * sizeof(*stacks) + frames_capacity * sizeof(*frames) +
           index_capacity * sizeof(*index_slots);
}
