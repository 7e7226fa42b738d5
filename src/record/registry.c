/* registry.c - live blocks in 64 sharded open-addressing tables (see registry.h).
 *
 * Each shard's table is linear probing without wrap-around: a key's home slot
 * is its hash masked to a power of two, its probe runs forward from there, and
 * the array carries an overflow tail past the last home so that no probe has
 * to wrap. The last slot is always left empty, so every probe ends at an empty
 * slot. A probe that would need the last slot doubles the table instead.
 *
 * Removal shifts the rest of the cluster back into the hole (no tombstones:
 * with a bump allocator or a caching allocator's fresh segments every address
 * is new, and tombstones would fill the table with dead slots).
 *
 * The walk (reports, the crash dump, context teardown) does not use the
 * tables: it reads each shard's slab of records in memory order and skips the
 * released ones (kind BLOCK_RELEASED). That is a sequential read where slot
 * order would be a cache miss per block, records never move, so removing the
 * block just returned is safe, and slab chunks are never unmapped while the
 * process runs, so a crash dump that could not take the locks reads mapped
 * memory (tables are unmapped when they grow).
 *
 * Growth doubles one shard's table at a time: the stall is a rehash of 1/64
 * of the live blocks, and amortised over the adds that filled it. Records and
 * tables come from mmap (arena.c), never from malloc. These tables are not
 * map.h's map: 8-byte slots (a pointer and a tag), no wrap, a shard's lock
 * and the tag's early outs are what the record path's speed rests on. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "arena.h"
#include "kinds.h"
#include "registry.h"

#define SHARD_BITS 6
_Static_assert(REGISTRY_SHARDS == 1 << SHARD_BITS, "REGISTRY_SHARDS is 2^SHARD_BITS");
_Static_assert(sizeof(struct block) == 36, "a live block record is 36 bytes");
_Static_assert(offsetof(struct block, kind) >= sizeof(void *),
               "slab_free's link does not overwrite the released mark");

#define FIRST_HOMES 64u          /* home slots of a shard's first table */
#define RECORD_CHUNK (64u << 10) /* records are mapped 64 KiB at a time */
#define PAGE 4096u
#define NOT_FOUND UINT32_MAX

/* A slot is 8 bytes: the record's address in the low 48 bits (user space
 * addresses, which mmap gives, are below 2^47), and in the top 16 the low
 * 16 bits of its key's hash, the tag. The tag tells most records of a
 * probe apart without reading them, and gives an entry's home without its
 * key while a table has at most 2^16 homes. 0: empty. */
typedef uint64_t slot_t;

#define TAG_SHIFT 48
#define TAG_BITS 16
#define POINTER_MASK ((UINT64_C(1) << TAG_SHIFT) - 1)

static slot_t slot_of(const struct block *block, uint64_t hash)
{
    return (uint64_t)(uintptr_t)block | hash << TAG_SHIFT;
}

static struct block *slot_block(slot_t slot)
{
    return (struct block *)(uintptr_t)(slot & POINTER_MASK);
}

static int slot_tag_matches(slot_t slot, uint64_t hash)
{
    return (slot >> TAG_SHIFT) == (hash & ((1u << TAG_BITS) - 1));
}

struct shard {
    _Alignas(64) pthread_mutex_t lock; /* one cache line per shard's hot fields */
    slot_t *slots;                     /* NULL until the first add */
    uint32_t homes;                    /* a power of two: home = hash & (homes - 1) */
    uint32_t slot_count;               /* homes + the overflow tail */
    uint32_t used;
    struct slab records;
};

static struct shard shards[REGISTRY_SHARDS];

/* Keys are addresses: aligned, so the low bits carry little. A 64-bit mix
 * (the finaliser of MurmurHash3) spreads them: the top bits pick the shard,
 * the low bits the home slot. */
uint64_t registry_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* A key's shard and home, from its hash: a function that needs both hashes
 * the key once. */
static struct shard *shard_by_hash(uint64_t hash)
{
    return &shards[hash >> (64 - SHARD_BITS)];
}

