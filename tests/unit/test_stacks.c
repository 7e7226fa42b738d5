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
    __asm__ volatile("" ::: "memory");   /* keep this a real call, not a tail call */
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
    for (volatile int i = 0; i < 2; i++) {   /* volatile: not unrolled, one call site */
        uint32_t a = site_a();
        if (i == 0)
            a1 = a;
        else
            a2 = a;
    }
    b1 = site_b();
    CHECK(a1 != 0 && b1 != 0);
    CHECK_EQ(a1, a2);           /* same call site, same stack */
    CHECK(a1 != b1);            /* another call site, another stack */
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
    return check_done("test_stacks");
}
