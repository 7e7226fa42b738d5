/* crashdump.h - the tracker's state written from a signal handler.
 *
 * crashdump_write() uses async-signal-safe calls only: open/read/write/close
 * on preallocated buffers, no malloc, no stdio, and no lock the crashing
 * thread may hold (the tracker's lock is tried for a bounded time, never
 * waited on). The dump is text, one record a line, with raw addresses and the
 * process's /proc/self/maps; `cumemtrace symbolize DUMP` turns it into the
 * usual text and JSON reports offline (dump_read.c). Format: docs/DUMP.md. */
#ifndef CUMEMTRACE_CRASHDUMP_H
#define CUMEMTRACE_CRASHDUMP_H

/* Work out the path and make the file ahead; call again after fork. */
void crashdump_prepare(void);
/* async-signal-safe: the dump of a fatal signal. */
void crashdump_write(int signal);
/* The dump in place of the exit report, where that could not be written
 * safely or at all; `why` starts the line that says so. Async-signal-safe;
 * -1 if no dump can be written here (no path, nothing traced). */
int crashdump_exit(const char *why);
/* 1 while the file made ahead is there to be written. */
int crashdump_ready(void);

#endif
