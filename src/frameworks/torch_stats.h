/* torch_stats.h - PyTorch's own memory counters (torch_figures.h), read
 * from inside the traced process (torch_stats.c), next to ours. */
#ifndef CUMEMTRACE_TORCH_STATS_H
#define CUMEMTRACE_TORCH_STATS_H

#include "torch_figures.h"

/* Ask the program's main Python thread to read the counters at its next safe
 * point. Any thread, any time, no lock needed; does nothing without Python. */
void torch_stats_request(void);
/* The same, for a report (JAX's arrays swept too, whatever it costs), then
 * wait for the reading up to timeout_ms (a thread holding the GIL reads
 * itself). 0 if it came. */
int torch_stats_refresh(int timeout_ms);
/* Before cumemtrace_mark()'s growth sample: JAX's arrays swept, if they are
 * (and it costs at most 1% of the time), so that the sample sees them now. */
void torch_stats_before_mark(void);
/* The latest reading. */
void torch_stats_get(struct torch_stats *out);
void torch_stats_reset(void);   /* after fork: nothing read in this process yet */

#endif
