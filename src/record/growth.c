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

/* Series `g` at sample number `sample`, at `now_ms`, at `bytes`. */
static void record_sample(struct stack_growth *g, uint64_t bytes, uint32_t sample,
                          uint32_t now_ms)
{
    if (!g->first_sample) {
        if (!bytes)
            return;
        g->first_bytes = g->last_bytes = g->peak_bytes = bytes;
        g->first_ms = g->last_ms = g->peak_ms = now_ms;
        g->first_sample = g->peak_sample = sample;
        return;
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

/* Should reports read a stack's bytes at the samples (`moments`) rather
 * than its low points (`lows`)? Only when the low points make no suspect
 * and the moments make one, or a site that grew, then was freed. */
static int shows_moments(const struct stack_growth *lows, const struct stack_growth *moments,
                         uint64_t live_bytes)
{
    if (growth_suspect(lows, live_bytes, &growth))
        return 0;
    return growth_suspect(moments, live_bytes, &growth) ||
           (growth_released(moments, live_bytes, &growth) &&
            !growth_released(lows, live_bytes, &growth));
}

/* One pass over the stack table: O(stacks), once a second at most by
 * default. Each stack's low point since the sample before, and its bytes
 * now: with `at_moment`, both its bytes now.
 *
 * A clock's sample falls wherever the program is: in the middle of a step,
 * a site that keeps a small tensor each step and makes large temporaries it
 * frees within the step read its temporaries at one sample and not at the
 * next, up, down, and was not called growing (training_mix's loss line, on
 * a GPU). Its low point leaves out whatever it freed between samples,
 * temporaries alive at the sample included, and rises with what it keeps.
 * But a site that frees all it holds at some moment between two samples and
 * then allocates more (a buffer freed, then made again larger at each step)
 * has a low point of 0, and grows all the same: its bytes at the samples
 * say so. So both series are kept, the history's `growth` the one reports
 * read, `other` the other: the low points, unless they make no suspect and
 * the bytes at the samples do (shows_moments). A site is growing, or grew,
 * then was freed, when either reading says so.
 *
 * A mark is the end of a step, where the program says its temporaries are
 * gone, and the program's end is a moment of its own too: there both read
 * the bytes as they are, which a low point would read one interval late (a
 * site that only allocates has its low point at the sample before). */
static void sample(uint32_t now_ms, int at_moment)
{
    uint32_t sample = ++growth.samples;
    __atomic_store_n(&growth.last_ms, now_ms, __ATOMIC_RELAXED);
    series_sample(now_ms);
    uint32_t count = stack_count();
    for (uint32_t id = 1; id <= count; id++) {
        struct stack_history *h = stack_history(id);
        uint64_t now = stack_get(id)->live_bytes;
        uint64_t low = at_moment || h->low_bytes > now ? now : h->low_bytes;
        h->low_bytes = now;
        struct stack_growth *lows = h->shows_moments ? &h->other : &h->growth;
        struct stack_growth *moments = h->shows_moments ? &h->growth : &h->other;
        record_sample(lows, low, sample, now_ms);
        record_sample(moments, now, sample, now_ms);
        uint32_t show = (uint32_t)shows_moments(lows, moments, now);
        if (show != h->shows_moments) {
            struct stack_growth moved = *moments;
            *moments = *lows;
            *lows = moved;
            h->shows_moments = show;
        }
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
