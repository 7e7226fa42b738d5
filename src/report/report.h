/* report.h - a consistent picture of the tracker's state, and its writers.
 *
 * A struct report is filled in from a traced process (src/runtime/collect.c),
 * from a JSON report or a crash dump (the command's loaders), then finished
 * (report.c: groups, the stacks worth showing, symbols) and concluded on
 * (verdicts.c). The writers (text, JSON, HTML, the exports) read this
 * picture only, and emit.c writes it to every configured format. Nothing
 * here runs only in the traced process: the command links it too. */
#ifndef CUMEMTRACE_REPORT_H
#define CUMEMTRACE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "counters.h"
#include "growth.h"
#include "host.h" /* struct pool_figures */
#include "output.h"
#include "python.h"
#include "records.h"
#include "run.h"
#include "series.h"
#include "stacks.h"
#include "symbolize.h"
#include "timeline.h"
#include "torch_figures.h"

struct report_block {
    uint64_t value, size, sequence;
    uint32_t stack_id, time_ms;
    uint16_t thread, handle;
    int8_t device;
    uint8_t kind, api, context;
    uint8_t held_at_end; /* live when the program ended (run_program_end) */
};

/* Live blocks with the same stack, kind, entry point and device, and
 * whether they were live when the program ended (held_at_end). In r->held:
 * what a stack held when the program ended, and how much of it the
 * interpreter's teardown freed. */
struct report_group {
    uint32_t stack_id;
    uint8_t kind, api;
    int8_t device;
    uint8_t held_at_end;
    uint64_t bytes, blocks, largest;
    uint32_t oldest_ms;
    uint64_t freed_at_teardown; /* r->held only */
};

/* A framework's cache on one device, as its recorded segments and blocks
 * show it (caches.c). */
struct report_cache {
    int kind; /* KIND_TORCH_TENSOR, KIND_CUPY_BLOCK, KIND_JAX_ARRAY */
    int device;
    uint64_t reserved, segments;              /* its segments: the driver allocations behind it */
    uint64_t block_bytes, blocks;             /* its live blocks, at their requested sizes */
    uint64_t unused;                          /* reserved - block_bytes */
    uint64_t hole_bytes, holes, largest_hole; /* free ranges in segments that hold a
                                                 * live block: only what fits uses them */
    uint64_t releasable; /* in segments that hold none: empty_cache() returns it */
    /* PyTorch's: the largest hole in its small pool (2 MiB segments, which
     * serve only requests up to 1 MiB) and in its large pool (the rest,
     * which serve only larger ones). */
    uint64_t largest_small_hole, largest_large_hole;
};
#define TORCH_SMALL_SEGMENT (2u << 20)
#define TORCH_SMALL_REQUEST (1u << 20)
#define REPORT_MAX_CACHES (CACHE_KINDS * (MAX_DEVICES + 1))

/* A stream-ordered pool the program created, and what it holds. */
struct report_pool {
    uint64_t handle;
    int device; /* -1: not a device pool */
    struct pool_figures figures;
};
#define REPORT_MAX_POOLS 64

/* What PyTorch's live tensors are (classes.c): parameters, gradients,
 * optimizer state and the rest, as the program's modules and optimizers
 * said at the report's moment, matched to the recorded tensor blocks. */
enum report_class {
    CLASS_PARAMETERS, /* enum tensor_class's order first */
    CLASS_GRADIENTS,
    CLASS_OPTIMIZER_STATE,
    CLASS_REST, /* activations, temporaries, data: by site */
    REPORT_CLASSES
};
#define REPORT_CLASS_HOLDERS 8
#define REPORT_CLASS_SITES 5
#define REPORT_CLASS_TEXT 160
/* Who holds the tensors (classes.c): by the retention walk of the same
 * reading (torch_classes.c), each recorded tensor block under the first
 * path from Python's roots that reached it, aggregated by the stack that
 * allocated it and the path's pattern; the REPORT_HOLDER_PER_STACK
 * patterns holding most of each stack, the stacks holding most first. */
#define REPORT_HOLDER_PATHS 64
#define REPORT_HOLDER_PER_STACK 3
struct report_holders {
    int known; /* 0: `why` says why not */
    char why[REPORT_CLASS_TEXT];
    uint64_t objects; /* the walk's: objects visited, its time */
    uint32_t ms;
    char cut[48]; /* "": complete; else where it stopped */
    struct report_holder_path {
        uint32_t stack_id;
        char path[REPORT_CLASS_TEXT];    /* "__main__.model.outs[*]" */
        char container[32];              /* what holds the tensors: "list" */
        int kind;                        /* the blocks' (kinds.h): PyTorch's, CuPy's, JAX's */
        uint64_t tensors, blocks, bytes; /* tensors: the arrays found on the blocks */
    } paths[REPORT_HOLDER_PATHS];
    int count;
};

