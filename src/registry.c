/* registry.c - live blocks in a uthash table (see registry.h). */
#include <string.h>

#include "arena.h"
#include "names.h"

/* uthash takes its memory from mmap too, and must never exit() on failure. */
static size_t bucket_bytes;
static void *registry_pages_alloc(size_t bytes)
{
    void *p = pages_alloc(bytes);
    if (p)
        bucket_bytes += bytes;
    return p;
}
static void registry_pages_free(void *p, size_t bytes)
{
    pages_free(p, bytes);
    bucket_bytes -= bytes;
}
#define uthash_malloc(sz) registry_pages_alloc(sz)
#define uthash_free(ptr, sz) registry_pages_free(ptr, sz)
#define HASH_NONFATAL_OOM 1
static int out_of_memory;
#define uthash_nonfatal_oom(obj) (out_of_memory = 1)

/* Keys are addresses: aligned, so the low bits carry little. A 64-bit mix
 * (the finaliser of MurmurHash3) spreads them over the buckets. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                    \
    do {                                                        \
        uint64_t k_ = *(const uint64_t *)(keyptr);              \
        k_ ^= k_ >> 33;                                         \
        k_ *= 0xff51afd7ed558ccdULL;                            \
        k_ ^= k_ >> 33;                                         \
        k_ *= 0xc4ceb9fe1a85ec53ULL;                            \
        k_ ^= k_ >> 33;                                         \
        (hashv) = (unsigned)k_;                                 \
    } while (0)

#include "registry.h"

_Static_assert(sizeof(struct block) == 96, "a live block record is 96 bytes");

static struct block *table;
static struct slab records;

/* uthash frees its bucket array when the table becomes empty and allocates it
 * again on the next add: with our mmap-backed allocator, a program that keeps
 * zero or one block live paid an mmap and a munmap per allocation. A sentinel
 * record that is never removed keeps the table alive. Its key is no address. */
#define SENTINEL_KEY UINT64_MAX
static struct block sentinel = {.key = SENTINEL_KEY};

uint64_t block_value(const struct block *block)
{
    return block->key ^ ((uint64_t)kind_space(block_kind(block)) << 60);
}

int block_kind(const struct block *block)
{
    return block->kind & BLOCK_KIND_MASK;
}

static void add_sentinel(void)
{
    memset(&sentinel.hh, 0, sizeof(sentinel.hh));
    HASH_ADD(hh, table, key, sizeof(sentinel.key), &sentinel);
}

void registry_init(void)
{
    table = NULL;
    slab_init(&records, sizeof(struct block));
    add_sentinel();
}

/* After fork the child keeps the parent's pages (copy-on-write) but none of its
 * CUDA state: drop the table and start empty. The old pages are left mapped;
 * they are the parent's records and the child will never touch them again. */
void registry_reset(void)
{
    table = NULL;
    bucket_bytes = 0;
    slab_init(&records, sizeof(struct block));
    add_sentinel();
}

struct block *registry_new(void)
{
    return slab_alloc(&records);
}

int registry_add(struct block *block)
{
    out_of_memory = 0;
    HASH_ADD(hh, table, key, sizeof(block->key), block);
    return out_of_memory ? -1 : 0;
}

struct block *registry_find(uint64_t key)
{
    struct block *found;
    HASH_FIND(hh, table, &key, sizeof(key), found);
    return found;
}

void registry_unlink(struct block *block)
{
    HASH_DELETE(hh, table, block);
}

void registry_release(struct block *block)
{
    slab_free(&records, block);
}

void registry_remove(struct block *block)
{
    registry_unlink(block);
    registry_release(block);
}

size_t registry_count(void)
{
    return HASH_COUNT(table) - 1;      /* not the sentinel */
}

size_t registry_memory_bytes(void)
{
    return records.chunk_bytes + bucket_bytes;
}

static struct block *skip_sentinel(struct block *block)
{
    return block == &sentinel ? block->hh.next : block;
}

struct block *registry_first(void)
{
    return skip_sentinel(table);
}

struct block *registry_next(struct block *block)
{
    return skip_sentinel(block->hh.next);
}
