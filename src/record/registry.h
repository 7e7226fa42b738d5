/* registry.h - the table of live blocks, keyed by address (or handle) and space.
 *
 * One 36-byte record per live allocation. The records sit in 64 shards chosen
 * by a hash of the key; each shard has its own lock, its own open-addressing
 * table of 8-byte slots (the record's address and 16 bits of its key's hash)
 * and its own mmap-backed slab of records. Threads that allocate at
 * different addresses take different locks.
 *
 * Cost of a live block, amortised: the 36-byte record (plus the unused tail of
 * the shard's newest 64 KiB slab chunk) and its share of the slots: a table is
 * at most 3/4 full before it doubles, so 8 / (3/8 .. 3/4) = 11 to 21 bytes,
 * plus an overflow tail of 1/16. At most ~59 bytes once each shard holds a
 * few thousand blocks (below that, the shards' first table pages and slab
 * chunks dominate: ~4.3 MB mapped once every shard holds a block, mostly
 * untouched pages); ~54 at 1M.
 *
 * Locking: registry_find/add/unlink/release and registry_new work on the
 * shard of their key, with that shard's lock held (registry_lock(key)).
 * registry_count, registry_memory_bytes and the walk (registry_first/next)
 * need every shard's lock (registry_lock_all).
 *
 * The key folds the key space into bits 60-62 of the value, so a VMM handle
 * and a device pointer with the same number are different keys. User-space and
 * device virtual addresses stay below 2^57, so the fold loses nothing for them. */
#ifndef CUMEMTRACE_REGISTRY_H
#define CUMEMTRACE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

#define BLOCK_KIND_MASK 0x0f
#define BLOCK_FROM_RUNTIME 0x10 /* recorded by a runtime wrapper, not the driver */
#define BLOCK_HELD_AT_END 0x20  /* live when the program ended (run_program_end) */
#define BLOCK_RELEASED 0xff     /* kind of a record back in the slab */

#define REGISTRY_SHARDS 64

/* 36 bytes, 4-aligned: a record is 4 bytes short of 40 only if sizes and
 * allocation numbers share words with the 16-bit fields. A block of
 * BLOCK_SIZE_MAX bytes or more (256 TiB, more than a GPU's address space)
 * is not recorded (tracker.c counts it lost); 2^48 allocation numbers last
 * nine years at a million allocations a second. */
struct __attribute__((packed, aligned(4))) block {
    uint64_t key; /* value ^ (space << 60) */
    uint64_t size : 48;
    uint64_t handle : 16;   /* interned stream or pool, 0: none */
    uint64_t sequence : 48; /* allocation number: unique, in order per thread (tracker.c) */
    uint64_t thread : 16;   /* tracer's thread number */
    uint32_t stack_id;      /* 0: no stack captured */
    uint32_t time_ms;       /* milliseconds since tracing started */
    int8_t device;          /* -1: not known */
    uint8_t kind;           /* enum kind | BLOCK_* flags */
    uint8_t api;            /* entry point the program called */
    uint8_t context;        /* interned context, 0: none */
};

#define BLOCK_SIZE_MAX ((UINT64_C(1) << 48) - 1)

static inline uint64_t block_key(uint64_t value, int space)
{
    return value ^ ((uint64_t)space << 60);
}

uint64_t block_value(const struct block *block); /* the address or handle */
uint64_t registry_hash(uint64_t key);            /* top bits: shard, low bits: home slot */
int block_kind(const struct block *block);

void registry_init(void); /* empty, new locks: at start, and after fork */

/* Locks: the shard of one key; all shards, in order (trylock: never waits). */
void registry_lock(uint64_t key);
void registry_unlock(uint64_t key);
void registry_lock_all(void);
void registry_unlock_all(void);
int registry_trylock_all(void); /* 1 if every shard was taken */

struct block *registry_new(uint64_t key); /* a zeroed record with this key, not yet in the table */
int registry_add(struct block *block);    /* 0, or -1 when out of memory; key not present */
struct block *registry_find(uint64_t key);
void registry_remove(struct block *block);  /* unlink and return to the slab */
void registry_unlink(struct block *block);  /* unlink only */
void registry_release(struct block *block); /* return an unlinked record */
size_t registry_count(void);
size_t registry_memory_bytes(void); /* records + slots, for the report */

/* A walk over every live block, in the order of the records' memory (a
 * sequential read, not one cache miss per block). The block just returned
 * may be unlinked and released before asking for the next one; no block may
 * be added during the walk. */
struct registry_cursor {
    uint32_t shard;
    struct slab_walk walk;
};
struct block *registry_first(struct registry_cursor *cursor);
struct block *registry_next(struct registry_cursor *cursor);

#endif
