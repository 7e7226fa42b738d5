/* test_unwind.c - stacks walked by remembered frame rules (unwind.c, through
 * stack_capture) are the frames libgcc's walk gives (_Unwind_Backtrace, and
 * libunwind's unw_backtrace too where it is installed), on the first walk
 * of a place (rules new, checked) and on later ones (rules trusted): deep
 * recursion, frames sized at run time (the CFA on the frame pointer) at
 * other sizes than when their rules were learnt, a signal handler's stack,
 * and a thread's; and walks that start where the last one did (unwind.c's
 * memo of it) but whose callers differ: by a return address, or by a frame
 * pointer alone. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "check.h"
#include "stacks.h"
#include "unwind.h"

/* The references: libgcc's walk, and libunwind's where it is installed. */
static int (*gcc_backtrace)(int (*)(void *, void *), void *);
static uintptr_t (*gcc_ip_info)(void *, int *);
static int (*libunwind_backtrace)(void **, int);
static int mismatches, compared;

struct gcc_walk {
    void **raw;
    int n, max;
};

/* As stacks.c's gcc_frame: to the first address below 0x4000 (the end). */
static int gcc_frame(void *context, void *argument)
{
    struct gcc_walk *w = argument;
    int signal_frame;
    uintptr_t ip = gcc_ip_info(context, &signal_frame);
    if (ip < 0x4000 || w->n == w->max)
        return 5;
    w->raw[w->n++] = (void *)ip;
    return 0;
}

static int same_walk(const char *name, const uintptr_t *frames, int depth, void **ref, int n)
{
    int same = depth == n && depth > 1;
    for (int i = 1; same && i < depth; i++)
        same = frames[i] == (uintptr_t)ref[i];
    if (!same) {
        fprintf(stderr, "walks differ: %d frames, %s %d\n", depth, name, n);
        for (int i = 0; i < depth || i < n; i++)
            fprintf(stderr, "  %2d %#lx %#lx\n", i, i < depth ? (unsigned long)frames[i] : 0ul,
                    i < n ? (unsigned long)(uintptr_t)ref[i] : 0ul);
    }
    return same;
}

/* stack_capture here against the references here: frames[0] and ref[0]
 * are the calls' own return addresses, the rest must be equal. */
static void __attribute__((noinline)) compare_here(void)
{
    uintptr_t frames[128];
    void *ref[160];
    int depth = stack_capture(frames, 128);
    struct gcc_walk w = {ref, 0, 160};
    gcc_backtrace(gcc_frame, &w);
    int same = same_walk("libgcc", frames, depth, ref, w.n);
    if (libunwind_backtrace) {
        int n = libunwind_backtrace(ref, 160);
        same &= same_walk("libunwind", frames, depth, ref, n);
    }
    mismatches += !same;
    compared++;
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
}

static int __attribute__((noinline)) recurse(int level);

