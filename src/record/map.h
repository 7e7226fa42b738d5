/* map.h - one small hash map, for the tracer's tables off the record path.
 *
 * Open addressing over slots of one size, a power of two of them, each
 * key probed forward from its home (its hash masked to the capacity). A
 * slot whose first 8 bytes (its key's first word, never 0 in a key) are 0
 * is empty. The owner says what a key is: its hash (map_hash) and when a
 * slot holds it (the `same` of map_find); the slots are its own struct.
 * Memory comes from pages_alloc (arena.h). Removal shifts the entries
 * after back, so no slot is ever a tombstone. Not thread-safe: the owner
 * holds its lock.
 *
 * The record path's three tables are their own, and say why: the stack
 * index (stacks.c) and the unwinding rules (unwind.c) are read without a
 * lock while one writer inserts, and the registry (registry.c) keeps
 * 8-byte slots, a record's address with a tag of its hash, in shards of
 * their own locks. */
#ifndef CUMEMTRACE_MAP_H
#define CUMEMTRACE_MAP_H

#include <stdint.h>
#include <string.h>

struct map {
    char *slots;       /* capacity * size bytes; NULL before map_reserve */
    uint32_t capacity; /* a power of two, or 0 */
    uint32_t used;     /* slots holding a key */
    uint32_t size;     /* of one slot, at least 8 */
};

/* The hash of the key the (full) slot holds; its low bits are its home. */
typedef uint64_t map_hash(const void *slot);

static inline void *map_slot(const struct map *m, uint32_t i)
{
    return m->slots + (size_t)i * m->size;
}

static inline int map_empty(const void *slot)
{
    uint64_t first;
    memcpy(&first, slot, sizeof(first));
    return first == 0;
}

/* The slot holding the key `same` recognises (same(slot, key) != 0), found
 * from `hash`'s home; else the empty slot where it goes, which the caller
 * fills (key first) and counts in `used`. The map must have a capacity
 * (map_reserve), and so at least one empty slot. */
static inline void *map_find(const struct map *m, uint64_t hash,
                             int (*same)(const void *slot, const void *key), const void *key)
{
    for (uint32_t i = (uint32_t)hash & (m->capacity - 1);; i = (i + 1) & (m->capacity - 1)) {
        void *slot = map_slot(m, i);
        if (map_empty(slot) || same(slot, key))
            return slot;
    }
}

/* Room for `more` keys more with the map at most `percent` full: doubled
 * (from `first` slots of `size` bytes, both powers of two) and every key
 * moved by `hash` when it would be fuller. 0, or -1 with the map as it was
 * when out of memory. */
int map_reserve(struct map *m, uint32_t more, uint32_t percent, uint32_t first, uint32_t size,
                map_hash *hash);

/* Empty `slot`, moving back the keys after it that its emptiness would
 * hide from their homes. A key may move into `slot`: a walk of the slots
 * that removes looks at the same slot again. */
void map_remove(struct map *m, void *slot, map_hash *hash);

/* Every key removed; the slots kept. */
void map_clear(struct map *m);

#endif
