/* torch_figures.h - PyTorch's own memory counters, as read in the traced
 * process (src/frameworks/torch_stats.c) and carried by a report.
 *
 * A block PyTorch's caching allocator frees but keeps is invisible to the
 * driver; only PyTorch knows how much of what it reserved is in use. These
 * are its torch.cuda.memory_stats() figures, read by the program's own main
 * thread with the GIL, at the latest sample before a report and at Python's
 * exit. A JSON report names them as torch_figure_name() does, and the
 * command reads them back by the same names. */
#ifndef CUMEMTRACE_TORCH_FIGURES_H
#define CUMEMTRACE_TORCH_FIGURES_H

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

/* The figure's name in reports ("allocated_bytes", ...); "unknown" for a
 * number that is none. */
const char *torch_figure_name(int figure);

#endif
