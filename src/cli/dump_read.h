/* dump_read.h - a crash dump read back into a report (see dump_read.c). */
#ifndef CUMEMTRACE_DUMP_READ_H
#define CUMEMTRACE_DUMP_READ_H

#include "report.h"

/* Fill `r` from the dump at `path` and symbolize it against the files named
 * in its maps. 0, or -1 with errno set; release `r` with report_release. */
int dump_read(const char *path, struct report *r);

#endif