struct report_classes {
    int known; /* 0: `why` says why not */
    int read;  /* enum torch_read of the reading that said it */
    char why[REPORT_CLASS_TEXT];
    uint32_t modules, optimizers;
    uint64_t bytes[REPORT_CLASSES], blocks[REPORT_CLASSES];
    /* The parameters holding the most, each with its gradient and what its
     * optimizer keeps for it. */
    struct report_class_holder {
        char name[REPORT_CLASS_TEXT];
        uint64_t bytes[CLASS_REST]; /* as a parameter, its gradient, its optimizer state */
    } holders[REPORT_CLASS_HOLDERS];
    int holder_count;
    /* The rest, by the stack that allocated it, most bytes first. */
    struct report_class_site {
        uint32_t stack_id;
        uint64_t bytes, blocks;
    } sites[REPORT_CLASS_SITES];
    int site_count;
    struct report_holders held_by; /* who holds them */
};

/* What made the report, when it is not the end of the process. */
enum event_type { EVENT_NONE, EVENT_OOM, EVENT_SIGNAL, EVENT_CRASH };

/* How a report is finished and written, as a value the report carries: the
 * model and the writers read these, never the settings of the process they
 * run in. This process's report takes them from its settings; the command
 * from its own and its command line (report_options_of, then its flags). */
struct report_options {
    int top;        /* stacks shown by peak; entries per section of the summary */
    int all_frames; /* hide no frame */
    int max_blocks; /* live blocks listed one by one in the JSON */
    int depth;      /* the stack settings the JSON's tracer section states */
    uint64_t min_size;
    int formats;               /* report_emit: the files to write (FORMAT_* bits) */
    int file_mode;             /* their permissions */
    int quiet;                 /* no summary, no line for each file written */
    const char *user_packages; /* installed packages whose Python is the user's
                                * (origins.h); NULL or "": none */
};
struct config;
void report_options_of(const struct config *settings, struct report_options *o);

struct report_event {
    int type;
    int signal;       /* EVENT_SIGNAL, EVENT_CRASH */
    const char *lock; /* EVENT_CRASH: "taken", "busy" or "inside" */
    /* EVENT_OOM: the request that failed, and the device at that moment. */
    uint64_t size;
    int api, kind, device, code;
    uint32_t stack_id;
    int has_memory_info;
    uint64_t free, total;
    int retry;
};

struct report_device {
    int slot; /* device number, or COUNTER_NO_DEVICE */
    int has_memory_info;
    uint64_t free, total;
    int has_pool; /* the default stream-ordered pool, if used */
    struct pool_figures pool;
};

