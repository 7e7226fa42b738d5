/* clock.h - the one monotonic clock the tracer reads, in nanoseconds. */
#ifndef CUMEMTRACE_CLOCK_H
#define CUMEMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

#endif
