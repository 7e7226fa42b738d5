/* check.h - the smallest test harness: CHECK records a failure and goes on,
 * check_done() prints "N passed, N failed" and returns the exit status. */
#ifndef CUMEMTRACE_CHECK_H
#define CUMEMTRACE_CHECK_H

#include <stdio.h>

static int checks_passed, checks_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            checks_passed++;                                                                       \
        } else {                                                                                   \
            checks_failed++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ == b_) {                                                                            \
            checks_passed++;                                                                       \
        } else {                                                                                   \
            checks_failed++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s == %s (%llu != %llu)\n", __FILE__, __LINE__,  \
                    #a, #b, a_, b_);                                                               \
        }                                                                                          \
    } while (0)

static inline int check_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, checks_passed, checks_failed);
    return checks_failed ? 1 : 0;
}

#endif