struct report {
    const char *reason;
    struct report_options options; /* set before report_finish */
    struct report_event event;
    int pid, ppid;
    double start_unix, now_unix;
    uint32_t now_ms;
    struct counter_table *counters;
    const char *const *api_names; /* entry points, by index */
    int api_count;
    uint64_t api_calls[MAX_APIS], api_allocations[MAX_APIS], api_failures[MAX_APIS];
    uint64_t lost[LOST_COUNT]; /* events not recorded, by enum lost_reason */
    /* The run's sections (run.h). */
    struct report_failures failures;
    struct report_last_oom last_oom;
    struct report_marks marks;
    struct report_threads threads;
    struct report_handles handles;
    struct report_end end;
    struct report_cache_view cache_views[CACHE_KINDS]; /* by kind - KIND_TORCH_TENSOR */
    struct growth_state growth;                        /* copy; has_growth 0: not known (a dump) */
    int has_growth;
    uint32_t *growing; /* leak suspects' stack ids, fastest first */
    uint32_t growing_count;
    uint32_t *released; /* grew, then freed near the end: highest peak first */
    uint32_t released_count;
    struct stack *stacks; /* index = id - 1 */
    uint32_t stack_count;
    uintptr_t *frames;
    struct report_block *blocks; /* largest first */
    size_t block_count;
    struct report_group *groups; /* most bytes first */
    size_t group_count;
    struct report_device devices[MAX_DEVICES + 1];
    int device_count;
    struct torch_stats torch;      /* PyTorch's own counters, if it was read */
    struct report_classes classes; /* what its tensors are */
    struct report_pool pools[REPORT_MAX_POOLS];
    int pool_count;
    struct report_cache *caches; /* caches.c */
    int cache_count;
    /* What was live when the program ended, by stack (end.ended): held to
     * the end, whether the interpreter's teardown freed it or not. */
    struct report_group *held; /* most bytes first */
    size_t held_count;
    size_t registry_bytes, stacks_bytes;
    int64_t self_time_ns; /* our own time in CUDA calls; -1: not timed */
    uint32_t *shown;      /* stack ids written out, by live bytes */
    uint32_t shown_count;
    uint32_t *by_peak;         /* the same ids, highest peak first */
    uintptr_t *addresses;      /* distinct frames of shown stacks, sorted */
    struct symbol *symbols;    /* symbols[i] is addresses[i] */
    uint8_t *origins;          /* origins[i]: symbols[i]'s (origins.h) */
    const char *user_packages; /* what origins were told with (the options',
                                          * else the file's read back); NULL: none */
    uint16_t *site_apart;      /* per stack id - 1: how its site line is told
                                          * apart (frames_tell_apart); NULL: not yet */
    int all_frames;            /* no frame hidden (options, or the file read says so) */
    size_t address_count;
    struct symbolizer *symbolizer;
    char hostname[256];               /* gethostname */
    int rank, local_rank, world_size; /* RANK, LOCAL_RANK, WORLD_SIZE; -1: not set */
    char argv[4096];                  /* NUL-separated, from /proc/self/cmdline */
    size_t argv_bytes;
    char start_dir[4096];           /* the directory the program started in (python.h),
                           * Python's relative files are named from; "": not known */
    int dump_complete;              /* read from a dump that ends properly */
    struct python_location *python; /* Python frames' locations, by id - 1 */
    uint32_t python_count;
    /* The event timeline (CUMEMTRACE_EVENTS), oldest first, times never
     * decreasing; has_timeline 0: it was off (or this is a dump). */
    int has_timeline;
    struct timeline_event *timeline;
    size_t timeline_count;
    size_t timeline_end;                        /* the first event after the program's end;
                                          * timeline_count when none is, or it did not end */
    uint64_t timeline_capacity, timeline_total; /* dropped = total - count */
    struct series_state *series;                /* copy; NULL: not known (a dump) */
    /* every mapping made for this report, released by report_release */
    void *pages[32];
    size_t page_sizes[32];
    int page_count;
    char *carve_at; /* the unused part of the newest shared mapping (report_alloc) */
    size_t carve_left;
    /* NULL: report_alloc maps pages; else its memory is heap(heap_owner,
     * bytes), which that owner releases (a report the command loaded: the
     * arena of its JSON tree). */
    void *(*heap)(void *owner, size_t bytes);
    void *heap_owner;
};

/* report.c: the model. */
void *report_alloc(struct report *r, size_t bytes); /* zeroed, released with r (or its heap) */
/* For a report whose state and options are filled in (collected, or a
 * crash dump read back): group, choose stacks, symbolize. 0, or -1 when out
 * of memory. */
int report_finish(struct report *r, struct symbolizer *symbolizer);
/* Fill r->origins (origins.h) for r->symbols: done by report_finish, and by
 * a loader that fills the symbols itself. 0, or -1 when out of memory. */
int report_classify_frames(struct report *r);
/* The Python frames' files in r->symbols named by their real paths, from
 * r->start_dir (output_real_path), once a distinct file: done by
 * report_finish, and by a loader that fills the symbols itself from a
 * process (the live view). 0, or -1 when out of memory. */
int report_real_paths(struct report *r);
void report_release(struct report *r);
/* Stack ids by the stacks' peak live bytes, highest first (r->by_peak's order). */
void report_order_by_peak(const struct report *r, uint32_t *ids, uint32_t count);
/* Index of a frame address in r->addresses (the JSON frame id), -1 if absent. */
long report_frame_index(const struct report *r, uintptr_t address);
/* Of `count` ranges `size` bytes apart from `ranges`, sorted by the
 * uint64_t start at `start` in each: how many start at or below `address`.
 * The last of those, if any, is the one range that may hold it. */
size_t report_ranges_below(const void *ranges, size_t count, size_t size, size_t start,
                           uint64_t address);
const char *report_api_name(const struct report *r, int api);
/* The label of mark number `number` (1, 2, ...); NULL once the ring has
 * dropped it. */
