/* test_growth.c - the growth verdicts (growth.c) on series of a stack's live
 * bytes fed through the real sampling: growing (still rising at the end),
 * released (grew as a leak does, then freed at the run's last samples), and
 * the series that must be neither (a drop in the middle, a sawtooth, a cache
 * that filled and stayed). */
#include <dlfcn.h>
#include <stdint.h>

#include "check.h"
#include "growth.h"
#include "stacks.h"

#define SAMPLES 20
#define MiB (1ull << 20)

/* Live bytes, in MiB, at samples 1..SAMPLES; one stack per series. */
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

int main(void)
{
    stack_init(dlsym);
    growth_reset();
    uint32_t ids[CASES];
    for (uintptr_t i = 0; i < CASES; i++) {
        uintptr_t frames[2] = {0x1000 + i, 0x2000};
        ids[i] = stack_intern(frames, 2, stack_hash(frames, 2));
    }
    for (int n = 0; n < SAMPLES; n++) {
        for (size_t i = 0; i < CASES; i++)
            stack_get(ids[i])->live_bytes = cases[i].mib[n] * MiB;
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
    return check_done("growth");
}
