/* test_report.c - two reports finished at once are each in their own order.
 *
 * An OOM report and a snapshot can be finished by two threads at the same
 * moment. Each sorts its stacks by its own figures: two threads here finish
 * reports whose stacks rank in different orders, over and over, and every
 * report must come out in its own order (tests/integration/reports_at_once.c
 * is the same through the preloaded library, rarely at the very same moment). */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "report.h"

#define STACKS 2000
#define ROUNDS 200

/* Live bytes of stack `id` in the reports of thread `seed`: a different
 * ranking for each seed, every figure distinct. */
static uint64_t live_bytes(uint32_t id, unsigned seed)
{
    return (uint64_t)(id * (seed * 2 + 1) % 2003) * 4096 + id;
}

static int finish(struct report *r, unsigned seed)
{
    memset(r, 0, sizeof(*r));
    report_options_of(&config, &r->options);
    r->stack_count = STACKS;
    r->stacks = report_alloc(r, STACKS * sizeof(struct stack));
    r->frames = report_alloc(r, sizeof(uintptr_t));           /* stacks of no frames */
    r->blocks = report_alloc(r, sizeof(struct report_block)); /* and no live block */
    if (!r->stacks || !r->frames || !r->blocks)
        return -1;
    for (uint32_t id = 1; id <= STACKS; id++) {
        struct stack_stats *s = &r->stacks[id - 1].stats;
        s->live_blocks = 1;
        s->live_bytes = live_bytes(id, seed);
        s->peak_live_bytes = live_bytes(id, seed + 1);
    }
    return report_finish(r, NULL);
}

/* Whether r->shown is by live bytes and r->by_peak by peak, highest first. */
static int in_order(const struct report *r)
{
    if (r->shown_count != STACKS)
        return 0;
    for (uint32_t i = 1; i < r->shown_count; i++) {
        const struct stack_stats *a = &r->stacks[r->shown[i - 1] - 1].stats;
        const struct stack_stats *b = &r->stacks[r->shown[i] - 1].stats;
        const struct stack_stats *c = &r->stacks[r->by_peak[i - 1] - 1].stats;
        const struct stack_stats *d = &r->stacks[r->by_peak[i] - 1].stats;
        if (a->live_bytes < b->live_bytes || c->peak_live_bytes < d->peak_live_bytes)
            return 0;
    }
    return 1;
}

struct worker {
    unsigned seed;
    int wrong, failed;
};

static void *finish_many(void *argument)
{
    struct worker *w = argument;
    for (int round = 0; round < ROUNDS; round++) {
        struct report r;
        if (finish(&r, w->seed) < 0)
            w->failed++;
        else if (!in_order(&r))
            w->wrong++;
        report_release(&r);
    }
    return NULL;
}

int main(void)
{
    struct worker workers[2] = {{1, 0, 0}, {7, 0, 0}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, finish_many, &workers[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(workers[i].failed, 0);
        CHECK_EQ(workers[i].wrong, 0);
    }
    return check_done("test_report");
}