const char *report_mark_label(const struct report *r, uint64_t number);
/* A stack's live bytes as growth sees them: at the end of the program once
 * it ended (its last sample), else now. */
uint64_t report_growth_bytes(const struct report *r, const struct stack *s);
/* A site's growth rates as a report says them, into text[0..size): at
 * marks "+1.00 MiB per mark"; else its rate per call where it made calls
 * over the span, then per second: "+1.00 MiB a call over 78 calls, +52.0
 * MiB per second". To its peak with `to_peak` (a site grown, then freed). */
void report_growth_rates(const struct report *r, const struct stack_growth *g, int to_peak,
                         char *text, size_t size);
/* How long before the report PyTorch's counters were read (0 if after). */
uint32_t report_torch_age_ms(const struct report *r);
/* "nccl", "cublas", ...: the library a stack allocated through; NULL if none. */
const char *report_stack_label(const struct report *r, uint32_t stack_id);
const struct counters *report_counters(const struct report *r, int slot, int set);

/* findings.c: the report's verdicts, one entry per line, in the order they
 * are read (an OOM, what grows, what grew and was freed, what leaked or is
 * live, what only a context's teardown freed, fragmentation or an idle
 * reserve, failed allocations; "none" when none of these; then what was held
 * at the end and its top sites, as `detail` entries). Each names its site's
 * stack (0: none) and the figure it rests on. Writers print an entry as
 * "LABEL at SITE: TEXT" (frames_site_text). Fills at most `max` entries
 * (REPORT_FINDINGS_MAX suffices); returns how many. */
#define REPORT_FINDINGS_MAX 16
struct report_finding {
    const char *verdict; /* "oom", "growing", "released", "leaked", "live",
                              * "leaked_implicitly", "fragmented", "idle_cache",
                              * "idle_pool_reserve", "failed", "none", "held_at_end" */
    const char *label;   /* "growing", "leaked", ...; "" for a detail */
    uint32_t stack_id;
    int detail;                  /* one of the sites of the entry before it */
    uint64_t bytes;              /* the figure: live now, peak, asked for, total */
    char text[OOM_VERDICT_TEXT]; /* the figures, in words */
};
int report_findings(const struct report *r, struct report_finding *list, int max);

/* The writers. */
struct report_files;
void report_text(const struct report *r, struct out *out);
/* The summary on stderr: the findings, the top CUMEMTRACE_TOP entries of
 * each section, and where the full report is (`files`, may be NULL). */
void report_summary(const struct report *r, const struct report_files *files, struct out *out);
void report_json(const struct report *r, struct out *out);
/* report_html.c: one self-contained page; report_export.c: the exports. */
void report_html(const struct report *r, struct out *out);
void report_folded(const struct report *r, struct out *out);
void report_perfetto(const struct report *r, struct out *out);
void report_memviz(const struct report *r, struct out *out);

/* The files a report was written to (emit.c), so that it can be written
 * again in their place: an OOM report, rewritten with its retry's outcome.
 * `replace`: a file already at a name is replaced, not kept (the command's
 * own output, named by the user). */
#define REPORT_MAX_FILES 6
struct report_files {
    int replace;
    int count;
    struct report_file {
        int format; /* FORMAT_INDEX_* */
        char path[OUTPUT_PATH_MAX];
        struct out_identity id;
    } file[REPORT_MAX_FILES];
};

/* emit.c: write a report to every configured format; `summary` also prints
 * the brief text on the tracer's stderr (unless CUMEMTRACE_QUIET). Each file
 * gets a name no other file has (output.h), unless `files` (may be NULL)
 * recorded one for its format: then it replaces that one, if still ours.
 * Files written are recorded in `files`. 0, or -1 if a file could not be
 * written. */
int report_emit(const struct report *r, const char *template_, int summary,
                struct report_files *files);
/* The writer of one format (FORMAT_INDEX_*: config.h's REPORT_FORMATS). */
void report_write_format(const struct report *r, int format, struct out *out);

/* caches.c: r->caches, from the live blocks (all of them: a report collected
 * or read from a dump), and the stacks of the driver allocations found to
 * hold a framework's blocks flagged (STACK_CACHE_SEGMENT) in r->stacks. 0,
 * or -1 when out of memory. */
int report_caches(struct report *r);
/* Whether r->caches are as they were when the program ended: the exit
 * report of a program whose end was seen (src/runtime/collect.c keeps that view,
 * report_keep_end; a report read back carries it). */
