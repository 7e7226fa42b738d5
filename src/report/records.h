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
#include "run_facts.h"

/* ---- the JSON report (docs/report.schema.json) ---------------------------- */

#define REPORT_FORMAT_VERSION 1

/* A counter set's figures (struct counters) as reports write them, in this
 * order: the JSON report's "group":{"key":N} (a NULL group: "key":N of its
 * own, PyTorch's memory_stats() names), and the crash dump's counters line.
 * The JSON writer and loader, the dump's writer and reader all use it. */
#define COUNTER_KEYS(X)                                                                            \
    X(bytes_current, "allocated_bytes", "current")                                                 \
    X(bytes_peak, "allocated_bytes", "peak")                                                       \
    X(bytes_allocated, "allocated_bytes", "allocated")                                             \
    X(bytes_freed, "allocated_bytes", "freed")                                                     \
    X(blocks_current, "allocation", "current")                                                     \
    X(blocks_peak, "allocation", "peak")                                                           \
    X(blocks_allocated, "allocation", "allocated")                                                 \
    X(blocks_freed, "allocation", "freed")                                                         \
    X(implicit_bytes, "freed_implicitly", "bytes")                                                 \
    X(implicit_blocks, "freed_implicitly", "blocks")                                               \
    X(failures, NULL, "num_alloc_failures")                                                        \
    X(ooms, NULL, "num_ooms")

enum {
#define X(field, group, key) COUNTER_KEY_##field,
    COUNTER_KEYS(X) /* COUNTER_KEY_field, one a figure */
#undef X
    COUNTER_KEY_COUNT
};

struct counter_key {
    const char *group, *key;
    size_t offset; /* of the figure in struct counters */
};
extern const struct counter_key counter_keys[COUNTER_KEY_COUNT];

/* The figure that counter_keys[key] (records.c) names, in a set. */
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
#define POOL_FIGURE_KEYS(X)                                                                        \
    X(reserved, "reserved_bytes")                                                                  \
    X(reserved_peak, "reserved_peak")                                                              \
    X(used, "used_bytes")                                                                          \
    X(used_peak, "used_peak")

/* A stack's figures (struct stack_stats, each a count), in the order every
 * record of a stack has them: the JSON report's "stacks" entries, under the
 * key, and the crash dump's stack record, after the id. report_json.c and
 * crashdump.c write them, report_load.c and dump_read.c read them back. */
#define STACK_STATS_FIELDS(X)                                                                      \
    X("live_bytes", live_bytes)                                                                    \
    X("live_blocks", live_blocks)                                                                  \
    X("peak_live_bytes", peak_live_bytes)                                                          \
    X("allocations", allocations)                                                                  \
    X("allocated_bytes", allocated_bytes)                                                          \
    X("freed_implicitly_bytes", implicit_bytes)                                                    \
    X("freed_implicitly_blocks", implicit_blocks)

/* What memory a record is, through which entry point, on which device: the
 * fields blocks and groups of blocks share (in the forms below). */
#define REPORT_KIND_FIELDS(X)                                                                      \
    X("kind", kind, kind)                                                                          \
    X("api", api, api)                                                                             \
    X("device", device, device)

/* A block of the JSON report's "blocks" list: its key, the member of struct
 * report_block it is, and its form, in the order written. report_json.c
 * writes each form (put_FORM) and report_load.c reads it back (read_FORM):
 * hex, "0x..."; u64, a number; kind, its name; api, the entry point's name;
 * device, a number or null; stack, an id in "stacks"; handle, the stream or
 * pool as hex, or null; flag, true or false. The block's `context` is the
 * dump's only. tests/unit/test_report_fields.c holds both to this list. */
#define REPORT_BLOCK_FIELDS(X)                                                                     \
    X("address", value, hex)                                                                       \
    X("size", size, u64)                                                                           \
    REPORT_KIND_FIELDS(X)                                                                          \
    X("stack", stack_id, stack)                                                                    \
    X("thread", thread, u64)                                                                       \
    X("sequence", sequence, u64)                                                                   \
    X("time_ms", time_ms, u64)                                                                     \
    X("stream_or_pool", handle, handle)                                                            \
    X("held_at_end", held_at_end, flag)

/* A group of blocks (struct report_group) in the forms above: what the
 * "live" list and the "held_at_end" list both write first, then each its
 * own. held_at_end's entries are held at the end by definition: their flag
 * is not written. */
#define REPORT_GROUP_FIELDS(X)                                                                     \
    X("stack", stack_id, stack)                                                                    \
    REPORT_KIND_FIELDS(X)                                                                          \
    X("blocks", blocks, u64)                                                                       \
    X("bytes", bytes, u64)
#define REPORT_LIVE_GROUP_FIELDS(X)                                                                \
    REPORT_GROUP_FIELDS(X)                                                                         \
    X("largest", largest, u64)                                                                     \
    X("oldest_ms", oldest_ms, u64)                                                                 \
    X("held_at_end", held_at_end, flag)
#define REPORT_HELD_GROUP_FIELDS(X)                                                                \
    REPORT_GROUP_FIELDS(X)                                                                         \
    X("freed_at_teardown_bytes", freed_at_teardown, u64)

