/* records.c - the tables of records.h. */
#include <stddef.h>

#include "records.h"

const struct counter_key counter_keys[COUNTER_KEY_COUNT] = {
#define X(field, group, key) {group, key, offsetof(struct counters, field)},
    COUNTER_KEYS(X)
#undef X
};
