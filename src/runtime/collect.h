/* collect.h - this process's report (report.h), collected now.
 *
 * Only the traced process has a tracker to copy: the command builds its
 * reports from files instead (src/cli), and finishes and writes them with
 * the same report model. */
#ifndef CUMEMTRACE_COLLECT_H
#define CUMEMTRACE_COLLECT_H

#include "config.h"
#include "report.h"

/* This process's report, collected and finished now; NULL (said on stderr)
 * if out of memory. Released with report_delete. */
struct report *report_new(const char *reason);
void report_delete(struct report *r);
/* A live block of the registry as reports hold it (under the tracker's
 * lock; async-signal-safe: the crash dump writes blocks so). */
struct block;
void report_block_of(const struct block *b, struct report_block *out);
/* The name every file of this process's reports starts from, before
 * output_path() expands it: CUMEMTRACE_OUTPUT, then "-KIND" for a report
 * other than the exit one ("oom", "signal", "snapshot"), then "-NUMBER"
 * when `number` is not 0. Fits REPORT_TEMPLATE_MAX, whatever the setting
 * (shorter than CONFIG_TEXT_MAX). Returns `template_`. */
#define REPORT_TEMPLATE_MAX (CONFIG_TEXT_MAX + 32)
char *report_template(char template_[REPORT_TEMPLATE_MAX], const char *kind, int number);
/* This process's report for `reason`, written as report_emit does (no
 * `files`); collected only when something would be written. 0, or -1. */
int report_write_to(const char *reason, const char *template_, int summary);
/* The program ended (run_program_end has been told): keep the caches'
 * view as it is now for the exit report (report_caches_at_end). */
void report_keep_end(void);
/* Around fork, before the tracker's prepare and after its parent and child:
 * fork waits for a report being finished (sorted, symbolized). */
void report_fork_prepare(void);
void report_fork_parent(void);
void report_fork_child(void);

#endif
