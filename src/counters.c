/* counters.c - per-device, per-kind totals (see counters.h). */
#include <string.h>

#include "counters.h"

struct counter_table counter_table;

int counters_slot(int device)
{
    return device >= 0 && device < MAX_DEVICES ? device : COUNTER_NO_DEVICE;
}

void counters_reset(void)
{
    memset(&counter_table, 0, sizeof(counter_table));
}

static void add(struct counters *c, uint64_t size)
{
    c->bytes_current += size;
    c->bytes_allocated += size;
    c->blocks_current++;
    c->blocks_allocated++;
    if (c->bytes_current > c->bytes_peak)
        c->bytes_peak = c->bytes_current;
    if (c->blocks_current > c->blocks_peak)
        c->blocks_peak = c->blocks_current;
}

static void subtract(struct counters *c, uint64_t size, int implicit)
{
    c->bytes_current -= size;
    c->blocks_current--;
    if (implicit) {
        c->implicit_bytes += size;
        c->implicit_blocks++;
    } else {
        c->bytes_freed += size;
        c->blocks_freed++;
    }
}

void counters_on_alloc(int device, int kind, uint64_t size)
{
    int slot = counters_slot(device);
    counter_table.device_seen[slot] = 1;
    add(&counter_table.sets[slot][kind], size);
    if (kind_uses_device_memory(kind))
        add(&counter_table.sets[slot][COUNTER_DEVICE_MEMORY], size);
}

void counters_on_free(int device, int kind, uint64_t size, int implicit)
{
    int slot = counters_slot(device);
    subtract(&counter_table.sets[slot][kind], size, implicit);
    if (kind_uses_device_memory(kind))
        subtract(&counter_table.sets[slot][COUNTER_DEVICE_MEMORY], size, implicit);
}

void counters_on_failure(int device, int kind, int oom)
{
    int slot = counters_slot(device);
    counter_table.device_seen[slot] = 1;
    struct counters *sets[2] = {&counter_table.sets[slot][kind],
                                &counter_table.sets[slot][COUNTER_DEVICE_MEMORY]};
    for (int i = 0; i < (kind_uses_device_memory(kind) ? 2 : 1); i++) {
        sets[i]->failures++;
        if (oom)
            sets[i]->ooms++;
    }
}
