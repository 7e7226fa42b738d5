/* test_registry.c - the live-block table: add, find, remove (backward shift),
 * key spaces, colliding homes, growth, the walk with removal, memory per block,
 * and 8 threads adding and removing at once, each under its shard's lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kinds.h"
#include "registry.h"

#define BASE 0x7f0000000000ull

static uint64_t address_key(uint64_t i)
{
    return block_key(BASE + i * 512, SPACE_MEMORY);
}

static struct block *add(uint64_t key, uint64_t size)
{
    struct block *b = registry_new(key);
    CHECK(b != NULL);
    if (!b)
        return NULL;
    b->size = size;
    b->kind = KIND_DEVICE;
    CHECK(registry_add(b) == 0);
    return b;
}

/* Every live block exactly once, and `expected` of them. */
static void check_walk(size_t expected, uint64_t limit)
{
    static unsigned char seen[1u << 20];
    memset(seen, 0, sizeof(seen));
    size_t count = 0, twice = 0;
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
        count++;
        if (b->size < limit && seen[b->size]++)
            twice++;
    }
    CHECK_EQ(count, expected);
    CHECK_EQ(twice, 0);
}

static void basics(void)
{
    /* 200 000 blocks: the tables grow and every one is found again. */
    enum { N = 200000 };
    for (uint64_t i = 0; i < N; i++)
        add(address_key(i), i);
    CHECK_EQ(registry_count(), N);
    int found = 0;
    for (uint64_t i = 0; i < N; i++) {
        struct block *b = registry_find(address_key(i));
        found += b && b->size == i;
    }
    CHECK_EQ(found, N);
    check_walk(N, N);

    /* The same number in another key space is another block. */
    CHECK(registry_find(block_key(BASE, SPACE_VMM_HANDLE)) == NULL);
    struct block *h = registry_new(block_key(BASE, SPACE_VMM_HANDLE));
    h->kind = KIND_VMM_PHYSICAL;
    CHECK(registry_add(h) == 0);
    CHECK(registry_find(block_key(BASE, SPACE_VMM_HANDLE)) == h);
    CHECK(registry_find(block_key(BASE, SPACE_MEMORY)) != h);
    CHECK_EQ(block_value(h), BASE);
    registry_remove(h);
    CHECK(registry_find(block_key(BASE, SPACE_VMM_HANDLE)) == NULL);

    /* Remove every other one; the rest stay findable; the walk sees them all. */
    for (uint64_t i = 0; i < N; i += 2)
        registry_remove(registry_find(address_key(i)));
    CHECK_EQ(registry_count(), N / 2);
    size_t odd = 0;
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor))
        odd += (b->size % 2) == 1;
    CHECK_EQ(odd, N / 2);
    found = 0;
    for (uint64_t i = 0; i < N; i++) {
        struct block *b = registry_find(address_key(i));
        found += (i % 2 == 0) ? b == NULL : (b && b->size == i);
    }
    CHECK_EQ(found, N);

    /* Freed records and slots are reused: memory stays flat when blocks come
     * and go, and every address new (no tombstones piling up). */
    size_t before = registry_memory_bytes();
    for (uint64_t round = 1; round <= 10; round++) {
        for (uint64_t i = 0; i < N; i += 2)
            add(address_key(round * N + i), i);
        for (uint64_t i = 0; i < N; i += 2)
            registry_remove(registry_find(address_key(round * N + i)));
    }
    CHECK_EQ(registry_count(), N / 2);
    CHECK(registry_memory_bytes() <= before + (2u << 20));

    /* Remove while walking, as context teardown does: every block is seen
     * once and the table ends empty. */
    size_t removed = 0;
    for (struct block *b = registry_first(&cursor); b; b = registry_next(&cursor)) {
        registry_remove(b);
        removed++;
    }
    CHECK_EQ(removed, N / 2);
    CHECK_EQ(registry_count(), 0);
    CHECK(registry_first(&cursor) == NULL);
}