/* A failed allocation of the JSON report's failures.recent list (struct
 * report_failure) in the forms above, and int, a signed number: first the call as
 * it failed, then whether it was out of memory, its stack, thread and time.
 * Between the two the writer puts "error", the code's name, by hand: it is
 * worked out of the api and the code, no member of its own, and not read
 * back. The OOM event (struct report_event) writes the call too, after its
 * type, then "error" and its own. test_report_fields holds writer and
 * loader to these lists. */
#define REPORT_FAILURE_CALL_FIELDS(X)                                                              \
    X("size", size, u64)                                                                           \
    REPORT_KIND_FIELDS(X)                                                                          \
    X("code", code, int)
#define REPORT_FAILURE_CONTEXT_FIELDS(X)                                                           \
    X("oom", oom, flag)                                                                            \
    X("oom_number", oom_number, u64)                                                               \
    X("stack", stack_id, stack)                                                                    \
    X("thread", thread, u64)                                                                       \
    X("time_ms", time_ms, u64)

/* A mark of the JSON report's marks.recent list (struct report_mark) in the
 * forms
 * above. Its "label" comes before them and its "self_time_ns" after, both
 * by hand: the label is a string to escape (and to cut to the mark's size
 * when read), and self_time_ns is written only when the report has self
 * time at all. test_report_fields holds writer and loader to the list and
 * the two keys to their places. */
#define REPORT_MARK_FIELDS(X)                                                                      \
    X("time_ms", time_ms, u64)                                                                     \
    X("sequence", sequence, u64)                                                                   \
    X("device_bytes", device_bytes, u64)

/* The names of the reasons for a lost event (run_facts.h), as the
 * JSON report's tracer.lost writes them. */
extern const char *const lost_names[LOST_COUNT];

/* What became of the retry of an OOM (the report at an OOM is rewritten
 * when it is seen), as the JSON report's event.retry names it. */
enum retry_state { RETRY_NONE, RETRY_PENDING, RETRY_SUCCEEDED, RETRY_FAILED, RETRY_COUNT };
extern const char *const retry_names[RETRY_COUNT];

/* ---- the crash dump (docs/DUMP.md) ----------------------------------------- */

#define DUMP_FORMAT_VERSION 1

/* Its records, one a line, each line starting with the record's name, in
 * the order the dump writes them. The table of docs/DUMP.md lists the same
 * names (tests/unit/test_dump_doc.c holds it to this list). */
#define DUMP_RECORDS(X)                                                                            \
    X(HEADER, "cumemtrace-dump")                                                                   \
    X(PID, "pid")                                                                                  \
    X(PPID, "ppid")                                                                                \
    X(SIGNAL, "signal")                                                                            \
    X(LOCK, "lock")                                                                                \
    X(TIME_MS, "time_ms")                                                                          \
    X(START_UNIX_MS, "start_unix_ms")                                                              \
    X(CMDLINE, "cmdline")                                                                          \
    X(CWD, "cwd")                                                                                  \
    X(API, "api")                                                                                  \
    X(COUNTERS, "counters")                                                                        \
    X(FAILURES_TOTAL, "failures_total")                                                            \
    X(FAILURE, "failure")                                                                          \
    X(LOST, "lost")                                                                                \
    X(THREAD, "thread")                                                                            \
    X(PYLOC, "pyloc")                                                                              \
    X(HANDLE, "handle")                                                                            \
    X(PROGRAM_END, "program_end")                                                                  \
    X(END_STACK, "end_stack")                                                                      \
    X(STACK, "stack")                                                                              \
    X(BLOCK, "block")                                                                              \
    X(MAPS, "maps")                                                                                \
    X(END_MAPS, "end-maps")                                                                        \
    X(END, "end")

/* A block record's fields after its name, in this order: the member of
 * struct report_block each is, and how it is written (hex, u64, i64).
 * crashdump.c writes them and dump_read.c reads them, both from this list,
 * as docs/DUMP.md's `block` row names them. */
#define DUMP_BLOCK_FIELDS(X)                                                                       \
    X(value, hex) /* the address */                                                                \
    X(size, u64)                                                                                   \
    X(sequence, u64)                                                                               \
    X(stack_id, u64)                                                                               \
    X(time_ms, u64)                                                                                \
    X(thread, u64)                                                                                 \
    X(handle, u64)                                                                                 \
    X(device, i64)                                                                                 \
    X(kind, u64)                                                                                   \
    X(api, u64)                                                                                    \
    X(context, u64)                                                                                \
    X(held_at_end, u64) /* 1: live when the program ended; absent: older */

enum dump_record {
#define X(id, name) DUMP_##id,
    DUMP_RECORDS(X) /* DUMP_id, one a record */
#undef X
    DUMP_RECORD_COUNT
};
extern const char *const dump_record_names[DUMP_RECORD_COUNT];

/* The record a line starts with (its first word); -1 if none. */
int dump_record_of(const char *line);

/* How the dump found the tracker's lock: taken (the state read under it),
 * busy (another thread held it) or inside (the crashing thread was in the
 * tracer). The dump's lock record, the JSON report's event.lock. */
enum dump_lock { DUMP_LOCK_TAKEN, DUMP_LOCK_BUSY, DUMP_LOCK_INSIDE, DUMP_LOCK_COUNT };
extern const char *const dump_lock_names[DUMP_LOCK_COUNT];
/* The name in dump_lock_names that `text` is, or "unknown". */
const char *dump_lock_name(const char *text);

#endif
