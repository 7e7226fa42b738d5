/* report_load.h - a report file read back into a struct report (report_load.c).
 *
 * The file may be a JSON report (docs/report.schema.json) or a crash dump
 * (docs/DUMP.md); the first bytes decide. A loaded report is what the
 * writers expect: report_text() and report_json() print it as they would the
 * live one. Frames of a JSON report come already symbolized, from the file;
 * nothing is looked up again (the process is gone). */
#ifndef CUMEMTRACE_REPORT_LOAD_H
#define CUMEMTRACE_REPORT_LOAD_H

#include "json.h"
#include "report.h"

struct loaded_report {
    struct report report;      /* its strings point into `json` */
    struct json_document json; /* empty for a dump */
    int from_dump;
};

/* Fill `loaded` from the file at `path`, to be finished and written with
 * `options`. 0, or -1 with a one-line reason in `error` ("No such file or
 * directory", "line 3, column 7: ...", "not a cumemtrace report: ...").
 * Release with report_unload in either case. */
int report_load(const char *path, const struct report_options *options,
                struct loaded_report *loaded, char *error, size_t error_size);
/* The same, leaving out of a JSON report what a summary of it does not need:
 * the event timeline, the coarse series, the live blocks listed one by one,
 * its findings and fragmentation (has_timeline 0, series NULL, no blocks):
 * what merge reads of each rank, in a fraction of the time. */
int report_load_summary(const char *path, const struct report_options *options,
                        struct loaded_report *loaded, char *error, size_t error_size);
/* The same for a report or dump already read: `length` bytes of `text`,
 * which must hold a NUL after them. The loaded report keeps no pointer into
 * `text`. */
int report_load_text(const char *text, size_t length, const struct report_options *options,
                     struct loaded_report *loaded, char *error, size_t error_size);
void report_unload(struct loaded_report *loaded);

#endif
