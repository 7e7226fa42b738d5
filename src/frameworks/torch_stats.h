/* torch_stats.h - PyTorch's own memory counters (torch_figures.h), read
 * from inside the traced process (torch_stats.c), next to ours. */
#ifndef CUMEMTRACE_TORCH_STATS_H
#define CUMEMTRACE_TORCH_STATS_H

#include "torch_figures.h"

/* Ask the program's main Python thread to read the counters at its next safe
 * point. Any thread, any time, no lock needed; does nothing without Python. */
void torch_stats_request(void);
/* Whether the process hosts Python, as the bridge found after a request:
 * 1 running, 0 ended (its exit hook ran: no reading after it), -1 none (or
 * not asked yet). */
int torch_stats_python(void);
/* The same, for a report this thread is about to collect (JAX's arrays
 * swept too, whatever it costs, and the live tensors classed), then wait
 * for the reading up to timeout_ms (a thread holding the GIL reads itself).
 * 0 if it came. */
int torch_stats_refresh(int timeout_ms);
/* In PyTorch's out-of-memory observer (its allocator's lock let go): read
 * on this thread, with the GIL, for the OOM report this thread collects
 * next. */
void torch_stats_at_oom(void);
/* The report this thread collects next is at a moment Python cannot run
 * (inside a failing CUDA call): its reading will say `why`. */
void torch_stats_not_now(const char *why);
/* Before cumemtrace_mark()'s growth sample: JAX's arrays swept, if they are
 * (and it costs at most 1% of the time), so that the sample sees them now. */
void torch_stats_before_mark(void);
/* For the report this thread is collecting: the latest reading, `now` if
 * this thread asked for it (torch_stats_refresh, torch_stats_at_oom) or, for
 * the report at the program's end (`at_end`), it is the exit hook's; else
 * with why not. `classes`, when given, is called under the bridge's lock
 * with what the tensors of that same reading are, or NULL and why none. */
void torch_stats_for_report(struct torch_stats *out, int at_end,
                            void (*classes)(const struct torch_classes *, const char *why,
                                            void *arg),
                            void *arg);
void torch_stats_reset(void); /* after fork: nothing read in this process yet */

#endif