static struct shard *shard_of(uint64_t key)
{
    return shard_by_hash(registry_hash(key));
}

static uint32_t home_by_hash(uint64_t hash, uint32_t homes)
{
    return (uint32_t)hash & (homes - 1);
}

static size_t table_bytes(uint32_t slot_count)
{
    return ((size_t)slot_count * sizeof(slot_t) + PAGE - 1) / PAGE * PAGE;
}

static uint32_t slots_for(uint32_t homes)
{
    return homes + homes / 16 + 32;
}

uint64_t block_value(const struct block *block)
{
    return block->key ^ ((uint64_t)kind_space(block_kind(block)) << 60);
}

int block_kind(const struct block *block)
{
    return block->kind & BLOCK_KIND_MASK;
}

/* Both start empty. After fork the child keeps the parent's pages
 * (copy-on-write) but none of its CUDA state: the old pages are left mapped;
 * they are the parent's records and the child never touches them again. The
 * locks are made anew: the parent's were held across fork. */
void registry_init(void)
{
    for (int i = 0; i < REGISTRY_SHARDS; i++) {
        struct shard *s = &shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->slots = NULL;
        s->homes = s->slot_count = s->used = 0;
        slab_init(&s->records, sizeof(struct block), RECORD_CHUNK);
    }
}

void registry_lock(uint64_t key)
{
    pthread_mutex_lock(&shard_of(key)->lock);
}

void registry_unlock(uint64_t key)
{
    pthread_mutex_unlock(&shard_of(key)->lock);
}

void registry_lock_all(void)
{
    for (int i = 0; i < REGISTRY_SHARDS; i++)
        pthread_mutex_lock(&shards[i].lock);
}

void registry_unlock_all(void)
{
    for (int i = REGISTRY_SHARDS - 1; i >= 0; i--)
        pthread_mutex_unlock(&shards[i].lock);
}

/* For the crash dump, in a signal handler: never waits. */
int registry_trylock_all(void)
{
    for (int i = 0; i < REGISTRY_SHARDS; i++) {
        if (pthread_mutex_trylock(&shards[i].lock) != 0) {
            while (--i >= 0)
                pthread_mutex_unlock(&shards[i].lock);
            return 0;
        }
    }
    return 1;
}

/* Put a record in the first empty slot from its home (`hash` is its key's);
 * -1 if that would be the last slot, which stays empty. */
static int place(slot_t *slots, uint32_t homes, uint32_t slot_count, uint64_t hash,
                 struct block *block)
{
    uint32_t i = home_by_hash(hash, homes);
    while (slots[i])
        i++;
    if (i >= slot_count - 1)
        return -1;
    slots[i] = slot_of(block, hash);
    return 0;
}

/* The hash of the key of the record in `slot`: from its tag while homes
 * take no more bits than the tag has, else from the record. */
static uint64_t slot_hash(slot_t slot, uint32_t homes)
{
    if (homes <= 1u << TAG_BITS)
        return slot >> TAG_SHIFT;
    return registry_hash(slot_block(slot)->key);
}

/* A table of `homes` home slots (or more, should a probe overflow) holding
 * everything the old one held. The old one is unmapped only on success. */
static int resize(struct shard *s, uint32_t homes)
{
    for (; homes != 0 && homes <= (1u << 30); homes *= 2) {
        uint32_t count = slots_for(homes);
        slot_t *slots = pages_alloc(table_bytes(count));
        if (!slots)
            return -1;
        uint32_t i = 0;
        while (
            i < s->slot_count &&
            (!s->slots[i] || place(slots, homes, count, registry_hash(slot_block(s->slots[i])->key),
                                   slot_block(s->slots[i])) == 0))
            i++;
        if (i == s->slot_count) {
            if (s->slots)
                pages_free(s->slots, table_bytes(s->slot_count));
            s->slots = slots;
            s->homes = homes;
            s->slot_count = count;
            return 0;
        }
        pages_free(slots, table_bytes(count));
    }
    return -1;
}

