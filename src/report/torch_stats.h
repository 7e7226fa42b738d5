/* torch_stats.h - PyTorch's own memory counters, next to ours (torch_stats.c).
 *
 * A block PyTorch's caching allocator frees but keeps is invisible to the
 * driver; only PyTorch knows how much of what it reserved is in use. These
 * are its torch.cuda.memory_stats() figures, read by the program's own main
 * thread with the GIL, at the latest sample before a report and at Python's
 * exit. */
#ifndef CUMEMTRACE_TORCH_STATS_H
#define CUMEMTRACE_TORCH_STATS_H

#include <stdint.h>

#include "counters.h"

#define TORCH_MISSING UINT64_MAX   /* the key was not in memory_stats() */

enum torch_figure {
    TORCH_ALLOCATED,        /* allocated_bytes.all.current: held by tensors */
    TORCH_ALLOCATED_PEAK,
    TORCH_REQUESTED,        /* requested_bytes.all.current: what tensors asked for, unrounded:
                               the figure a cache's recorded tensors add up to */
    TORCH_RESERVED,         /* reserved_bytes.all.current: segments from the driver */
    TORCH_RESERVED_PEAK,
    TORCH_ACTIVE,           /* active_bytes.all.current */
    TORCH_INACTIVE_SPLIT,   /* inactive_split_bytes.all.current: free holes in used segments */
    TORCH_INACTIVE_SPLIT_BLOCKS,   /* inactive_split.all.current: how many holes */
    TORCH_ALLOC_RETRIES,    /* num_alloc_retries: cache flushed to satisfy a request */
    TORCH_OOMS,             /* num_ooms */
    TORCH_FIGURE_COUNT
};

struct torch_stats {
    int valid;               /* 0: never read (no PyTorch, or CUDA not initialized) */
    int at_exit;             /* read by the Python exit hook */
    uint32_t time_ms;        /* when, in tracker time */
    int device_count;
    uint64_t figures[MAX_DEVICES][TORCH_FIGURE_COUNT];
};

const char *torch_figure_name(int figure);   /* "allocated_bytes", ... */

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
