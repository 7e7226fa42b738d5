/* test_stacks.c - capture and deduplication of call stacks. */
#include <dlfcn.h>
#include <string.h>

#include "check.h"
#include "stacks.h"

static uint32_t __attribute__((noinline)) capture_here(void)
{
    uintptr_t frames[64];
    int depth = stack_capture(frames, 64);
    CHECK(depth >= 2);
    uint32_t id = stack_intern(frames, depth, stack_hash(frames, depth));
    __asm__ volatile("" ::: "memory"); /* keep this a real call, not a tail call */
    return id;
}

static uint32_t __attribute__((noinline)) site_a(void)
{
    uint32_t id = capture_here();
    __asm__ volatile("" ::: "memory");
    return id;
}

static uint32_t __attribute__((noinline)) site_b(void)
{
    uint32_t id = capture_here();
    __asm__ volatile("" ::: "memory");
    return id;
}

int main(void)
{
    stack_init(dlsym);
    uint32_t a1 = 0, a2 = 0, b1 = 0;
    for (volatile int i = 0; i < 2; i++) { /* volatile: not unrolled, one call site */
        uint32_t a = site_a();
        if (i == 0)
            a1 = a;
        else
            a2 = a;
    }
    b1 = site_b();
    CHECK(a1 != 0 && b1 != 0);
    CHECK_EQ(a1, a2); /* same call site, same stack */
    CHECK(a1 != b1);  /* another call site, another stack */
    CHECK_EQ(stack_count(), 2);

    /* Depth is honoured. */
    uintptr_t frames[4];
    CHECK(stack_capture(frames, 2) <= 2);

    /* 100 000 synthetic stacks: the table grows, ids are stable, dedup holds. */
    uintptr_t f[8];
    for (uint32_t i = 0; i < 100000; i++) {
        for (int k = 0; k < 8; k++)
            f[k] = 0x400000 + i * 16 + k;
        uint32_t id = stack_intern(f, 8, stack_hash(f, 8));
        CHECK_EQ(id, i + 3);
    }
    int same = 1;
    for (uint32_t i = 0; i < 100000; i += 997) {
        for (int k = 0; k < 8; k++)
            f[k] = 0x400000 + i * 16 + k;
        same &= stack_intern(f, 8, stack_hash(f, 8)) == i + 3;
        const struct stack_record *s = stack_get(i + 3);
        same &= s->depth == 8 && memcmp(stack_frames(s), f, sizeof(f)) == 0;
    }
    CHECK(same);
    CHECK_EQ(stack_count(), 100002);

    /* The empty stack (no frames) is a stack like any other. */
    uintptr_t none[1] = {0};
    uint32_t empty = stack_intern(none, 0, stack_hash(none, 0));
    CHECK(empty != 0);
    CHECK_EQ(stack_intern(none, 0, stack_hash(none, 0)), empty);

    /* This thread's memo gives the table's ids: for stacks that share the
     * frames it is keyed by (the innermost four and the middle one) and
     * differ elsewhere, more of them than a set holds, asked in turn. */
    uintptr_t alike[5][12];
    uint32_t ids[5];
    for (int v = 0; v < 5; v++) {
        for (int k = 0; k < 12; k++)
            alike[v][k] = 0x900000 + k * 16 + (k == 9 ? v : 0);
        ids[v] = stack_intern(alike[v], 12, stack_hash(alike[v], 12));
    }
    same = 1;
    for (int round = 0; round < 3; round++)
        for (int v = 0; v < 5; v++)
            same &= stack_intern_here(alike[v], 12, 0) == ids[v];
    same &= stack_intern_here(none, 0, 0) == empty;
    CHECK(same);
    uintptr_t fresh[3] = {0x700010, 0x700020, 0x700030};
    uint32_t added = stack_intern_here(fresh, 3, 0);
    CHECK_EQ(added, stack_count());
    CHECK_EQ(stack_intern(fresh, 3, stack_hash(fresh, 3)), added);
    CHECK_EQ(stack_intern_here(fresh, 2, 0), stack_count()); /* a prefix: a stack of its own */
    /* The same frames for the driver's blocks: another record, found again
     * (memo or table) in its own space, and the framework's still its own. */
    uint32_t driver = stack_intern_here(fresh, 3, STACK_DRIVER);
    CHECK(driver != added && driver == stack_count());
    CHECK_EQ(stack_intern_here(fresh, 3, STACK_DRIVER), driver);
    CHECK_EQ(stack_intern(fresh, 3, stack_hash_in(fresh, 3, STACK_DRIVER)), driver);
    CHECK_EQ(stack_intern_here(fresh, 3, 0), added);

    /* After a reset (a forked child's) the memo names no stack of the old
     * table: its pages stay mapped, with the frames the memo compares. */
    stack_reset();
    uintptr_t other[3] = {0x800010, 0x800020, 0x800030};
    CHECK_EQ(stack_intern_here(other, 3, 0), 1);
    CHECK_EQ(stack_intern_here(fresh, 3, 0), 2);
    CHECK_EQ(stack_intern_here(other, 3, 0), 1);
    return check_done("test_stacks");
}
