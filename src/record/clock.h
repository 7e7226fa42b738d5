/* clock.h - the monotonic clocks the tracer reads, in nanoseconds. */
#ifndef CUMEMTRACE_CLOCK_H
#define CUMEMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static inline uint64_t monotonic_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* The time of the kernel's last tick (CLOCK_MONOTONIC_COARSE): it moves a
 * tick at a time (1 to 4 ms), and reading it is a few loads, with no TSC
 * read and scaling (6 ns against 32 in a loop on an H100 machine's VM; in a
 * tensor's path, with its lines out of cache, the full read took some 300
 * cycles). For checks where a tick is fine enough. */
static inline uint64_t coarse_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC_COARSE);
}

#endif
