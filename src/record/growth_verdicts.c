/* growth_verdicts.c - what a stack's growth summary says (growth.h): a
 * suspect, grown then released, and its rate. Read on copies, by reports in
 * the traced process and by the command, which links none of the recording
 * side of growth.c. */
#include <stdint.h>

#include "growth.h"

/* The retained series rose GROWTH_MIN_RISES times or more, in every quarter
 * of the GROWTH_MIN_SPAN or more observations from its first rise to the
 * last, and ends above where it began, as do its bytes now. */
int growth_suspect(const struct stack_growth *g, uint64_t live_bytes,
                   const struct growth_state *state)
{
    return g->first_sample && g->rises >= GROWTH_MIN_RISES &&
           state->samples >= g->first_sample + GROWTH_MIN_SPAN && (g->quarters & 0xf) == 0xf &&
           g->last_bytes > g->first_bytes && live_bytes > g->first_bytes;
}

/* The same rule on the series up to its peak, and the site holds less now;
 * the peak near the end: at one of the last two observations, or followed
 * only by falls down to where it ends, reached at one of the last two (a
 * list of a thousand tensors freed at once is a thousand events: several
 * observations), or in the last tenth of the time since it first held
 * memory. A sawtooth's earlier falls keep what it kept to its peak from
 * rising, a cache that filled and stayed has no fall, and a drop followed by
 * more work, or a peak held for a while before the drop, is not near the
 * end. */
int growth_released(const struct stack_growth *g, uint64_t live_bytes,
                    const struct growth_state *state)
{
    if (!g->peak_sample || growth_suspect(g, live_bytes, state) ||
        g->peak_rises < GROWTH_MIN_RISES || live_bytes >= g->peak_bytes || !state->samples)
        return 0;
    uint32_t end_ms = state->slot_ms[state->samples - 1];
    if (g->peak_sample + 2 < state->samples && !g->falls_to_end &&
        (end_ms < g->peak_ms || (uint64_t)(end_ms - g->peak_ms) * 10 > end_ms - g->first_ms))
        return 0;
    return g->peak_sample >= g->peak_base + GROWTH_MIN_SPAN && (g->peak_quarters & 0xf) == 0xf;
}

/* Bytes gained from `from` to `to` over `observations` or `span_ms`. */
static double rate_between(uint64_t from, uint64_t to, uint32_t observations, uint32_t span_ms,
                           const struct growth_state *state)
{
    if (to <= from)
        return 0;
    double gained = (double)(to - from);
    if (state->mode == GROWTH_MARKS) {
        double marks = (double)observations * (double)(state->every ? state->every : 1);
        return marks > 0 ? gained / marks : 0;
    }
    return span_ms ? gained * 1000.0 / span_ms : 0;
}

double growth_rate(const struct stack_growth *g, const struct growth_state *state)
{
    uint32_t observations = state->samples > g->first_sample ? state->samples - g->first_sample : 0;
    return rate_between(g->first_bytes, g->last_bytes, observations, g->last_ms - g->first_ms,
                        state);
}

double growth_peak_rate(const struct stack_growth *g, const struct growth_state *state)
{
    return rate_between(g->first_bytes, g->peak_bytes,
                        g->peak_sample > g->first_sample ? g->peak_sample - g->first_sample : 0,
                        g->peak_ms - g->first_ms, state);
}

/* Bytes gained from `from` to `to` over `calls` allocations. */
static double per_call(uint64_t from, uint64_t to, uint64_t calls)
{
    return to > from && calls ? (double)(to - from) / (double)calls : 0;
}

double growth_call_rate(const struct stack_growth *g)
{
    return per_call(g->first_bytes, g->last_bytes, g->calls);
}

double growth_peak_call_rate(const struct stack_growth *g)
{
    return per_call(g->first_bytes, g->peak_bytes, g->peak_calls);
}

uint64_t growth_rate_bytes(double rate)
{
    if (!(rate >= 1))
        return 0;
    return rate < 18446744073709551615.0 ? (uint64_t)rate : UINT64_MAX;
}