static int __attribute__((noinline)) recurse_other(int level)
{
    int r = recurse(level - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

static int __attribute__((noinline)) recurse(int level)
{
    if (level <= 0) {
        compare_here();
        return 0;
    }
    int r = level % 2 ? recurse_other(level) : recurse(level - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

/* What the deepest frame of sized() calls. */
static void (*volatile at_bottom)(void) = compare_here;

/* A frame whose size is known only at run time: its CFA is on the frame
 * pointer. */
static int __attribute__((noinline)) sized(int level, int bytes)
{
    volatile char room[bytes];
    room[0] = (char)level;
    int r = level > 0 ? sized(level - 1, bytes + 48 * level) : (at_bottom(), 0);
    __asm__ volatile("" ::: "memory");
    return r + room[0];
}

/* The stack pointer of a frame at the bottom of sized_at(). */
static uintptr_t bottom_sp;

static void __attribute__((noinline)) note_sp(void)
{
    bottom_sp = (uintptr_t)__builtin_frame_address(0);
}

/* A frame sized at run time (its CFA on the frame pointer) that calls
 * `bottom`: reached from two depths with sizes that put `bottom` at one
 * stack pointer, the walks from there start alike and differ in the frame
 * pointer only. The deeper path is two frames of deeper(), so that the
 * depths differ by a multiple of 32 bytes, the rounding of a size at run
 * time under ASan. */
static int __attribute__((noinline)) sized_at(int bytes, void (*bottom)(void))
{
    volatile char room[bytes];
    room[0] = 1;
    bottom();
    __asm__ volatile("" ::: "memory");
    return room[0];
}

static int __attribute__((noinline)) deeper(int levels, int bytes, void (*bottom)(void))
{
    volatile char pad[200];
    pad[0] = 0;
    int r = levels > 1 ? deeper(levels - 1, bytes, bottom) : sized_at(bytes, bottom);
    __asm__ volatile("" ::: "memory");
    return r + pad[0];
}

/* A walk by rules alone from here against libgcc's: trusted are
 * walks that used only trusted rules, wrong those of them that gave up or
 * gave other frames. A walk with new rules settles them as it compares. */
static int trusted, wrong;

static void __attribute__((noinline)) walk_compare(void)
{
    uintptr_t out[64];
    void *ref[96];
    struct unwind_proof proof;
    int n = unwind_walk(out, 64, 95, 0, 0, &proof);
    struct gcc_walk w = {ref, 0, 96};
    gcc_backtrace(gcc_frame, &w);
    int m = w.n;
    int same = n >= 0 && n == m - 1;
    for (int i = 0; same && i < n; i++)
        same = out[i] == (uintptr_t)ref[i + 1];
    if (n >= 0 && proof.count) {
        unwind_settle(&proof, same);
    } else {
        trusted++;
        wrong += !same;
    }
    __asm__ volatile("" ::: "memory");
}

/* Two walks from one place, the second leaving out the first's second
 * frame (a range of one address): 1 if it gave the first's frames less
 * that one, else 0. */
static int __attribute__((noinline)) skip_walks(void)
{
    uintptr_t frames[2][64];
    int n[2];
    for (volatile int i = 0; i < 2; i++) { /* one call site */
        struct unwind_proof proof;
        uintptr_t low = i ? frames[0][1] : 0, high = i ? frames[0][1] + 1 : 0;
        n[i] = unwind_walk(frames[i], 64, 95, low, high, &proof);
        if (n[i] >= 0 && proof.count)
            unwind_settle(&proof, 1);
        if (n[i] < 3)
            return 0;
    }
    __asm__ volatile("" ::: "memory");
    return n[1] == n[0] - 1 && frames[1][0] == frames[0][0] &&
           memcmp(frames[1] + 1, frames[0] + 2, (size_t)(n[1] - 1) * sizeof(uintptr_t)) == 0;
}

/* Two call sites of one function at one depth: walks from there start
 * alike and differ in a return address. */
static int __attribute__((noinline)) twin(int which)
{
    int r;
    if (which) {
        __asm__ volatile("" ::"i"(1));
        r = sized_at(64, walk_compare);
    } else {
        __asm__ volatile("" ::"i"(2));
        r = sized_at(64, walk_compare);
    }
    __asm__ volatile("" ::: "memory");
    return r;
}

static void on_signal(int signal)
{
    (void)signal;
    recurse(3);
}

static int __attribute__((noinline)) raise_at(int level)
{
    int r = level > 0 ? raise_at(level - 1) : raise(SIGUSR1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        recurse(20);
    return NULL;
}

/* A walk from here by rules alone; its new rules settled as `settle_as`
 * says (1 trusted, 0 never used again, -1 left new). How many were new,
 * or -1: it gave up. */
static int __attribute__((noinline)) walk_here(int settle_as)
{
    uintptr_t out[64];
    struct unwind_proof proof;
    int n = unwind_walk(out, 64, 96, 0, 0, &proof);
    if (n >= 0 && settle_as >= 0)
        unwind_settle(&proof, settle_as);
    __asm__ volatile("" ::: "memory");
    return n < 1 ? -1 : proof.count;
}

static int bottom_count;

static void bottom_walk(void)
{
    bottom_count = walk_here(-1);
}

static void __attribute__((noinline)) settled_trusted(int counts[2])
{
    for (volatile int i = 0; i < 2; i++) /* one call site */
        counts[i] = walk_here(i == 0 ? 1 : -1);
    __asm__ volatile("" ::: "memory");
}

static void __attribute__((noinline)) settled_different(int counts[2])
{
    for (volatile int i = 0; i < 2; i++)
        counts[i] = walk_here(i == 0 ? 0 : -1);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    void *libgcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(libgcc != NULL);
    if (!libgcc)
        return check_done("test_unwind");
    *(void **)&gcc_backtrace = dlsym(libgcc, "_Unwind_Backtrace");
    *(void **)&gcc_ip_info = dlsym(libgcc, "_Unwind_GetIPInfo");
    void *libunwind = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (libunwind)
        *(void **)&libunwind_backtrace = dlsym(libunwind, "unw_backtrace");
    else
        fprintf(stderr, "test_unwind: no libunwind.so.8 here; libgcc's walk alone is compared\n");
    stack_init(dlsym);

    for (int i = 0; i < 3; i++)
        recurse(40);
    for (volatile int i = 0; i < 4; i++) { /* one call site */
        if (i == 3)
            at_bottom = bottom_walk;
        sized(6, 16 + 512 * i);
    }
    signal(SIGUSR1, on_signal);
    for (int i = 0; i < 3; i++)
        raise_at(5);
    pthread_t thread;
    pthread_create(&thread, NULL, thread_main, NULL);
    pthread_join(thread, NULL);
    CHECK_EQ(compared, 12);
    CHECK_EQ(mismatches, 0);

    /* From one stack pointer, walks whose callers differ by a return
     * address, then by the frame pointer alone, in turn: after the first
     * round (new rules), each a walk by trusted rules alone, and right. */
    for (volatile int i = 0; i < 6; i++)
        twin(i % 2);
    CHECK(trusted >= 4);
    sized_at(1024, note_sp);
    uintptr_t shallow = bottom_sp;
    deeper(2, 1024, note_sp);
    /* the size that puts it there, near the difference (sizes at run time
     * are rounded) */
    int bytes = 1024 - (int)(shallow - bottom_sp) - 64;
    for (int i = 0; i < 128; i++, bytes++) {
        deeper(2, bytes, note_sp);
        if (bottom_sp == shallow)
            break;
    }
    CHECK_EQ(bottom_sp, shallow);
    trusted = 0;
    for (volatile int i = 0; i < 6; i++) {
        if (i % 2)
            deeper(2, bytes, walk_compare);
        else
            sized_at(1024, walk_compare);
    }
    CHECK(trusted >= 4);
    CHECK_EQ(wrong, 0);

    /* A walk from where the last one started that leaves out other
     * frames, once its rules are known. */
    int skipped = 0;
    for (volatile int i = 0; i < 3; i++) /* one call site */
        skipped = skip_walks();
    CHECK_EQ(skipped, 1);

    /* The frames sized at run time were walked by their rules after the
     * first round: the last round, walked from its deepest frame, found
     * new rules only for the places of bottom_walk and walk_here. */
    CHECK_EQ(bottom_count, 2);

    /* A walk's new rules, once found the same as libgcc's walk, are
     * trusted: the next walk from there needs no check. Found different,
     * they are never used again: the walk from there gives up. */
    int counts[2];
    settled_trusted(counts);
    CHECK(counts[0] > 0);
    CHECK_EQ(counts[1], 0);
    settled_different(counts);
    CHECK(counts[0] > 0);
    CHECK_EQ(counts[1], -1);
    return check_done("test_unwind");
}