/* Keys chosen to share a shard and a home slot (the low 10 bits of the hash:
 * the same home in every table up to 1024 homes): one long cluster, and
 * removal from its middle must keep the rest findable (backward shift). */
static void collisions(void)
{
    enum { WANTED = 300 };
    static uint64_t keys[WANTED];
    int n = 0;
    registry_init();
    uint64_t target = registry_hash(address_key(0));
    for (uint64_t i = 0; n < WANTED; i++) {
        uint64_t h = registry_hash(address_key(i));
        if (h >> 58 == target >> 58 && (h & 1023) == (target & 1023))
            keys[n++] = address_key(i);
    }
    for (int i = 0; i < n; i++)
        add(keys[i], (uint64_t)i);
    CHECK_EQ(registry_count(), n);
    check_walk(n, n);
    for (int i = 0; i < n; i += 3)
        registry_remove(registry_find(keys[i]));
    int found = 0;
    for (int i = 0; i < n; i++) {
        struct block *b = registry_find(keys[i]);
        found += (i % 3 == 0) ? b == NULL : (b && b->size == (uint64_t)i);
    }
    CHECK_EQ(found, n);
    check_walk(n - (n + 2) / 3, n);
    struct registry_cursor cursor;
    struct block *b;
    while ((b = registry_first(&cursor)) != NULL)
        registry_remove(b);
    CHECK_EQ(registry_count(), 0);
}

/* One million live blocks: the registry's own bytes per block (records and slots, as mapped). */
static void bytes_per_block(void)
{
    registry_init();
    enum { M = 1000000 };
    for (uint64_t i = 0; i < M; i++)
        add(address_key(i), i);
    CHECK_EQ(registry_count(), M);
    double each = (double)registry_memory_bytes() / M;
    printf("registry: %zu bytes for %d live blocks (%.1f bytes each)\n", registry_memory_bytes(), M,
           each);
    CHECK(each <= 60); /* 36-byte records, 8-byte slots at most 3/4 full */
    check_walk(M, M);
}

/* 8 threads, each adding and removing its own addresses under the shard
 * locks; then the counts add up and every survivor is there. */
enum { THREADS = 8, PER_THREAD = 50000 };

static void *hammer(void *arg)
{
    uint64_t first = 10000000 + (uint64_t)(uintptr_t)arg * PER_THREAD;
    for (uint64_t i = first; i < first + PER_THREAD; i++) {
        uint64_t key = address_key(i);
        registry_lock(key);
        struct block *b = registry_new(key);
        if (b) {
            b->size = i;
            if (registry_add(b) != 0)
                registry_release(b);
        }
        registry_unlock(key);
        if (i % 4 != 0) { /* keep one in four */
            registry_lock(key);
            struct block *found = registry_find(key);
            if (found)
                registry_remove(found);
            registry_unlock(key);
        }
    }
    return NULL;
}

static void threads(void)
{
    registry_init();
    pthread_t ids[THREADS];
    for (uintptr_t t = 0; t < THREADS; t++)
        pthread_create(&ids[t], NULL, hammer, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(ids[t], NULL);
    registry_lock_all();
    CHECK_EQ(registry_count(), THREADS * PER_THREAD / 4);
    int found = 0;
    for (uint64_t i = 10000000; i < 10000000 + THREADS * PER_THREAD; i++) {
        struct block *b = registry_find(address_key(i));
        found += (i % 4 == 0) ? (b && b->size == i) : b == NULL;
    }
    CHECK_EQ(found, THREADS * PER_THREAD);
    CHECK(registry_trylock_all() == 0); /* held: try, never wait */
    registry_unlock_all();
    CHECK(registry_trylock_all() == 1);
    registry_unlock_all();
}

int main(void)
{
    registry_init();
    CHECK_EQ(sizeof(struct block), 36);
    basics();
    collisions();
    bytes_per_block();
    threads();
    return check_done("test_registry");
}
