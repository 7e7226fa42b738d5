/* cumemtrace_api.c - libcumemtrace_api.so: cumemtrace.h's calls, doing nothing.
 *
 * A program that calls the API links this (-lcumemtrace_api, or pkg-config
 * cumemtrace), never the tracer itself: linking libcumemtrace.so would load
 * the tracer, and its hooks, into every run of the program. Traced, the
 * program has libcumemtrace.so preloaded, and a preloaded library comes
 * before every other in the process's symbol lookup: its definitions of
 * these names are the ones the program's calls reach. Untraced, they reach
 * these, which say so and do nothing. */
#include <stddef.h>

#include "cumemtrace.h"

#define API __attribute__((visibility("default")))

/* NULL: the tracer is not loaded (its own returns its version). */
API const char *cumemtrace_version(void)
{
    return NULL;
}

API int cumemtrace_snapshot(const char *path)
{
    (void)path;
    return -1;
}

API int cumemtrace_write_json(int fd)
{
    (void)fd;
    return -1;
}

API int cumemtrace_write_json_holders(int fd)
{
    (void)fd;
    return -1;
}

API void cumemtrace_mark(const char *label)
{
    (void)label;
}
