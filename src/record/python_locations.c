/* python_locations.c - the table of Python locations (see
 * python_locations.h): an array of locations and an open-addressing index of
 * their keys, both in pages of their own (arena.h), and the strings they
 * name, copied once. */
#include <string.h>

#include "arena.h"
#include "map.h"
#include "python_locations.h"

/* A key (python_locations.h) holds, with its code object, what tells a code
 * object from another compiled at its address after it was freed: `check`, its filename object, and `version`, its co_version where
 * the layout knows its offset (3.12 and 3.13; 0 otherwise). The interpreter
 * gives each code object it makes the next value of a counter (3.12: one for
 * the process, 3.13: one per interpreter), so a code object made after
 * another was freed has another version, even under the same filename
 * object (exec(compile(source, "<string>", "exec")) in a loop), until the
 * counter runs out: the code object given 2^32 - 1 leaves it at 0 for good,
 * and code objects made after it are told apart by their filename alone, as
 * on 3.10 and 3.11, which have no version: there a code object compiled
 * where one of the same filename object was freed takes the freed one's
 * locations. The version is a field of its own, in the key's padding, not
 * folded into the filename pointer's unused top 16 bits, where versions
 * 65536 apart would look alike. The C API's keys hold a reference to their
 * code object, which keeps its address: both 0. */
struct location_key {
    uintptr_t code, check;
    int64_t key;
    uint32_t id, version;
};
static struct python_location *locations;
static uint32_t location_count, location_capacity;
static struct map location_index; /* of struct location_key */
static char *strings;
static size_t strings_used, strings_size;

const char *locations_keep(const char *s, size_t length)
{
    if (strings_used + length + 1 > strings_size) {
        size_t size = length + 1 > (1u << 20) ? length + 1 : (1u << 20);
        char *pages = pages_alloc(size); /* old pages stay: strings never move */
        if (!pages)
            return "?";
        strings = pages;
        strings_used = 0;
        strings_size = size;
    }
    char *copy = strings + strings_used;
    memcpy(copy, s, length);
    copy[length] = '\0';
    strings_used += length + 1;
    return copy;
}

static uint64_t key_hash(uintptr_t code, int64_t key)
{
    return (((uint64_t)code >> 4) * 0x9e3779b97f4a7c15ull ^ (uint64_t)key * 2654435761u) >> 20;
}

static uint64_t slot_hash(const void *slot)
{
    const struct location_key *k = slot;
    return key_hash(k->code, k->key);
}

static int same_key(const void *slot, const void *key)
{
    const struct location_key *a = slot, *b = key;
    return a->code == b->code && a->key == b->key && a->check == b->check &&
           a->version == b->version;
}

int locations_reserve(void)
{
    if (location_count + 1 >= location_capacity) {
        uint32_t capacity = location_capacity ? location_capacity * 2 : 1024;
        void *p = pages_grow(locations, location_capacity * sizeof(*locations),
                             capacity * sizeof(*locations));
        if (!p)
            return -1;
        locations = p;
        location_capacity = capacity;
    }
    return map_reserve(&location_index, 2, 70, 4096, sizeof(struct location_key), slot_hash);
}

/* The slot of (code, check, version, key): the one holding it, or the empty
 * one where it goes (its id 0). Needs room (locations_reserve). A code is
 * never NULL: a slot holding one is full (map.h). */
static struct location_key *slot_of(uintptr_t code, uintptr_t check, uint32_t version, int64_t key)
{
    const struct location_key wanted = {code, check, key, 0, version};
    return map_find(&location_index, key_hash(code, key), same_key, &wanted);
}

uint32_t locations_known(uintptr_t code, uintptr_t check, uint32_t version, int64_t key)
{
    return location_index.capacity ? slot_of(code, check, version, key)->id : 0;
}

uint32_t locations_enter(uintptr_t code, uintptr_t check, uint32_t version, int64_t key,
                         uint32_t id)
{
    struct location_key *slot = slot_of(code, check, version, key);
    slot->code = code;
    slot->check = check;
    slot->version = version;
    slot->key = key;
    slot->id = id;
    location_index.used++;
    return id;
}

uint32_t locations_new(const char *file, const char *function, int line)
{
    struct python_location *l = &locations[location_count];
    l->file = file;
    l->function = function;
    l->line = line;
    return ++location_count;
}

uint32_t locations_count(void)
{
    return location_count;
}

const struct python_location *locations_at(uint32_t id)
{
    return id >= 1 && id <= location_count ? &locations[id - 1] : NULL;
}
