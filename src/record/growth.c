/* growth.c - which allocation sites keep growing (see growth.h). */
#include <string.h>

#include "arena.h"
#include "config.h"
#include "growth.h"
#include "series.h"

struct growth_state growth;

/* A stack's observations: GROWTH_SLOTS floors, then as many moments, then
 * as many of its allocation counts (struct stack_record's `allocations` at
 * each: the calls its rate per call divides by), on the grid's slots.
 * Carved SERIES_PER_CHUNK at a time from whole pages; a stack gets one at
 * the first observation where it held memory, zero before. */
#define SERIES_CALLS (2 * GROWTH_SLOTS)
#define SERIES_WORDS (3 * GROWTH_SLOTS)
#define SERIES_PER_CHUNK 64
static uint64_t *spare;
static uint32_t spare_left;

static uint64_t *series_for(struct stack_history *h)
{
    if (h->series)
        return h->series;
    if (!spare_left) {
        spare = pages_alloc(SERIES_PER_CHUNK * SERIES_WORDS * sizeof(uint64_t));
        if (!spare)
            return NULL;
        spare_left = SERIES_PER_CHUNK;
    }
    h->series = spare;
    spare += SERIES_WORDS;
    spare_left--;
    return h->series;
}

void growth_reset(void)
{
    memset(&growth, 0, sizeof(growth));
    growth.mode = GROWTH_WORK;
    growth.every = 1;
    growth.next_due = config.growth ? 1 : UINT64_MAX;
    spare = NULL; /* a forked child's stacks start anew (stack_reset) */
    spare_left = 0;
    series_reset();
}

/* A full grid: neighbours merged in pairs (the lower floor, the later
 * moment, count and time), so that each slot spans twice the events from now on. */
static void merge_pairs(void)
{
    uint32_t half = GROWTH_SLOTS / 2;
    for (uint32_t i = 0; i < half; i++)
        growth.slot_ms[i] = growth.slot_ms[2 * i + 1];
    uint32_t count = stack_count();
    for (uint32_t id = 1; id <= count; id++) {
        uint64_t *s = stack_history(id)->series;
        if (!s)
            continue;
        for (uint32_t i = 0; i < half; i++) {
            uint64_t a = s[2 * i], b = s[2 * i + 1];
            s[i] = a < b ? a : b;
            s[GROWTH_SLOTS + i] = s[GROWTH_SLOTS + 2 * i + 1];
            s[SERIES_CALLS + i] = s[SERIES_CALLS + 2 * i + 1];
        }
    }
    growth.samples = half;
    growth.every *= 2;
}

/* One observation of every stack, at slot growth.samples: its low point
 * since the one before, or with `at_moment` its bytes now (a mark or the
 * program's end is where the program says its temporaries are gone), its
 * bytes now and its allocations so far. O(stacks); at most 64 per doubling
 * of the run's events. The totals are exact here: tracker_lock moved every
 * thread's pending change into them, so counting costs no event anything. */
static void observe_all(uint32_t now_ms, int at_moment)
{
    uint32_t slot = growth.samples++;
    growth.slot_ms[slot] = now_ms;
    series_sample(now_ms);
    uint32_t count = stack_count();
    for (uint32_t id = 1; id <= count; id++) {
        struct stack_history *h = stack_history(id);
        const struct stack_record *record = stack_get(id);
        uint64_t now = record->live_bytes;
        uint64_t low = at_moment || h->low_bytes > now ? now : h->low_bytes;
        h->low_bytes = now;
        uint64_t *s = h->series || now ? series_for(h) : NULL;
        if (s) {
            s[slot] = low;
            s[GROWTH_SLOTS + slot] = now;
            s[SERIES_CALLS + slot] = record->allocations;
        }
    }
    if (growth.samples == GROWTH_SLOTS)
        merge_pairs();
}

void growth_tick(uint64_t work, uint32_t now_ms)
{
    if (growth.mode != GROWTH_WORK || growth.ended || !growth_due(work))
        return;
    observe_all(now_ms, 0);
    __atomic_store_n(&growth.next_due, work + growth.every, __ATOMIC_RELAXED);
}

/* The first mark starts the grid anew: observations at the program's own
 * step boundaries, which the events' grid only approximated. */
void growth_mark(uint32_t now_ms)
{
    if (growth.ended || !config.growth)
        return;
    if (growth.mode != GROWTH_MARKS) {
        growth.mode = GROWTH_MARKS;
        __atomic_store_n(&growth.next_due, UINT64_MAX, __ATOMIC_RELAXED);
        growth.samples = 0;
        growth.every = 1;
        uint32_t count = stack_count();
        for (uint32_t id = 1; id <= count; id++) {
            uint64_t *s = stack_history(id)->series;
            if (s)
                memset(s, 0, SERIES_WORDS * sizeof(uint64_t));
        }
    }
    if (++growth.marks % growth.every == 0)
        observe_all(now_ms, 1);
}

void growth_end(uint32_t now_ms)
{
    if (growth.ended)
        return;
    if (config.growth)
        observe_all(now_ms, 1);
    growth.ended = 1;
    __atomic_store_n(&growth.next_due, UINT64_MAX, __ATOMIC_RELAXED);
}

void growth_view(struct growth_state *view, uint32_t now_ms)
{
    *view = growth;
    if (!growth.ended && growth.samples) {
        view->slot_ms[view->samples++] = now_ms;
        view->now_slot = 1;
    }
}

/* The summary of values[0..n), at times ms[0..n), into *g's first/last/
 * rises/quarters figures (up to `n`) or, with `peak`, its peak_* ones:
 * read as retained bytes (the least held at that observation or later). */
