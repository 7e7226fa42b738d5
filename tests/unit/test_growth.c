/* test_growth.c - the growth verdicts (growth.c) on series of a stack's low
 * points fed through the real sampling: growing (still rising at the end),
 * released (grew as a leak does, then freed at the run's last samples), and
 * the series that must be neither (a drop in the middle, a sawtooth, a cache
 * that filled and stayed); then what a sample reads, through the stacks'
 * totals (stack_totals.c): a time sample the low point since the one
 * before, a mark and the program's end the bytes at that moment. */
#include <dlfcn.h>
#include <stdint.h>

#include "check.h"
#include "config.h"
#include "growth.h"
#include "stack_totals.h"
#include "stacks.h"

#define SAMPLES 20
#define MiB (1ull << 20)

/* Low points, in MiB, at samples 1..SAMPLES; one stack per series. */
struct series {
    const char *name;
    uint64_t mib[SAMPLES];
    int growing, released;
};

static const struct series cases[] = {
    {"steady rise, dropped at the last sample",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0}, 0, 1},
    {"steady rise, flat, dropped 2 samples after its peak",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 18, 0}, 0, 1},
    {"steady rise, flat twice, dropped 3 samples after its peak",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 17, 17, 0}, 0, 0},
    {"steady rise, then flat for its last two samples: still held",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 18, 18}, 0, 0},
    {"the same drop in the middle, then steady",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, 0, 0},
    {"sawtooth whose highest tooth is the last",
     {1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 4, 0}, 0, 0},
    {"a cache that filled, stayed, and was freed at the end",
     {4, 8, 12, 16, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 0}, 0, 0},
    {"a rise still going at the end",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 1, 0},
    {"a rise, partly freed at the last sample",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 10}, 1, 0},
};
#define CASES (sizeof(cases) / sizeof(cases[0]))

/* The verdicts on each case's series, its low points set as they are. */
static void test_series(void)
{
    growth_reset();
    uint32_t ids[CASES];
    for (uintptr_t i = 0; i < CASES; i++) {
        uintptr_t frames[2] = {0x1000 + i, 0x2000};
        ids[i] = stack_intern(frames, 2, stack_hash(frames, 2));
    }
    for (int n = 0; n < SAMPLES; n++) {
        for (size_t i = 0; i < CASES; i++)
            stack_get(ids[i])->live_bytes = stack_history(ids[i])->low_bytes =
                cases[i].mib[n] * MiB;
        growth_sample((uint32_t)(n + 1) * 100, 0);
    }
    for (size_t i = 0; i < CASES; i++) {
        const struct stack_growth *g = &stack_history(ids[i])->growth;
        uint64_t live = stack_get(ids[i])->live_bytes;
        int growing = growth_suspect(g, live, &growth);
        int released = growth_released(g, live, &growth);
        if (growing != cases[i].growing || released != cases[i].released)
            fprintf(stderr, "%s: growing %d, released %d\n", cases[i].name, growing, released);
        CHECK_EQ(growing, cases[i].growing);
        CHECK_EQ(released, cases[i].released);
    }
    /* While it grew: 1 MiB at 0.1 s to 19 MiB at 1.9 s, 10 MiB a second. */
    const struct stack_growth *first = &stack_history(ids[0])->growth;
    CHECK_EQ(first->peak_bytes, 19 * MiB);
    CHECK_EQ(first->peak_sample, 19);
    CHECK_EQ(growth_peak_rate(first, &growth), 10 * MiB);
}

/* A new stack (frames unlike test_series'), its totals empty. */
static uint32_t new_stack(uintptr_t n)
{
    uintptr_t frames[2] = {0x3000 + n, 0x4000};
    return stack_intern(frames, 2, stack_hash(frames, 2));
}

/* What tracker_lock does before a sample: every pending change moved. */
static void time_sample(uint32_t ms)
{
    stack_totals_flush();
    growth_sample(ms, 0);
}

/* A stack that keeps 512 bytes twice a step and makes a temporary (8 MiB,
 * past the pending slack, or 4 KiB, within it) it frees within the step,
 * sampled twice a step: once its temporary is freed and while it is alive
 * (where the tracer thread's look and the program's pauses put clock
 * samples). Its bytes at the samples go up and down by the temporary; its
 * low points rise at each sample. From thread 1, whose pending change
 * holds the step's events, and from thread 0, whose every event moves the
 * record at once: the same. A temporary alone beside it has a low point of
 * 0 throughout, never seen; a stack that only allocates is first seen a
 * sample after its first block (its low point since the sample before is
 * that sample's bytes). */
