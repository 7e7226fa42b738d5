/* merge_job.h - the files of a job and the rank each one is (merge_job.c).
 *
 * `cumemtrace merge` is given files and folders; a folder is read as a tree,
 * and of the files in it those whose first bytes are a cumemtrace report or
 * crash dump are taken (others, a merged view or a trace, are left). Each
 * file is surveyed without being loaded: a JSON report's "reason" and
 * "process" come first in it, so its first bytes name its rank, host, pid
 * and world size; a dump's its pid and whether it was a crash. A rank may
 * have left several files (an OOM report, then an exit report or a crash
 * dump): one of them is the rank's reading, the others are said. */
#ifndef CUMEMTRACE_MERGE_JOB_H
#define CUMEMTRACE_MERGE_JOB_H

#include <stddef.h>

/* What a file is, by what it tells of its process's end. The order is the
 * preference for a rank's reading: the lowest kind of its files is read. */
enum job_kind {
    JOB_EXIT,   /* an exit report (or a dump written in place of one) */
    JOB_OTHER,  /* a report at a signal, a snapshot */
    JOB_OOM,    /* a report written at an out-of-memory error */
    JOB_CRASH,  /* a crash dump, or a report of a crash */
    JOB_UNKNOWN /* not surveyed: read whole, which says what is wrong */
};

struct job_file {
    const char *path;                      /* owned by the job */
    int kind;                              /* enum job_kind */
    int rank, local_rank, world_size, pid; /* -1: not known */
    int reading;                           /* 1: the file read for its rank */
    int found;                             /* found in a folder: skipped if it is not a report */
};

struct job {
    struct job_file *files; /* in the order given, a folder's files sorted by path */
    size_t count, capacity;
    size_t skipped; /* files in folders that are not reports */
    int from_order; /* ranks numbered by the order of the files */
};

/* Add `path`: a file as it is, a folder's reports found in its tree. 0, or
 * -1 after a one-line message (no such file, an unreadable folder). */
int job_add(struct job *job, const char *path);
/* Survey every file, give dumps their rank (that of a report of the same
 * pid, else the number their name ends with), and choose each rank's
 * reading; where a report names no rank, or two files at the same
 * preference claim one, every file is its own rank, numbered in order
 * (from_order). 0, or -1 when out of memory. */
int job_survey(struct job *job);
void job_free(struct job *job);
/* "exit", "oom", "crash", "other": a kind in one word. */
const char *job_kind_name(int kind);

#endif
