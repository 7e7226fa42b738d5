/* records.h - what reports write, defined once for the writers and the
 * readers.
 *
 * The JSON report (report_json.c) and the crash dump (crashdump.c) are read
 * back by the command (cli/report_load.c, cli/dump_read.c). Each name or
 * order both sides must agree on is defined here, once, and both use it. */
#ifndef CUMEMTRACE_RECORDS_H
#define CUMEMTRACE_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "counters.h"

#define REPORT_FORMAT_VERSION 1

/* A counter set's figures (struct counters) as reports write them, in this
 * order: the JSON report's "group":{"key":N} (a NULL group: "key":N of its
 * own, PyTorch's memory_stats() names), and the crash dump's counters line.
 * The JSON writer and loader, the dump's writer and reader all use it. */
#define COUNTER_KEYS(X)                                                                      \
    X(bytes_current, "allocated_bytes", "current")                                           \
    X(bytes_peak, "allocated_bytes", "peak")                                                 \
    X(bytes_allocated, "allocated_bytes", "allocated")                                       \
    X(bytes_freed, "allocated_bytes", "freed")                                               \
    X(blocks_current, "allocation", "current")                                               \
    X(blocks_peak, "allocation", "peak")                                                     \
    X(blocks_allocated, "allocation", "allocated")                                           \
    X(blocks_freed, "allocation", "freed")                                                   \
    X(implicit_bytes, "freed_implicitly", "bytes")                                           \
    X(implicit_blocks, "freed_implicitly", "blocks")                                         \
    X(failures, NULL, "num_alloc_failures")                                                  \
    X(ooms, NULL, "num_ooms")

enum {
#define X(field, group, key) COUNTER_KEY_##field,
    COUNTER_KEYS(X)
#undef X
    COUNTER_KEY_COUNT
};

struct counter_key {
    const char *group, *key;
    size_t offset;                       /* of the figure in struct counters */
};
extern const struct counter_key counter_keys[COUNTER_KEY_COUNT];

/* The figure named by counter_keys[key] in a set (records.c). */
static inline uint64_t *counter_figure(struct counters *c, int key)
{
    return (uint64_t *)((char *)c + counter_keys[key].offset);
}

static inline uint64_t counter_value(const struct counters *c, int key)
{
    return *(const uint64_t *)((const char *)c + counter_keys[key].offset);
}

/* The JSON names of a pool's figures (a device's "default_pool", "pools"),
 * in the order they are written; the writer and the loader both use these. */
#define POOL_FIGURE_KEYS(X)                                                                  \
    X(reserved, "reserved_bytes")                                                            \
    X(reserved_peak, "reserved_peak")                                                        \
    X(used, "used_bytes")                                                                    \
    X(used_peak, "used_peak")

#endif
