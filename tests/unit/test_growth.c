/* test_growth.c - the growth verdicts (growth.c) on series of a stack's low
 * points fed through the real observations: growing (kept memory still
 * rising at the end), released (grew as a leak does, then freed at the run's
 * last observations), and the series that must be neither (a drop in the
 * middle, a sawtooth, a cache that filled and stayed, a steady loop however
 * long); then what an observation reads through the stacks' totals
 * (stack_totals.c): the low point since the one before, at a mark and the
 * program's end the bytes at that moment; and the grid: observations of a
 * long run merged in pairs, never more than GROWTH_SLOTS. The rate per call
 * divides what a site kept by the calls it made meanwhile, the temporaries
 * it made among them; at marks there is none. */
#include <dlfcn.h>
#include <stdint.h>

#include "check.h"
#include "growth.h"
#include "stack_totals.h"
#include "stacks.h"

#define SAMPLES 20
#define MiB (1ull << 20)

/* Low points, in MiB, at observations 1..SAMPLES; one stack per series. */
struct series {
    const char *name;
    uint64_t mib[SAMPLES];
    int growing, released;
};

static const struct series cases[] = {
    {"steady rise, dropped at the last observation",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0},
     0,
     1},
    {"steady rise, flat, dropped 2 observations after its peak",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 18, 0},
     0,
     1},
    {"steady rise, flat twice, dropped 3 observations after its peak",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 17, 17, 0},
     0,
     0},
    {"steady rise, then flat for its last two observations: still held",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 18, 18},
     1,
     0},
    {"the same drop in the middle, then steady",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
     0,
     0},
    {"sawtooth whose highest tooth is the last",
     {1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 4, 0},
     0,
     0},
    {"a cache that filled, stayed, and was freed at the end",
     {4, 8, 12, 16, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 0},
     0,
     0},
    {"a cache that filled, then stayed",
     {4, 8, 12, 16, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20},
     0,
     0},
    {"a rise still going at the end",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
     1,
     0},
    {"a rise with a large temporary at every other observation",
     {9, 2, 11, 4, 13, 6, 15, 8, 17, 10, 19, 12, 21, 14, 23, 16, 25, 18, 27, 20},
     1,
     0},
    {"steady, with a large temporary at every other observation",
     {9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1},
     0,
     0},
    {"a rise, half freed at the last observation: what it kept rose only at first",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 10},
     0,
     1},
    {"three rises only", {1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4}, 0, 0},
    {"steady rise, then freed at every one of its last 4 observations",
     {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 12, 8, 4, 0},
     0,
     1},
};
#define CASES (sizeof(cases) / sizeof(cases[0]))

/* An observation due now, as the tracker takes it: every pending change
 * moved, then growth_tick at the event it was due. */
static void observe(uint32_t ms)
{
    stack_totals_flush();
    growth_tick(growth.next_due, ms);
}

/* Stack `id`'s summary as a report reads it (growth_view, growth_of). */
static int verdicts(uint32_t id, int *released, struct stack_growth *g)
{
    struct growth_state view;
    stack_totals_flush();
    growth_view(&view, growth.slot_ms[growth.samples ? growth.samples - 1 : 0]);
    growth_of(id, &view, g);
    uint64_t live = stack_get(id)->live_bytes;
    if (released)
        *released = growth_released(g, live, &view);
    return growth_suspect(g, live, &view);
}

