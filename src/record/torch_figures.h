/* torch_figures.h - PyTorch's own memory counters, as read in the traced
 * process (src/frameworks/torch_stats.c) and carried by a report.
 *
 * A block PyTorch's caching allocator frees but keeps is invisible to the
 * driver; only PyTorch knows how much of what it reserved is in use. These
 * are its torch.cuda.memory_stats() figures, read with the GIL: for a
 * report, at its moment (a snapshot's, the OOM observer's, Python's exit),
 * and every CUMEMTRACE_SAMPLE_MS otherwise. A report says whether its
 * reading is of its moment, and if not, why not and how old it is. A JSON
 * report names them as torch_figure_name() does, and the command reads them
 * back by the same names.
 *
 * The readings made for a report also say what the live tensors are
 * (struct torch_classes, read by src/frameworks/torch_classes.c): the
 * program's nn.Module and torch.optim.Optimizer objects know which tensors
 * are parameters (and their qualified names), gradients and optimizer
 * state; the report matches them to its blocks (src/report/classes.c). */
#ifndef CUMEMTRACE_TORCH_FIGURES_H
#define CUMEMTRACE_TORCH_FIGURES_H

#include <stddef.h>
#include <stdint.h>

#include "counters.h"

#define TORCH_MISSING UINT64_MAX /* the key was not in memory_stats() */

enum torch_figure {
    TORCH_ALLOCATED, /* allocated_bytes.all.current: held by tensors */
    TORCH_ALLOCATED_PEAK,
    TORCH_REQUESTED, /* requested_bytes.all.current: what tensors asked for, unrounded:
                               the figure a cache's recorded tensors add up to */
    TORCH_RESERVED,  /* reserved_bytes.all.current: segments from the driver */
    TORCH_RESERVED_PEAK,
    TORCH_ACTIVE,                /* active_bytes.all.current */
    TORCH_INACTIVE_SPLIT,        /* inactive_split_bytes.all.current: free holes in used segments */
    TORCH_INACTIVE_SPLIT_BLOCKS, /* inactive_split.all.current: how many holes */
    TORCH_ALLOC_RETRIES,         /* num_alloc_retries: cache flushed to satisfy a request */
    TORCH_OOMS,                  /* num_ooms */
    TORCH_FIGURE_COUNT
};

/* What a reading was made for. */
enum torch_read {
    TORCH_READ_SAMPLE, /* the periodic reading */
    TORCH_READ_REPORT, /* a snapshot's (signal, cumemtrace_snapshot) */
    TORCH_READ_OOM,    /* the allocator's out-of-memory observer */
    TORCH_READ_EXIT,   /* Python's exit hook: the program's end */
    TORCH_READ_KINDS
};

struct torch_stats {
    int valid;           /* 0: never read (no PyTorch, or CUDA not initialized) */
    int read;            /* enum torch_read */
    int now;             /* in a report: read at that report's moment */
    const char *why_not; /* in a report, when not `now`: why it could not be */
    uint64_t serial;     /* which reading (torch_stats.c) */
    uint32_t time_ms;    /* when, in tracker time */
    int device_count;
    uint64_t figures[MAX_DEVICES][TORCH_FIGURE_COUNT];
};

/* The figure's name in reports ("allocated_bytes", ...); "unknown" for a
 * number that is none. */
const char *torch_figure_name(int figure);
const char *torch_read_name(int read); /* "sample", "report", "oom_observer", ... */
int torch_read_of(const char *name);   /* its enum torch_read; -1 if none */

enum tensor_class {
    TENSOR_PARAMETER,
    TENSOR_GRADIENT,        /* a parameter's .grad */
    TENSOR_OPTIMIZER_STATE, /* a tensor in optimizer.state[parameter] */
    TENSOR_CLASSES
};

struct torch_tensor_ref {
    uint64_t address;      /* data_ptr(): inside its block */
    uint64_t bytes;        /* numel() * element_size() */
    uint32_t owner;        /* the parameter it is or belongs to: an index in names */
    uint32_t tensor_class; /* enum tensor_class */
};

/* An array's memory found by the retention walk (torch_classes.c): a
 * PyTorch tensor's storage, a CuPy or JAX array's buffer. Its address, its
 * bytes, the path that reached it first and how many array objects (views)
 * share it. */
struct torch_holder_ref {
    uint64_t address; /* the storage's data pointer: inside its block */
    uint64_t bytes;
    uint32_t path; /* an index in paths */
    uint32_t tensors;
};

/* Who holds the arrays, by the same reading, in one mapping of `mapped`
 * bytes: paths from Python's roots, aggregated into patterns that read like
 * code ("__main__.model.outs[*]"), each with the type of the object that
 * holds the arrays ("list"). */
struct torch_holders {
    size_t mapped;
    const char *why;  /* NULL: walked; else why not (static text) */
    uint64_t objects; /* objects the walk visited */
    uint32_t ms;      /* how long it took */
    char cut[48];     /* "": complete; else where it stopped ("after 1 s") */
    uint32_t count;
    struct torch_holder_ref *refs; /* in the order the walk reached them */
    uint32_t path_count;
    const char **paths, **containers;
};

/* What the live tensors are, by one reading, in one mapping of `mapped` bytes. */
struct torch_classes {
    size_t mapped;
    const char *why; /* NULL: read; else why it could not be (static text) */
    uint32_t modules, optimizers;
    uint32_t count;
    struct torch_tensor_ref *tensors; /* by address */
    uint32_t name_count;
    const char **names;            /* parameters' qualified names */
    struct torch_holders *holders; /* NULL: not asked (CUMEMTRACE_HOLDERS=0) */
};

#endif
