/* dump_read.h - a crash dump read back into a report (see dump_read.c). */
#ifndef CUMEMTRACE_DUMP_READ_H
#define CUMEMTRACE_DUMP_READ_H

#include "report.h"

/* The most the command reads of one input: a larger file is refused. */
#define INPUT_MAX_BYTES (2ull << 30)
/* A count read from an input (failures, marks) is at most this: the rings'
 * loops run up to a count inclusive, and never end at UINT64_MAX. */
#define INPUT_MAX_COUNT (UINT64_MAX / 2)

/* All of `path`, a regular file or a pipe or FIFO read to its end, at most
 * INPUT_MAX_BYTES, NUL-terminated: `length` bytes, malloc'ed (the caller
 * frees them; a command reading thousands of files one after the other
 * then reuses the same memory, not a new mapping each). NULL with errno
 * set (EFBIG: larger than INPUT_MAX_BYTES). */
char *input_read(const char *path, size_t *length);

/* Fill `r` from the dump in `text` (copied), finished with `options`, and
 * symbolize it against the regular files named in its maps. 0, or -1 with
 * errno set (EPROTO: not a dump of this version); release `r` with
 * report_release either way. */
int dump_parse(struct report *r, const struct report_options *options, const char *text,
               size_t length);
/* The same for the dump at `path` (input_read). */
int dump_read(const char *path, const struct report_options *options, struct report *r);

#endif