/* The verdicts on each case's series, its low points set as they are; the
 * last observation is the program's end. */
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
        if (n + 1 < SAMPLES)
            observe((uint32_t)(n + 1) * 100);
        else
            growth_end((uint32_t)(n + 1) * 100);
    }
    CHECK_EQ(growth.samples, SAMPLES);
    for (size_t i = 0; i < CASES; i++) {
        struct stack_growth g;
        int released, growing = verdicts(ids[i], &released, &g);
        if (growing != cases[i].growing || released != cases[i].released)
            fprintf(stderr, "%s: growing %d, released %d\n", cases[i].name, growing, released);
        CHECK_EQ(growing, cases[i].growing);
        CHECK_EQ(released, cases[i].released);
    }
    /* While it grew: 1 MiB at 0.1 s to 19 MiB at 1.9 s, 10 MiB a second. */
    struct stack_growth first;
    verdicts(ids[0], NULL, &first);
    CHECK_EQ(first.peak_bytes, 19 * MiB);
    CHECK_EQ(first.peak_sample, 19);
    CHECK_EQ(growth_peak_rate(&first, &growth), 10 * MiB);
    /* The rise beside temporaries: what it kept, 2 MiB to 20 MiB. */
    struct stack_growth noisy;
    verdicts(ids[9], NULL, &noisy);
    CHECK_EQ(noisy.first_bytes, 2 * MiB);
    CHECK_EQ(noisy.last_bytes, 20 * MiB);
    CHECK_EQ(noisy.rises, 9);
}

/* A new stack (frames unlike test_series'), its totals empty. */
static uint32_t new_stack(uintptr_t n)
{
    uintptr_t frames[2] = {0x3000 + n, 0x4000};
    return stack_intern(frames, 2, stack_hash(frames, 2));
}

/* A stack that keeps 512 bytes twice a step and makes a temporary (8 MiB,
 * past the pending slack, or 4 KiB, within it) it frees within the step,
 * observed twice a step: once its temporary is freed and while it is alive.
 * Its bytes at the observations go up and down by the temporary; what it
 * kept rises at each. From thread 1, whose pending change holds the step's
 * events, and from thread 0, whose every event moves the record at once:
 * the same. A temporary alone beside it is never growing. */
static void test_low_points(int thread, uintptr_t n, uint64_t size)
{
    growth_reset();
    uint32_t leak = new_stack(n), temporary = new_stack(n + 1);
    struct stack_record *s = stack_get(leak), *t = stack_get(temporary);
    uint32_t ms = 0;
    for (int step = 0; step < 20; step++) {
        stack_totals_alloc(thread, s, leak, 512);
        observe(ms += 50); /* the temporaries gone */
        stack_totals_alloc(thread, s, leak, size);
        stack_totals_alloc(thread, t, temporary, 2 * size);
        stack_totals_alloc(thread, s, leak, 512);
        observe(ms += 50); /* alive */
        stack_totals_free(thread, s, leak, size, 0);
        stack_totals_free(thread, t, temporary, 2 * size, 0);
    }
    struct stack_growth g;
    CHECK(verdicts(leak, NULL, &g));
    CHECK_EQ(g.falls, 0);             /* the floors never fall */
    CHECK_EQ(g.last_bytes, 40 * 512); /* all kept, the temporaries gone */
    CHECK(!verdicts(temporary, NULL, &g));
    /* The program's end reads the bytes as they are: all 40 kept. */
    growth_end(ms += 50);
    CHECK(verdicts(leak, NULL, &g));
    CHECK_EQ(g.last_bytes, 40 * 512);
    /* Three calls a step keep 1 KiB: from its first floor (512 bytes, at
     * the second observation, where one call was made), 39 blocks kept over
     * the other 59 calls. */
    CHECK_EQ(g.calls, 59);
    CHECK_EQ(growth_call_rate(&g), 39.0 * 512 / 59);
    CHECK(!verdicts(temporary, NULL, &g));
}

/* A buffer freed, then made again 64 KiB larger at each step, observed once
 * a step: its floors are 0 (it held nothing between the free and the
 * allocation), its bytes at the observations rise every time: growing, on
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
        observe(ms += 50);
    }
    struct stack_growth g;
    CHECK(verdicts(id, NULL, &g));
    CHECK_EQ(g.last_bytes, 20 * 65536);
}

/* Steps marked in their middle, where an 8 MiB temporary is alive at every
 * other mark: what the line kept (512 bytes twice a step) rises at every
 * mark, and it is growing; its bytes at the marks fall half the time. A
 * stack of temporaries alone is not. */
