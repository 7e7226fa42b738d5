/* run_facts.h - the plain definitions of what the recorder keeps of a run
 * and a report shows of it: how many entry points, framework caches and
 * ring slots there are, why an event was lost, how a framework's cache was
 * seen.
 *
 * The recorder (tracker.h) keeps its bookkeeping in these terms; the report
 * model (src/report/run.h) has types of its own in the same terms, filled by
 * src/runtime/collect.c from the recorder and by the command's loaders from
 * a file. Both include this header; it includes nothing of either. */
#ifndef CUMEMTRACE_RUN_FACTS_H
#define CUMEMTRACE_RUN_FACTS_H

#define MAX_APIS 128  /* entry points (host.h: api_names) */
#define CACHE_KINDS 3 /* KIND_TORCH_TENSOR, KIND_CUPY_BLOCK, KIND_JAX_ARRAY */

/* Why an event could not be recorded (counted, and shown in reports). */
enum lost_reason {
    LOST_REENTRY,      /* a CUDA call made from inside the tracer */
    LOST_NO_MEMORY,    /* the tracer's own tables could not grow */
    LOST_UNRESOLVED,   /* a real function could not be found */
    LOST_UNKNOWN_FREE, /* a free of something never seen allocated */
    LOST_MISSED_FREE,  /* an address handed out again while still recorded */
    LOST_UNWRAPPED,    /* a lookup returned the real function unwrapped */
    LOST_COUNT
};

/* The newest failed allocations and marks kept, in rings (ring.h). */
#define FAILURE_RING 64
#define MARK_RING 256

/* The text of an OOM's final verdict, as its finding says it. */
#define OOM_VERDICT_TEXT 480

/* How a framework's cache was seen. */
enum cache_view {
    CACHE_UNSEEN,   /* the framework did not show up */
    CACHE_BLOCKS,   /* its blocks are recorded */
    CACHE_SEGMENTS, /* only its segments are: `why` says why */
};

#endif