static void summarize(const uint64_t *values, uint32_t n, const uint32_t *ms,
                      struct stack_growth *g, int peak)
{
    uint32_t first = 0;
    while (first < n && !values[first])
        first++;
    if (first == n)
        return;
    uint64_t retained[GROWTH_SLOTS + 1];
    retained[n - 1] = values[n - 1];
    for (uint32_t i = n - 1; i-- > first;)
        retained[i] = values[i] < retained[i + 1] ? values[i] : retained[i + 1];
    uint32_t rises = 0, falls = 0, first_rise = 0;
    for (uint32_t i = first + 1; i < n; i++) {
        falls += values[i] < values[i - 1];
        if (retained[i] > retained[i - 1]) {
            if (!rises)
                first_rise = i;
            rises++;
        }
    }
    uint32_t base = rises ? first_rise - 1 : first;
    uint32_t quarters = 0;
    for (uint32_t i = base + 1; rises && i < n; i++)
        if (retained[i] > retained[i - 1])
            quarters |= 1u << ((i - base - 1) * 4 / (n - base - 1));
    if (peak) {
        g->peak_base = base + 1;
        g->peak_rises = rises;
        g->peak_falls = falls;
        g->peak_quarters = quarters;
        if (!g->rises) { /* all it kept was freed: it grew from here */
            g->first_sample = base + 1;
            g->first_bytes = retained[base];
            g->first_ms = ms[base];
        }
        return;
    }
    g->first_sample = base + 1;
    g->first_bytes = retained[base];
    g->first_ms = ms[base];
    g->last_bytes = retained[n - 1];
    g->last_ms = ms[n - 1];
    g->rises = rises;
    g->falls = falls;
    g->quarters = quarters;
    uint32_t top = first;
    for (uint32_t i = first + 1; i < n; i++)
        if (values[i] > values[top])
            top = i;
    g->peak_bytes = values[top];
    g->peak_ms = ms[top];
    g->peak_sample = top + 1;
    uint32_t settled = n - 1;
    while (settled > top && values[settled - 1] == values[n - 1])
        settled--;
    g->falls_to_end = settled + 2 >= n;
    for (uint32_t i = top + 1; i <= settled && g->falls_to_end; i++)
        g->falls_to_end = values[i] < values[i - 1];
}

/* The summary of one series (values on the view's slots). */
static void summary_of(const uint64_t *values, uint32_t n, const struct growth_state *view,
                       struct stack_growth *g)
{
    memset(g, 0, sizeof(*g));
    summarize(values, n, view->slot_ms, g, 0);
    if (g->peak_sample)
        summarize(values, g->peak_sample, view->slot_ms, g, 1);
}

static int has_verdict(const struct stack_growth *g, uint64_t live_bytes,
                       const struct growth_state *view)
{
    return growth_suspect(g, live_bytes, view) || growth_released(g, live_bytes, view);
}

/* The allocations the stack made by the time its series' value at
 * observation `at` (from 1; 0: none) stood, of observations over its work:
 * counts[] are taken at each observation's moment, where a moment's value
 * stands (`floors` 0, or the program's end). A floor is the least since the
 * observation before, which a site that only keeps reaches just after that
 * one: its count then. A merged floor is its pair's lower, the first's for
 * such a site, and the observation before the pair kept its later count. */
static uint64_t calls_at(const uint64_t *counts, uint32_t at, int floors,
                         const struct growth_state *view)
{
    if (!at)
        return 0;
    int moment = !floors || (view->ended && at == view->samples);
    return moment ? counts[at - 1] : at > 1 ? counts[at - 2] : 0;
}

/* The calls from observation `from` to observation `to` (from 1). */
static uint64_t calls_between(const uint64_t *counts, uint32_t from, uint32_t to, int floors,
                              const struct growth_state *view)
{
    uint64_t first = calls_at(counts, from, floors, view),
             last = calls_at(counts, to, floors, view);
    return from && to > from && last > first ? last - first : 0;
}

void growth_of(uint32_t id, const struct growth_state *view, struct stack_growth *out)
{
    memset(out, 0, sizeof(*out));
    const struct stack_history *h = stack_history(id);
    if (!h || !h->series || view->samples == 0)
        return;
    const struct stack_record *record = stack_get(id);
    uint32_t n = view->samples, taken = n - (uint32_t)view->now_slot;
    uint64_t floors[GROWTH_SLOTS + 1], moments[GROWTH_SLOTS + 1], calls[GROWTH_SLOTS + 1];
    memcpy(floors, h->series, taken * sizeof(uint64_t));
    memcpy(moments, h->series + GROWTH_SLOTS, taken * sizeof(uint64_t));
    memcpy(calls, h->series + SERIES_CALLS, taken * sizeof(uint64_t));
    uint64_t now = record->live_bytes;
    if (view->now_slot) { /* at marks, a moment: as a mark reads it */
        floors[taken] = h->low_bytes < now && view->mode == GROWTH_WORK ? h->low_bytes : now;
        moments[taken] = now;
        calls[taken] = record->allocations;
    }
    /* The floors unless they make no verdict and the moments do, each
     * judged on the bytes a report judges it on (report_growth_bytes): once
     * the program ended, what it held then, not what the teardown left. */
    struct stack_growth by_moments;
    int by_floors = 1;
    summary_of(floors, n, view, out);
    if (!has_verdict(out, view->ended ? out->last_bytes : now, view)) {
        summary_of(moments, n, view, &by_moments);
        if (has_verdict(&by_moments, view->ended ? by_moments.last_bytes : now, view)) {
            *out = by_moments;
            by_floors = 0;
        }
    }
    if (view->mode == GROWTH_MARKS) /* per mark is per step: no rate per call */
        return;
    out->calls = calls_between(calls, out->first_sample, n, by_floors, view);
    out->peak_calls = calls_between(calls, out->first_sample, out->peak_sample, by_floors, view);
}
