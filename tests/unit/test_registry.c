/* test_registry.c - the live-block table: add, find, remove, key spaces, growth. */
#include <stdlib.h>

#include "check.h"
#include "names.h"
#include "registry.h"

int main(void)
{
    registry_init();
    CHECK_EQ(sizeof(struct block), 96);

    /* 200 000 blocks: the table grows and every one is found again. */
    enum { N = 200000 };
    for (uint64_t i = 0; i < N; i++) {
        struct block *b = registry_new();
        CHECK(b != NULL);
        b->key = block_key(0x7f0000000000ull + i * 512, SPACE_MEMORY);
        b->size = i;
        b->kind = KIND_DEVICE;
        if (registry_add(b) != 0)
            CHECK(0);
    }
    CHECK_EQ(registry_count(), N);
    int found = 0;
    for (uint64_t i = 0; i < N; i++) {
        struct block *b = registry_find(block_key(0x7f0000000000ull + i * 512, SPACE_MEMORY));
        found += b && b->size == i;
    }
    CHECK_EQ(found, N);

    /* The same number in another key space is another block. */
    CHECK(registry_find(block_key(0x7f0000000000ull, SPACE_VMM_HANDLE)) == NULL);
    struct block *h = registry_new();
    h->key = block_key(0x7f0000000000ull, SPACE_VMM_HANDLE);
    h->kind = KIND_VMM_PHYSICAL;
    CHECK(registry_add(h) == 0);
    CHECK(registry_find(block_key(0x7f0000000000ull, SPACE_VMM_HANDLE)) == h);
    CHECK(registry_find(block_key(0x7f0000000000ull, SPACE_MEMORY)) != h);
    CHECK_EQ(block_value(h), 0x7f0000000000ull);
    registry_remove(h);

    /* Remove every other one; the rest stay findable; iteration sees them all. */
    for (uint64_t i = 0; i < N; i += 2)
        registry_remove(registry_find(block_key(0x7f0000000000ull + i * 512, SPACE_MEMORY)));
    CHECK_EQ(registry_count(), N / 2);
    size_t seen = 0;
    for (struct block *b = registry_first(); b; b = registry_next(b))
        seen += (b->size % 2) == 1;
    CHECK_EQ(seen, N / 2);
    CHECK(registry_find(block_key(0x7f0000000000ull + 2 * 512, SPACE_MEMORY)) == NULL);
    CHECK(registry_find(block_key(0x7f0000000000ull + 3 * 512, SPACE_MEMORY)) != NULL);

    /* Freed records are reused: memory stays flat when blocks come and go. */
    size_t before = registry_memory_bytes();
    for (int round = 0; round < 10; round++) {
        for (uint64_t i = 0; i < N; i += 2) {
            struct block *b = registry_new();
            b->key = block_key(0x7f0000000000ull + i * 512, SPACE_MEMORY);
            registry_add(b);
        }
        for (uint64_t i = 0; i < N; i += 2)
            registry_remove(registry_find(block_key(0x7f0000000000ull + i * 512, SPACE_MEMORY)));
    }
    CHECK(registry_memory_bytes() <= before + (2u << 20));
    printf("registry: %zu bytes for %zu live blocks (%.1f bytes each)\n", registry_memory_bytes(),
           registry_count(), (double)registry_memory_bytes() / registry_count());
    return check_done("test_registry");
}
