/* merge_fold.h - a job's ranks folded one report at a time (merge_fold.c):
 * what `cumemtrace merge` answers from, in memory that grows with the
 * ranks (one small record each) and the distinct stacks (a summary of fixed
 * size each), never with ranks times stacks, so a report can be freed as
 * soon as it is folded.
 *
 * Stacks are matched by their frames as diff matches them (cli_stack_key:
 * function and file:line, never an address). Per stack: how many ranks hold
 * it, their sum, least and most, the FOLD_KEEP ranks holding most and least
 * of it and the first FOLD_KEEP lacking it (the only ones that can be its
 * outliers), and its values in a sketch of at most FOLD_VALUES (value,
 * count) pairs: exact while the ranks hold at most that many distinct
 * amounts (identical ranks hold one), beyond that the two closest pairs
 * merged into their weighted mean, so the median and the MAD stay close
 * and a lone outlier, far from the rest, stays exact. A job of at most
 * FOLD_BY_RANK ranks also keeps each rank's bytes per stack. Where a
 * report names who holds a stack's arrays (its holders walk), the ranks
 * holding most of the stack keep those words: what a divergent rank's
 * answer says, at one string per kept rank.
 *
 * The rule (fold_rule): a value is an outlier when it lies more than
 * FOLD_SPREADS spreads from the median of the other ranks', the spread
 * being 1.4826 times their median absolute deviation (the standard
 * deviation of normal data), but at least a twentieth of their median and
 * 256 KiB, and the distance at least 1 MiB: identical ranks, or ranks a
 * few percent apart, give none. Below the median only with three ranks or
 * more (of two, the one holding more is the outlier). */
#ifndef CUMEMTRACE_MERGE_FOLD_H
#define CUMEMTRACE_MERGE_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

#define FOLD_KEEP 8
#define FOLD_VALUES 64
#define FOLD_BY_RANK 64
#define FOLD_SPREADS 4

enum fold_verdict { FOLD_USUAL = 0, FOLD_HIGH = 1, FOLD_LOW = -1 };

struct fold_value {
    double value;
    uint64_t count;
};

/* A rank and its bytes of a stack (rank: an index into fold.ranks); in the
 * ranks holding most, who holds them there ("model.outs, a list of 3
 * tensors"), owned by the pick; NULL: not known. */
struct fold_pick {
    uint32_t rank;
    uint64_t bytes;
    char *holder;
};

struct fold_growth {
    uint32_t rank;
    double rate;      /* growth_rate: bytes per second or per mark */
    double call_rate; /* growth_call_rate: bytes per call of the site (0 at marks) */
    uint64_t calls;   /* over `calls` of them */
    uint64_t bytes;   /* report_growth_bytes */
    int ended;        /* bytes when the program ended, not at the report */
};

struct fold_rank {
    int number; /* its rank */
    int file;   /* the file read (the caller's numbering) */
    int local_rank, world_size, pid;
    uint32_t host;               /* index into fold.hosts */
    int moment;                  /* CLI_AT_END or CLI_AT_EXIT */
    char reason[16];             /* the report's ("exit", "oom", ...) */
    uint64_t devices;            /* a bit per device used */
    uint64_t live, peak, leaked; /* live: at `moment` */
    int has_leaked;              /* an exit report */
    int has_growth;              /* 0: not known (a crash dump) */
    uint32_t growing;            /* its growing sites */
    int verdict;                 /* fold_finish: enum fold_verdict of `live` */
    double centre;               /* fold_finish: the median of the other ranks' */
};

struct fold_stack {
    char *key;                                       /* cli_stack_key */
    char *site;                                      /* its site's frame: the user's line */
    const char *label;                               /* "nccl", ...: report_stack_label; NULL */
    uint32_t source, stack_id;                       /* the rank holding most of it, its id there */
    uint64_t pending;                                /* bytes in the report being folded */
    const struct report_holder_path *pending_holder; /* its holder there, if named */
    uint32_t present;                                /* ranks holding some of it */
    uint32_t next_rank;                              /* ranks before this one are counted */
    uint64_t sum, min, max;                          /* of the ranks holding it */
    uint64_t most_in_source;
    struct fold_value *values; /* the sketch, by value */
    uint32_t value_count, value_capacity;
    struct fold_pick high[FOLD_KEEP], low[FOLD_KEEP]; /* most first, least first */
    uint32_t high_count, low_count;
    uint32_t absent[FOLD_KEEP];            /* the first ranks lacking it */
    uint32_t absent_count;                 /* all of them */
    uint64_t *by_rank;                     /* [rank], in a job of at most FOLD_BY_RANK ranks */
    uint32_t growing_ranks;                /* ranks where it grows */
    struct fold_growth fastest[FOLD_KEEP]; /* fastest first */
    uint32_t fastest_count;
    int per_mark; /* growth in marks, not seconds */
    int touched;  /* in fold.touched */
    /* fold_finish: */
    double median, mad;             /* of every rank's bytes (0 where it lacks it) */
    double usual_median, usual_mad; /* of the ranks that are not outliers */
    uint64_t spread;                /* most less least, over every rank */
    uint64_t excess;                /* how far its outliers lie from usual_median, summed */
    struct fold_pick outliers[3 * FOLD_KEEP]; /* above the others, then below;
                                                  * holders: the high picks' */
    uint32_t outlier_count;
};

/* A set of names, each stored once: stack keys, host names. */
struct fold_names {
    char **names;
    uint64_t *hashes;
    uint32_t count, capacity;
    uint32_t *slots;     /* index + 1; 0: empty */
    uint32_t slot_count; /* a power of two */
};

struct fold {
    uint32_t expected; /* ranks to be folded */
    struct fold_rank *ranks;
    uint32_t rank_count;
    struct fold_stack *stacks; /* index = index of its key in `keys` */
    uint32_t stack_capacity;
    struct fold_names keys, hosts;
    uint32_t *touched; /* stacks the report being folded holds */
    uint32_t touched_count;
    /* fold_finish: */
    uint32_t *order;                /* stacks, those that differ most between ranks first */
    double median, mad;             /* of the ranks' live bytes */
    double usual_median, usual_mad; /* of the ranks that are not outliers */
    uint64_t usual_min, usual_max;
    uint32_t usual_count;
};

/* Ready to fold `expected` reports. 0, or -1 when out of memory. */
int fold_init(struct fold *f, uint32_t expected);
/* Fold the report of rank `number`, read from file `file`; `r` may be
 * released after. 0, or -1 when out of memory. */
int fold_add(struct fold *f, const struct report *r, int number, int file);
/* The medians, spreads and outliers, and the stacks' order. 0, or -1. */
int fold_finish(struct fold *f);
void fold_free(struct fold *f);
/* enum fold_verdict of `value` against a median and MAD of `count` others
 * (none: FOLD_USUAL). */
int fold_rule(double value, double median, double mad, uint64_t count);
/* The rule in words. */
extern const char fold_rule_text[];

#endif
