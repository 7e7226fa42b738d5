/* cache_segments.c - which driver allocations are a framework's cache
 * segments (see cache_segments.h): their stacks are flagged, for good, so
 * that reports tell a cache's reserve from the lines' own memory. Looks up
 * records in the registry under its shard locks, or walks it whole under
 * tracker_lock(); never on the record path. */
#include "cache_segments.h"
#include "kinds.h"
#include "registry.h"
#include "stacks.h"
#include "tracker.h"
#include "tracker_thread.h"

/* The stack of the live block at `key`, or 0. */
static uint32_t stack_of(uint64_t key, uint64_t *size)
{
    registry_lock(key);
    struct block *b = registry_find(key);
    uint32_t id = b ? b->stack_id : 0;
    *size = b ? b->size : 0;
    registry_unlock(key);
    return id;
}

static void flag_cache_stack(uint32_t id, uint32_t flag)
{
    struct stack_record *s = stack_get(id);
    if (s && s->depth > 0)
        stack_flag(id, flag);
}

void segments_taken(int cache_kind, uint64_t address, uint64_t size)
{
    if (!kind_in_cache(cache_kind) || !tracker_enter_to_record())
        return;
    uint32_t flag = STACK_CACHE_SEGMENT(cache_kind);
    uint64_t bytes;
    flag_cache_stack(stack_of(block_key(address, SPACE_MEMORY), &bytes), flag);
    /* Expandable segments: the range is mapped page by page, back to back. */
    for (uint64_t at = address; at < address + size && at >= address; at += bytes) {
        uint32_t id = stack_of(block_key(at, SPACE_VMM_MAPPING), &bytes);
        if (!id || !bytes)
            break;
        flag_cache_stack(id, flag);
    }
    uint32_t physical = tracker_take_physical_stack();
    if (physical)
        flag_cache_stack(physical, flag);
    tracker_leave();
}

void segments_handed_out(int cache_kind, uint64_t address)
{
    if (!kind_in_cache(cache_kind) || !tracker_enter_to_record())
        return;
    uint64_t bytes;
    flag_cache_stack(stack_of(block_key(address, SPACE_MEMORY), &bytes),
                     STACK_CACHE_SEGMENT(cache_kind));
    tracker_leave();
}

/* Whether a driver allocation's record `b` holds `address`. */
static int holds(const struct block *b, uint64_t address)
{
    int kind = block_kind(b);
    uint64_t start = block_value(b);
    return (kind_space(kind) == SPACE_MEMORY || kind == KIND_VMM_MAPPING) && !kind_in_cache(kind) &&
           address >= start && address - start < b->size;
}

int segments_holder(int cache_kind, uint64_t address, uint64_t *start, uint64_t *size)
{
    if (!kind_in_cache(cache_kind) || !tracker_enter_to_record())
        return -1;
    struct block found = {0};
    uint64_t keys[] = {block_key(address, SPACE_MEMORY), block_key(address, SPACE_VMM_MAPPING)};
    for (int i = 0; i < 2 && !found.size; i++) {
        registry_lock(keys[i]);
        struct block *b = registry_find(keys[i]);
        if (b && holds(b, address))
            found = *b;
        registry_unlock(keys[i]);
    }
    if (!found.size) {
        tracker_lock();
        struct registry_cursor cursor;
        for (struct block *b = registry_first(&cursor); b && !found.size;
             b = registry_next(&cursor))
            if (holds(b, address))
                found = *b;
        tracker_unlock();
    }
    if (found.size) {
        flag_cache_stack(found.stack_id, STACK_CACHE_SEGMENT(cache_kind));
        *start = block_value(&found);
        *size = found.size;
    }
    tracker_leave();
    return found.size ? 0 : -1;
}
