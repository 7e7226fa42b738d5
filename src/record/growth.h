/* growth.h - which allocation sites keep growing while the program runs.
 *
 * The clock is the program's own work, not the wall: an observation of every
 * stack is taken after a number of the program's memory events (its
 * allocations and frees, as the tracer numbers them), or at its marks once it
 * makes one (cumemtrace_mark(): an iteration boundary it chose). The same
 * program therefore observes at the same events on every run, however busy
 * the machine, and a short run observes as often as a long one: the
 * observations sit on a grid of GROWTH_SLOTS; when it fills, neighbours are
 * merged in pairs and each observation spans twice the events from then on.
 * A run of any length ends with 32 to 64 of them, spread evenly over its work.
 *
 * What an observation keeps, per stack (growth.c): its floor, the lowest its
 * live bytes went since the observation before (exact: stack_totals.c), which
 * no temporary freed in that span can raise, and its bytes at the moment.
 * Merging two keeps the lower floor and the later moment.
 *
 * The verdict reads each series by what the site kept from then on: at each
 * observation, the least it held at that one or any later ("retained"). A
 * temporary, however large and wherever it falls, is gone at some later
 * observation and leaves the retained series where the kept memory alone
 * puts it; a leak raises it for good. A site is growing when its retained
 * series rose at GROWTH_MIN_RISES observations or more, spread over the whole
 * of its rise (in each quarter of the observations from its first rise to the
 * last), across GROWTH_MIN_SPAN observations or more, and ends above where it
 * began: a warm-up that fills a cache and holds steady has no rise in the
 * last quarter, a loop that holds steady none at all. A site grew, then was
 * freed near the end, when its floors up to their peak meet the same rule and
 * the peak came at one of the run's last observations. The floors are read
 * first; the moments too, for a buffer freed and made again larger (its
 * floor is 0 at every observation).
 *
 * Observations are taken with every registry shard locked (tracker_lock);
 * growth_due() is the lock-free check made at each event. */
#ifndef CUMEMTRACE_GROWTH_H
#define CUMEMTRACE_GROWTH_H

#include <stdint.h>

#include "stacks.h"

#define GROWTH_SLOTS 64
#define GROWTH_MIN_RISES 4
#define GROWTH_MIN_SPAN 8

enum growth_mode { GROWTH_WORK, GROWTH_MARKS };

struct growth_state {
    enum growth_mode mode;
    uint32_t samples;                   /* observations on the grid, at most GROWTH_SLOTS */
    uint64_t every;                     /* events (or marks) one observation spans now */
    uint64_t next_due;                  /* mode work: the event count of the next one */
    uint64_t marks;                     /* mode marks: marks made */
    uint32_t slot_ms[GROWTH_SLOTS + 1]; /* when each ended (+1: a view's "now") */
    int ended;                          /* the program ended: no more (growth_end) */
    int now_slot; /* a view (growth_view): its last slot is "now", not taken */
};
extern struct growth_state growth;

void growth_reset(void);
/* At an event, no lock held: is an observation due at event count `work`? */
static inline int growth_due(uint64_t work)
{
    return work >= __atomic_load_n(&growth.next_due, __ATOMIC_RELAXED);
}
/* Take the observation due at `work`, if it still is. Lock held. */
void growth_tick(uint64_t work, uint32_t now_ms);
/* A mark: from the first on, observations are taken at marks only (every
 * `every`-th), reading each stack's bytes at that moment. Lock held. */
void growth_mark(uint32_t now_ms);
/* The program ended (run_program_end): a last observation, at the
 * moment, then none. What the interpreter's teardown frees afterwards is not
 * the program's doing, so a site that grew to the end stays a suspect. */
void growth_end(uint32_t now_ms);

/* For a report, with the lock held: the state as of `now_ms`, with a last
 * observation for "now" where the program has not ended (nothing is taken:
 * the grid goes on as if no report was made), and a stack's summary on it. */
void growth_view(struct growth_state *view, uint32_t now_ms);
void growth_of(uint32_t id, const struct growth_state *view, struct stack_growth *out);

/* For reports, on copies of a stack and of the state: is it a suspect
 * (`live_bytes` is its live bytes now), and its rate in bytes per second
 * (GROWTH_WORK) or per mark (GROWTH_MARKS). */
int growth_suspect(const struct stack_growth *g, uint64_t live_bytes,
                   const struct growth_state *state);
double growth_rate(const struct stack_growth *g, const struct growth_state *state);
/* Did it grow as a suspect does up to its peak, then fall at the run's last
 * observations (never when growth_suspect)? A list of outputs kept over an
 * epoch and freed when its function returned reaches the OOM all the same.
 * Its rate while it grew, to its peak. */
int growth_released(const struct stack_growth *g, uint64_t live_bytes,
                    const struct growth_state *state);
double growth_peak_rate(const struct stack_growth *g, const struct growth_state *state);
/* Its rate per call of the site: the bytes it kept over its growth span
 * (to its peak) divided by the allocations it made over the same span
 * (stack_growth's calls, peak_calls); 0 when it made none, and at marks
 * (the rate per mark is per step). A clock the program's own work defines
 * where it marks no steps: a loop that keeps one block a step reads one
 * block's size a call, however fast it runs. */
double growth_call_rate(const struct stack_growth *g);
double growth_peak_call_rate(const struct stack_growth *g);
/* A rate as whole bytes for printing: 0 below 1 (and for NaN), UINT64_MAX
 * beyond what 64 bits hold. A report read back can carry any figures, and
 * converting a double out of range to an integer is undefined. */
uint64_t growth_rate_bytes(double rate);

#endif