/* `hash` is the key's. */
static uint32_t find_slot(const struct shard *s, uint64_t key, uint64_t hash)
{
    if (!s->slots)
        return NOT_FOUND;
    for (uint32_t i = home_by_hash(hash, s->homes); s->slots[i]; i++)
        if (slot_tag_matches(s->slots[i], hash) && slot_block(s->slots[i])->key == key)
            return i;
    return NOT_FOUND;
}

/* Close the hole: each later entry of the cluster whose home is at or before
 * the hole moves into it, and leaves its own slot as the next hole. */
static void remove_at(struct shard *s, uint32_t hole)
{
    for (uint32_t i = hole + 1; s->slots[i]; i++) {
        if (home_by_hash(slot_hash(s->slots[i], s->homes), s->homes) <= hole) {
            s->slots[hole] = s->slots[i];
            hole = i;
        }
    }
    s->slots[hole] = 0;
    s->used--;
}

struct block *registry_new(uint64_t key)
{
    struct block *block = slab_alloc(&shard_of(key)->records);
    if (block)
        block->key = key;
    return block;
}

int registry_add(struct block *block)
{
    uint64_t hash = registry_hash(block->key);
    struct shard *s = shard_by_hash(hash);
    if (((uintptr_t)block & ~POINTER_MASK) != 0)
        return -1; /* not where mmap puts records: no room in a slot */
    if ((uint64_t)(s->used + 1) * 4 > (uint64_t)s->homes * 3 &&
        resize(s, s->homes ? s->homes * 2 : FIRST_HOMES) < 0)
        return -1;
    while (place(s->slots, s->homes, s->slot_count, hash, block) < 0)
        if (resize(s, s->homes * 2) < 0)
            return -1;
    s->used++;
    return 0;
}

struct block *registry_find(uint64_t key)
{
    uint64_t hash = registry_hash(key);
    struct shard *s = shard_by_hash(hash);
    uint32_t i = find_slot(s, key, hash);
    return i == NOT_FOUND ? NULL : slot_block(s->slots[i]);
}

void registry_unlink(struct block *block)
{
    uint64_t hash = registry_hash(block->key);
    struct shard *s = shard_by_hash(hash);
    uint32_t i = find_slot(s, block->key, hash);
    if (i != NOT_FOUND && slot_block(s->slots[i]) == block)
        remove_at(s, i);
}

void registry_release(struct block *block)
{
    struct slab *records = &shard_of(block->key)->records;
    block->kind = BLOCK_RELEASED; /* the walk skips it; slab_free keeps this byte */
    slab_free(records, block);
}

void registry_remove(struct block *block)
{
    registry_unlink(block);
    registry_release(block);
}

size_t registry_count(void)
{
    size_t count = 0;
    for (int i = 0; i < REGISTRY_SHARDS; i++)
        count += shards[i].used;
    return count;
}

size_t registry_memory_bytes(void)
{
    size_t bytes = sizeof(shards);
    for (int i = 0; i < REGISTRY_SHARDS; i++) {
        bytes += shards[i].records.chunk_bytes;
        if (shards[i].slots)
            bytes += table_bytes(shards[i].slot_count);
    }
    return bytes;
}

/* Shard by shard, record by record, skipping released ones. */
static struct block *live_from(struct registry_cursor *cursor, struct block *b)
{
    for (;;) {
        for (; b; b = slab_walk_next(&shards[cursor->shard].records, &cursor->walk))
            if (b->kind != BLOCK_RELEASED)
                return b;
        if (++cursor->shard >= REGISTRY_SHARDS)
            return NULL;
        b = slab_walk_first(&shards[cursor->shard].records, &cursor->walk);
    }
}

struct block *registry_first(struct registry_cursor *cursor)
{
    cursor->shard = 0;
    return live_from(cursor, slab_walk_first(&shards[0].records, &cursor->walk));
}

struct block *registry_next(struct registry_cursor *cursor)
{
    if (cursor->shard >= REGISTRY_SHARDS)
        return NULL;
    return live_from(cursor, slab_walk_next(&shards[cursor->shard].records, &cursor->walk));
}
