/* map.c - growing, removing from and clearing the small hash map (map.h). */
#include "map.h"

#include "arena.h"

int map_reserve(struct map *m, uint32_t more, uint32_t percent, uint32_t first, uint32_t size,
                map_hash *hash)
{
    if (m->capacity && (uint64_t)(m->used + more) * 100 <= (uint64_t)m->capacity * percent)
        return 0;
    uint32_t capacity = m->capacity ? m->capacity * 2 : first;
    char *slots = pages_alloc((size_t)capacity * size);
    if (!slots)
        return -1;
    for (uint32_t i = 0; i < m->capacity; i++) {
        const void *from = map_slot(m, i);
        if (map_empty(from))
            continue;
        uint32_t j = (uint32_t)hash(from) & (capacity - 1);
        while (!map_empty(slots + (size_t)j * size))
            j = (j + 1) & (capacity - 1);
        memcpy(slots + (size_t)j * size, from, size);
    }
    if (m->slots)
        pages_free(m->slots, (size_t)m->capacity * m->size);
    m->slots = slots;
    m->capacity = capacity;
    m->size = size;
    return 0;
}

void map_remove(struct map *m, void *slot, map_hash *hash)
{
    uint32_t mask = m->capacity - 1;
    uint32_t i = (uint32_t)(((char *)slot - m->slots) / m->size), j = i;
    for (;;) {
        memset(map_slot(m, i), 0, m->size);
        for (;;) {
            j = (j + 1) & mask;
            if (map_empty(map_slot(m, j))) {
                m->used--;
                return;
            }
            uint32_t k = (uint32_t)hash(map_slot(m, j)) & mask;
            /* Stays unless its home lies cyclically in (i, j]. */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
                continue;
            break;
        }
        memcpy(map_slot(m, i), map_slot(m, j), m->size);
        i = j;
    }
}

void map_clear(struct map *m)
{
    if (m->slots)
        memset(m->slots, 0, (size_t)m->capacity * m->size);
    m->used = 0;
}
