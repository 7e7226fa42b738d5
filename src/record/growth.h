/* growth.h - which allocation sites keep growing while the program runs.
 *
 * The tracker samples every stack's live bytes now and then (growth_sample)
 * and each stack keeps a summary of how they moved (struct stack_growth in
 * stacks.h): a few numbers, no history. A sample over time reads each
 * stack's low point since the sample before, so a temporary that is freed
 * between samples never counts, whether or not it was alive when one was
 * taken; and its bytes at that moment, which reports read only where the
 * low points make no suspect and they do (growth.c says why; stack_totals.c
 * how the low point is kept). A stack is a leak suspect when its series
 * rose at most of the samples since it first held memory, did not fall
 * back, and was still rising at the end (growth_suspect); it grew, then was
 * freed near the end when its series up to its peak was a suspect's and the
 * peak came at the run's last samples (growth_released).
 *
 * When samples are taken: at every cumemtrace_mark() once the program makes
 * one (an iteration boundary it chose), otherwise every CUMEMTRACE_SAMPLE_MS
 * (default 1000) of wall time, checked at allocations. Time rather than a
 * detected iteration pattern, because under a caching allocator (PyTorch,
 * CuPy, JAX) a steady training loop makes no driver allocations at all: no
 * pattern is visible at this level, while growth still shows over time.
 * Samples are taken with every registry shard locked (tracker_lock), so the
 * stacks' live bytes are still; growth_due() is the lock-free check made at
 * each allocation before taking them. */
#ifndef CUMEMTRACE_GROWTH_H
#define CUMEMTRACE_GROWTH_H

#include <stdint.h>

#include "stacks.h"

enum growth_mode { GROWTH_TIME, GROWTH_MARKS };

struct growth_state {
    enum growth_mode mode;
    uint32_t samples;
    uint32_t last_ms;
    int ended;          /* the program ended: no more samples (growth_end) */
};
extern struct growth_state growth;

void growth_reset(void);
/* At an allocation, no lock held: is a time sample due? */
int growth_due(uint32_t now_ms);
/* Take a time sample if one is due (checked again). Lock held. */
void growth_tick(uint32_t now_ms);
/* Take a sample now; `mark` switches to sampling at marks only, which read
 * each stack's bytes at that moment. Lock held. */
void growth_sample(uint32_t now_ms, int mark);
/* The program ended (tracker_program_end): a last sample, then none. What
 * the interpreter's teardown frees afterwards is not the program's doing,
 * so a site that grew to the end stays a suspect. Lock held. */
void growth_end(uint32_t now_ms);

/* For reports, on copies of a stack and of the state: is it a suspect
 * (`live_bytes` is its live bytes now), and its rate in bytes per second
 * (GROWTH_TIME) or per mark (GROWTH_MARKS). */
int growth_suspect(const struct stack_growth *g, uint64_t live_bytes,
                   const struct growth_state *state);
double growth_rate(const struct stack_growth *g, const struct growth_state *state);
/* For reports, the same way: did it grow as a suspect does up to its peak,
 * then fall at the run's last samples (never when growth_suspect)? A list of
 * outputs kept over an epoch and freed when its function returned reaches the
 * OOM all the same. Its rate while it grew, from its first sample to its peak. */
int growth_released(const struct stack_growth *g, uint64_t live_bytes,
                    const struct growth_state *state);
double growth_peak_rate(const struct stack_growth *g, const struct growth_state *state);
/* A rate as whole bytes for printing: 0 below 1 (and for NaN), UINT64_MAX
 * beyond what 64 bits hold. A report read back can carry any figures, and
 * converting a double out of range to an integer is undefined. */
uint64_t growth_rate_bytes(double rate);

#endif