static void test_low_points(int thread, uintptr_t n, uint64_t size)
{
    growth_reset();
    uint32_t leak = new_stack(n), temporary = new_stack(n + 1), only = new_stack(n + 2);
    struct stack_record *s = stack_get(leak), *t = stack_get(temporary), *o = stack_get(only);
    uint32_t ms = 0;
    for (int step = 0; step < 20; step++) {
        stack_totals_alloc(thread, s, leak, 512);
        stack_totals_alloc(thread, o, only, 512);
        time_sample(ms += 50);                  /* the temporaries gone */
        stack_totals_alloc(thread, s, leak, size);
        stack_totals_alloc(thread, t, temporary, 2 * size);
        stack_totals_alloc(thread, s, leak, 512);
        time_sample(ms += 50);                  /* alive */
        stack_totals_free(thread, s, leak, size, 0);
        stack_totals_free(thread, t, temporary, 2 * size, 0);
    }
    const struct stack_growth *g = &stack_history(leak)->growth;
    CHECK(growth_suspect(g, s->live_bytes, &growth));
    CHECK_EQ(stack_history(leak)->shows_moments, 0);
    CHECK_EQ(g->first_sample, 2);
    CHECK_EQ(g->rises, 38);
    CHECK_EQ(g->falls, 0);
    CHECK_EQ(g->last_bytes, 39 * 512);          /* the low point, before the last keep */
    CHECK_EQ(g->peak_bytes, 39 * 512);
    CHECK_EQ(stack_history(temporary)->growth.first_sample, 0);
    const struct stack_growth *h = &stack_history(only)->growth;
    CHECK_EQ(h->first_sample, 2);
    CHECK_EQ(h->first_bytes, 512);
    /* The program's end reads the bytes as they are: all 40 kept. */
    growth_end(ms += 50);
    CHECK_EQ(g->last_bytes, 40 * 512);
    CHECK(growth_suspect(g, s->live_bytes, &growth));
    CHECK_EQ(stack_history(temporary)->growth.first_sample, 0);
}

/* A buffer freed, then made again 64 KiB larger at each step, sampled once
 * a step: its low points are 0 (it held nothing between the free and the
 * allocation), its bytes at the samples rise every time. It is growing, on
 * those. */
static void test_remade(int thread, uintptr_t n)
{
    growth_reset();
    uint32_t id = new_stack(n);
    struct stack_record *s = stack_get(id);
    uint32_t ms = 0;
    for (uint64_t step = 1; step <= 20; step++) {
        if (step > 1)
            stack_totals_free(thread, s, id, (step - 1) * 65536, 0);
        stack_totals_alloc(thread, s, id, step * 65536);
        time_sample(ms += 50);
    }
    const struct stack_history *h = stack_history(id);
    CHECK(growth_suspect(&h->growth, s->live_bytes, &growth));
    CHECK_EQ(h->shows_moments, 1);
    CHECK_EQ(h->growth.last_bytes, 20 * 65536);
    CHECK_EQ(h->other.first_sample, 0);         /* its low points: never above 0 */
}

/* The same steps at marks, read at their bytes at each mark as a clock
 * sample once read them: 8 MiB up and down, not growing. A mark is where
 * the program says a step ends, so its bytes are taken as they are; a
 * stack that only allocates is then seen at the first mark after its
 * first block. */
static void test_marks(void)
{
    growth_reset();
    uint32_t leak = new_stack(10), only = new_stack(11);
    struct stack_record *s = stack_get(leak), *o = stack_get(only);
    uint32_t ms = 0;
    for (int step = 0; step < 20; step++) {
        stack_totals_alloc(1, s, leak, 512);
        stack_totals_alloc(1, o, only, 512);
        stack_totals_flush();
        growth_sample(ms += 50, 1);
        stack_totals_alloc(1, s, leak, 8 * MiB);
        stack_totals_alloc(1, s, leak, 512);
        stack_totals_flush();
        growth_sample(ms += 50, 1);
        stack_totals_free(1, s, leak, 8 * MiB, 0);
    }
    const struct stack_growth *g = &stack_history(leak)->growth;
    CHECK(!growth_suspect(g, s->live_bytes, &growth));
    CHECK_EQ(g->falls, 19);
    const struct stack_growth *h = &stack_history(only)->growth;
    CHECK_EQ(h->first_sample, 1);
    CHECK_EQ(h->first_bytes, 512);
}

int main(void)
{
    stack_init(dlsym);
    config.sample_ms = 50;
    test_series();
    test_low_points(1, 20, 8 * MiB);
    test_low_points(1, 30, 4096);
    test_low_points(0, 40, 8 * MiB);
    test_remade(1, 50);
    test_remade(0, 60);
    test_marks();
    return check_done("growth");
}
