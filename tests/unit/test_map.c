/* test_map.c - the small hash map (map.h) finds what it holds after growing,
 * removing and clearing.
 *
 * Keys are made to share homes (a hash that keeps few bits), so probes run
 * long and wrap past the last slot, and removal must move keys back across
 * the wrap for every survivor to stay found. */
#include <stdint.h>

#include "check.h"
#include "map.h"

struct entry {
    uint64_t key; /* 0: empty */
    uint64_t value;
};

#define KEYS 5000

/* Few distinct homes: runs of keys that collide. */
static uint64_t entry_hash(const void *slot)
{
    return ((const struct entry *)slot)->key * 0x9e3779b97f4a7c15ull >> 58;
}

static uint64_t key_hash(uint64_t key)
{
    const struct entry wanted = {key, 0};
    return entry_hash(&wanted);
}

static int same_key(const void *slot, const void *key)
{
    return ((const struct entry *)slot)->key == *(const uint64_t *)key;
}

static struct entry *find(struct map *m, uint64_t key)
{
    return map_find(m, key_hash(key), same_key, &key);
}

static int add(struct map *m, uint64_t key)
{
    if (map_reserve(m, 1, 50, 16, sizeof(struct entry), entry_hash) < 0)
        return -1;
    struct entry *e = find(m, key);
    if (e->key)
        return 1; /* already there */
    *e = (struct entry){key, key * 3};
    m->used++;
    return 0;
}

int main(void)
{
    struct map m = {0};
    for (uint64_t k = 1; k <= KEYS; k++)
        CHECK(add(&m, k) == 0);
    CHECK_EQ(m.used, KEYS);
    CHECK(m.capacity >= 2 * KEYS); /* at most half full */
    CHECK(add(&m, 17) == 1);
    for (uint64_t k = 1; k <= KEYS; k++) {
        const struct entry *e = find(&m, k);
        CHECK(e->key == k && e->value == k * 3);
    }
    /* Every third key out, through a walk that looks again at a slot a key
     * moved into. */
    uint32_t removed = 0;
    for (uint32_t i = 0; i < m.capacity;) {
        struct entry *e = map_slot(&m, i);
        if (e->key && e->key % 3 == 0) {
            map_remove(&m, e, entry_hash);
            removed++;
            continue;
        }
        i++;
    }
    CHECK_EQ(removed, KEYS / 3);
    CHECK_EQ(m.used, KEYS - KEYS / 3);
    for (uint64_t k = 1; k <= KEYS; k++) {
        const struct entry *e = find(&m, k);
        if (k % 3 == 0)
            CHECK(e->key == 0);
        else
            CHECK(e->key == k && e->value == k * 3);
    }
    uint32_t capacity = m.capacity;
    map_clear(&m);
    CHECK_EQ(m.used, 0);
    CHECK_EQ(m.capacity, capacity);
    CHECK(find(&m, 1)->key == 0);
    CHECK(add(&m, 1) == 0 && find(&m, 1)->key == 1);
    return check_done("map");
}
