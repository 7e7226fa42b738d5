/* records.c - the tables of records.h. */
#include <stddef.h>
#include <string.h>

#include "records.h"

const struct counter_key counter_keys[COUNTER_KEY_COUNT] = {
#define X(field, group, key) {group, key, offsetof(struct counters, field)},
    COUNTER_KEYS(X)
#undef X
};

const char *const lost_names[LOST_COUNT] = {
    [LOST_REENTRY] = "reentry",         [LOST_NO_MEMORY] = "no_memory",
    [LOST_UNRESOLVED] = "unresolved",   [LOST_UNKNOWN_FREE] = "unknown_free",
    [LOST_MISSED_FREE] = "missed_free", [LOST_UNWRAPPED] = "unwrapped_lookup",
};

const char *const retry_names[RETRY_COUNT] = {
    [RETRY_NONE] = "none",
    [RETRY_PENDING] = "pending",
    [RETRY_SUCCEEDED] = "succeeded",
    [RETRY_FAILED] = "failed",
};

const char *const dump_record_names[DUMP_RECORD_COUNT] = {
#define X(id, name) [DUMP_##id] = name,
    DUMP_RECORDS(X)
#undef X
};

int dump_record_of(const char *line)
{
    size_t n = strcspn(line, " \n");
    for (int record = 0; record < DUMP_RECORD_COUNT; record++)
        if (strlen(dump_record_names[record]) == n &&
            strncmp(line, dump_record_names[record], n) == 0)
            return record;
    return -1;
}

const char *const dump_lock_names[DUMP_LOCK_COUNT] = {
    [DUMP_LOCK_TAKEN] = "taken",
    [DUMP_LOCK_BUSY] = "busy",
    [DUMP_LOCK_INSIDE] = "inside",
};

const char *dump_lock_name(const char *text)
{
    for (int lock = 0; text && lock < DUMP_LOCK_COUNT; lock++)
        if (strcmp(text, dump_lock_names[lock]) == 0)
            return dump_lock_names[lock];
    return "unknown";
}