int report_caches_at_end(const struct report *r);
/* The stack allocated a framework's cache segments, and that framework's
 * blocks are recorded: verdicts are about its blocks, not this stack. */
int report_cache_segment(const struct report *r, uint32_t stack_id);
/* classes.c: r->classes from r->blocks (this process's, as collected) and
 * what a reading said of the tensors; `c` NULL: not known, `why`. */
void report_classes(struct report *r, const struct torch_classes *c, const char *why);
/* Not known, `why`. */
void report_classes_unknown(struct report_classes *classes, const char *why);
/* The pattern holding most of stack_id's blocks; NULL if none. */
const struct report_holder_path *report_holder_of(const struct report *r, uint32_t stack_id);
/* "tensors" or "arrays" (one: "tensor", "array"), as p's blocks are. */
const char *report_holder_noun(const struct report_holder_path *p);
/* `p` in words, as the findings say it: "model.outs, a list of 3 tensors". */
void report_holder_text(const struct report_holder_path *p, char *text, size_t size);
const char *report_class_name(int report_class); /* "parameters", ..., "rest" */
/* held.c: r->held, from end.stacks and the live blocks. */
int report_held_at_end(struct report *r);

/* verdicts.c */
/* Why an allocation failed, in the report's event: "exhausted" (the driver
 * had less free than asked) or "fragmented" (more, but no range fitted); and
 * where a framework's allocator gave up, in its cache's terms
 * (report_cache_oom). "unknown" without the driver's figures. */
const char *report_verdict(const struct report *r);
const struct report_cache *report_cache_on(const struct report *r, int kind, int device);
/* A framework's OOM: "cache_idle" (its segments that hold no block, with
 * what the driver has free, would make the segment the request needs (for
 * PyTorch, 2 MiB up to 1 MiB, 20 MiB up to 10 MiB): empty_cache()),
 * "cache_fragmented" (what it holds unused, with the driver's free, would;
 * but in holes between live blocks, none large enough: only a layout that
 * grows segments in place, PyTorch's expandable_segments:True, helps), else
 * "others_hold" (memory outside the cache, other processes' and this one's
 * other allocations, holds at least as much as its blocks) or
 * "tensors_exhausted" (its live blocks fill the device). `why`, if given,
 * gets the figures the verdict rests on. */
struct report_cache_oom {
    const struct report_cache *cache; /* the device's cache (zeros if none) */
    uint64_t others;                  /* used on the device outside the cache */
};
const char *report_cache_oom(const struct report *r, struct report_cache_oom *why);
/* Of a "cache_fragmented" OOM: why no hole served the request, in one
 * clause (no capital, no stop) into `text`: the largest hole smaller than
 * the request; the larger ones in PyTorch's other size pool (2 MiB segments
 * serve only requests up to 1 MiB, the rest only larger ones); or one large
 * enough in the right pool, which then belongs to another stream or a
 * private memory pool (PyTorch serves a request from no other). */
const char *report_hole_why(const struct report *r, const struct report_cache *c, char *text,
                            size_t size);

/* Memory held but not in use, and fragmentation, in one place: the default
 * stream-ordered pools' reserve beyond what they hand out, address space
 * reserved for VMM but not mapped (holes; address space, not memory), and
 * the OOM verdict when the report is about one, and PyTorch's own view of
 * its cache. `verdict` is "fragmented" (an allocation failed with more free
 * than it asked, or PyTorch's segments hold free split blocks worth a quarter
 * of its reserve, at least 64 MiB, in 8 or more holes of 32 MiB or less on
 * average: free memory in pieces too small to reuse and, while a segment
 * holds a live tensor, beyond empty_cache()), "idle_cache" (PyTorch keeps half or more
 * of its reserve, at least 256 MiB, cached but unused), "idle_pool_reserve"
 * (pools keep a quarter or more of their reserve, at least 16 MiB, unused)
 * or "none". */
struct report_fragmentation {
    uint64_t pool_reserved, pool_used, pool_idle;
    uint64_t vmm_reserved, vmm_mapped, vmm_unmapped;
    int has_torch; /* PyTorch's counters were read */
    uint64_t torch_reserved, torch_allocated, torch_cached, torch_inactive_split;
    uint64_t torch_holes; /* inactive split blocks */
    const char *verdict;
    const char *reason; /* why, in a few words; "" for none */
};
void report_fragmentation(const struct report *r, struct report_fragmentation *f);

#endif
