/* cumemtrace.h - optional API for programs traced by libcumemtrace.so.
 *
 * Nothing here is needed to trace a program: LD_PRELOAD=libcumemtrace.so is
 * enough. These calls let a program ask for a snapshot or mark a point in its
 * run (an iteration, a phase). From Python:
 *
 *     import ctypes
 *     lib = ctypes.CDLL(None)                  # the preloaded library
 *     lib.cumemtrace_mark(b"epoch 3")
 *     lib.cumemtrace_snapshot(b"/tmp/snap-%p")
 *
 * From C, link libcumemtrace_api (`pkg-config --cflags --libs cumemtrace`),
 * never libcumemtrace.so itself, which would trace every run: its calls do
 * nothing in a program that is not traced (cumemtrace_version() returns
 * NULL there), and reach the tracer in one that is, since the preloaded
 * library's definitions come first.
 *
 * All functions are safe to call from any thread. The pytest plugin
 * (python/cumemtrace_pytest) uses them to find tests that leave GPU memory
 * held. */
#ifndef CUMEMTRACE_H
#define CUMEMTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The tracer's version, e.g. "0.1.0"; NULL from libcumemtrace_api when the
 * tracer is not loaded. */
const char *cumemtrace_version(void);

/* Write a report of what is live now to `path` (a template like
 * CUMEMTRACE_OUTPUT: %p pid, %r rank, %h host; the formats of
 * CUMEMTRACE_FORMAT are added as extensions). NULL uses CUMEMTRACE_OUTPUT
 * with "-snapshot-N" appended. A file already at the name is never
 * replaced: "-PID" (then "-PID-2", ...) goes before the extension instead.
 * Returns 0, or -1 if nothing could be written. */
int cumemtrace_snapshot(const char *path);

/* Write the JSON report of what is live now (docs/report.schema.json, the
 * reason "snapshot") to the open file descriptor `fd`, whatever
 * CUMEMTRACE_FORMAT says; for tools inside the process, such as the pytest
 * plugin (python/cumemtrace_pytest), which reads it back from a temporary
 * file. Returns 0, or -1 if it could not be collected or written. */
int cumemtrace_write_json(int fd);

/* As cumemtrace_write_json, with the readings a snapshot makes in a Python
 * program: PyTorch's counters, what its tensors are and who holds them
 * (`holders`: the walk from Python's roots, up to CUMEMTRACE_HOLDERS_MS).
 * The walk runs on this thread when it holds the GIL (ctypes.PyDLL), else
 * on the tracer's own, which waits for the GIL. Returns as
 * cumemtrace_write_json. */
int cumemtrace_write_json_holders(int fd);

/* Mark a point in the run with a label (copied, up to 63 bytes). Marks are
 * listed in reports with the live bytes at that moment. */
void cumemtrace_mark(const char *label);

#ifdef __cplusplus
}
#endif

#endif