static void test_marks(void)
{
    growth_reset();
    uint32_t leak = new_stack(10), temporary = new_stack(11);
    struct stack_record *s = stack_get(leak), *t = stack_get(temporary);
    uint32_t ms = 0;
    for (int step = 0; step < 20; step++) {
        stack_totals_alloc(1, s, leak, 512);
        stack_totals_flush();
        growth_mark(ms += 50);
        stack_totals_alloc(1, s, leak, 8 * MiB);
        stack_totals_alloc(1, t, temporary, 8 * MiB);
        stack_totals_alloc(1, s, leak, 512);
        stack_totals_flush();
        growth_mark(ms += 50);
        stack_totals_free(1, s, leak, 8 * MiB, 0);
        stack_totals_free(1, t, temporary, 8 * MiB, 0);
    }
    CHECK(growth.mode == GROWTH_MARKS);
    struct stack_growth g, other;
    CHECK(verdicts(leak, NULL, &g));
    CHECK(!verdicts(temporary, NULL, &other));
    /* 40 marks on a grid of 64: one each; 512 bytes a mark, about. */
    CHECK_EQ(growth.samples, 40);
    double rate = growth_rate(&g, &growth);
    CHECK(rate > 400 && rate < 600);
    CHECK_EQ(g.calls, 0); /* per mark is per step: no rate per call */
    CHECK_EQ(growth_call_rate(&g), 0);
}

/* A long run: 5,000 observations due, on a grid that never holds more than
 * GROWTH_SLOTS. A line keeping 1 KiB every 10 events beside a 4 MiB
 * temporary made and freed at every other event is growing; a steady loop
 * with the same temporaries never is, nor a warm-up that filled and held
 * from the first tenth of the run on. The events are those of one run, so
 * the verdicts are the same at any grid. */
static void test_grid(void)
{
    growth_reset();
    uint32_t leak = new_stack(70), steady = new_stack(71), warm = new_stack(72);
    struct stack_record *l = stack_get(leak), *s = stack_get(steady), *w = stack_get(warm);
    stack_totals_alloc(1, s, steady, MiB);
    uint32_t ms = 0;
    uint64_t work = 0;
    for (int event = 1; event <= 5000; event++) {
        if (event % 10 == 0)
            stack_totals_alloc(1, l, leak, 1024);
        if (event % 2) {
            stack_totals_alloc(1, l, leak, 4 * MiB);
            stack_totals_alloc(1, s, steady, 4 * MiB);
        } else {
            stack_totals_free(1, l, leak, 4 * MiB, 0);
            stack_totals_free(1, s, steady, 4 * MiB, 0);
        }
        if (event < 500 && event % 5 == 0)
            stack_totals_alloc(1, w, warm, 4096);
        work++;
        if (growth_due(work)) {
            stack_totals_flush();
            growth_tick(work, ms += 1);
        }
        CHECK(growth.samples < GROWTH_SLOTS);
    }
    CHECK(growth.samples >= GROWTH_SLOTS / 2);
    CHECK_EQ(growth.every, 128); /* 5,000 events, 32 to 64 observations */
    struct stack_growth g;
    CHECK(verdicts(leak, NULL, &g));
    /* Per call of the line, on the merged grid: 1 KiB kept over 6 calls
     * (its temporaries among them), 170.7 bytes; within an observation's
     * 128 events (77 calls) of the span's 3,000 or so. */
    CHECK(growth_call_rate(&g) > 166 && growth_call_rate(&g) < 176);
    uint64_t expected = (g.last_bytes - g.first_bytes) / 1024 * 6;
    CHECK(g.calls + 77 > expected && g.calls < expected + 77);
    CHECK(!verdicts(steady, NULL, &g));
    CHECK(!verdicts(warm, NULL, &g));
}

int main(void)
{
    stack_init(dlsym);
    test_series();
    test_low_points(1, 20, 8 * MiB);
    test_low_points(1, 30, 4096);
    test_low_points(0, 40, 8 * MiB);
    test_remade(1, 50);
    test_remade(0, 60);
    test_marks();
    test_grid();
    return check_done("growth");
}
