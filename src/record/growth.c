/* growth.c - which allocation sites keep growing (see growth.h). */
#include "growth.h"

#include "config.h"
#include "series.h"

struct growth_state growth;

void growth_reset(void)
{
    growth.mode = GROWTH_TIME;
    growth.samples = 0;
    growth.last_ms = 0;
    growth.ended = 0;
    series_reset();
}

int growth_due(uint32_t now_ms)
{
    return __atomic_load_n(&growth.mode, __ATOMIC_RELAXED) == GROWTH_TIME &&
           !__atomic_load_n(&growth.ended, __ATOMIC_RELAXED) &&
           config.sample_ms > 0 &&
           now_ms - __atomic_load_n(&growth.last_ms, __ATOMIC_RELAXED) >=
               (uint32_t)config.sample_ms;
}

void growth_tick(uint32_t now_ms)
{
    if (growth_due(now_ms))
        growth_sample(now_ms, 0);
}

/* One pass over the stack table: O(stacks), once a second at most by
 * default. With `at_moment`, each stack's bytes now; otherwise its low point
 * since the sample before (at most its bytes now). A clock's sample falls
 * wherever the program is: in the middle of a step, a site that keeps a
 * small tensor each step and makes large temporaries it frees within the
 * step read its temporaries at one sample and not at the next, up, down,
 * and was not called growing (training_mix's loss line, on a GPU). Its low
 * point leaves out whatever it freed between samples, temporaries alive at
 * the sample included, and rises with what it keeps. A mark is the end of
 * a step, where the program says its temporaries are gone, and the
 * program's end is a moment of its own too: their bytes are read as they
 * are, which a low point would read one interval late (a site that only
 * allocates has its low point at the sample before). */
static void sample(uint32_t now_ms, int at_moment)
{
    uint32_t sample = ++growth.samples;
    __atomic_store_n(&growth.last_ms, now_ms, __ATOMIC_RELAXED);
    series_sample(now_ms);
    uint32_t count = stack_count();
    for (uint32_t id = 1; id <= count; id++) {
        struct stack_history *h = stack_history(id);
        struct stack_growth *g = &h->growth;
        uint64_t now = stack_get(id)->live_bytes;
        uint64_t bytes = at_moment || h->low_bytes > now ? now : h->low_bytes;
        h->low_bytes = now;
        if (!g->first_sample) {
            if (!bytes)
                continue;
            g->first_bytes = g->last_bytes = g->peak_bytes = bytes;
            g->first_ms = g->last_ms = g->peak_ms = now_ms;
            g->first_sample = g->peak_sample = sample;
            continue;
        }
        if (bytes > g->last_bytes) {
            g->rises++;
            g->last_rise = sample;
        } else if (bytes < g->last_bytes) {
            g->falls++;
        }
        if (bytes > g->peak_bytes) {
            g->peak_bytes = bytes;
            g->peak_ms = now_ms;
            g->peak_sample = sample;
            g->peak_rises = g->rises;
            g->peak_falls = g->falls;
        }
        g->last_bytes = bytes;
        g->last_ms = now_ms;
    }
}

void growth_sample(uint32_t now_ms, int mark)
{
    if (growth.ended)
        return;
    if (mark)
        __atomic_store_n(&growth.mode, GROWTH_MARKS, __ATOMIC_RELAXED);
    sample(now_ms, growth.mode == GROWTH_MARKS);
}

/* Rose at 3 samples or more, at half of those since it first held memory or
 * more, fell at most once for every 4 rises, ended above where it started,
 * and rose at one of the last two samples. A warm-up that fills a cache and
 * then holds steady fails the "half" and "still rising" tests after a few
 * more samples; memory freed at the end fails "ended above". */
int growth_suspect(const struct stack_growth *g, uint64_t live_bytes,
                   const struct growth_state *state)
{
    if (!g->first_sample || g->rises < 3 || g->last_bytes <= g->first_bytes ||
        live_bytes <= g->first_bytes)
        return 0;
    uint32_t since = state->samples - g->first_sample;
    return g->rises * 2 >= since && g->falls * 4 <= g->rises && g->last_rise + 1 >= state->samples;
}

/* Growth's rules on the series up to its peak: rose 3 times or more, at
 * half the samples from the first to the peak or more, fell at most once per
 * 4 rises. "Rose at one of the last two samples" holds at the peak itself,
 * which only a rise reaches. The peak was at most 2 samples before the last
 * and the site holds less now: it was freed near the end. A sawtooth fails
 * the falls, a cache that filled and stayed fails the fall from the peak, and
 * a drop followed by more samples fails "near the end". */
int growth_released(const struct stack_growth *g, uint64_t live_bytes,
                    const struct growth_state *state)
{
    if (!g->first_sample || growth_suspect(g, live_bytes, state) || g->peak_rises < 3 ||
        g->peak_bytes <= g->first_bytes || live_bytes >= g->peak_bytes ||
        g->peak_sample + 2 < state->samples)
        return 0;
    uint32_t since = g->peak_sample - g->first_sample;
    return g->peak_rises * 2 >= since && g->peak_falls * 4 <= g->peak_rises;
}

/* Bytes gained from `from` to `to` over `samples` samples or `span_ms`. */
static double rate_between(uint64_t from, uint64_t to, uint32_t samples, uint32_t span_ms,
                           const struct growth_state *state)
{
    if (to <= from)
        return 0;
    double gained = (double)(to - from);
    if (state->mode == GROWTH_MARKS)
        return samples ? gained / samples : 0;
    return span_ms ? gained * 1000.0 / span_ms : 0;
}

double growth_rate(const struct stack_growth *g, const struct growth_state *state)
{
    uint32_t samples = state->samples > g->first_sample ? state->samples - g->first_sample : 0;
    return rate_between(g->first_bytes, g->last_bytes, samples, g->last_ms - g->first_ms, state);
}

double growth_peak_rate(const struct stack_growth *g, const struct growth_state *state)
{
    return rate_between(g->first_bytes, g->peak_bytes, g->peak_sample - g->first_sample,
                        g->peak_ms - g->first_ms, state);
}

uint64_t growth_rate_bytes(double rate)
{
    if (!(rate >= 1))
        return 0;
    return rate < 18446744073709551615.0 ? (uint64_t)rate : UINT64_MAX;
}

void growth_end(uint32_t now_ms)
{
    if (growth.ended)
        return;
    if (growth.mode == GROWTH_MARKS || config.sample_ms > 0)
        sample(now_ms, 1);
    __atomic_store_n(&growth.ended, 1, __ATOMIC_RELAXED);
}
