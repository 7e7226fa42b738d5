/* registry.h - the table of live blocks, keyed by address (or handle) and space.
 *
 * One record per live allocation, in a uthash table. A record is 96 bytes:
 * 40 of our own fields and uthash's 56-byte handle (plus, amortised, a share of
 * the bucket array). Records come from an mmap-backed slab, never from malloc.
 *
 * The key folds the key space into bits 60-62 of the value, so a VMM handle
 * and a device pointer with the same number are different keys. User-space and
 * device virtual addresses stay below 2^57, so the fold loses nothing for them.
 *
 * Not thread-safe on its own: every call is made with the tracker's lock held. */
#ifndef CUMEMTRACE_REGISTRY_H
#define CUMEMTRACE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#define BLOCK_KIND_MASK 0x0f
#define BLOCK_FROM_RUNTIME 0x10   /* recorded by a runtime wrapper, not the driver */

struct block {
    uint64_t key;          /* value ^ (space << 60) */
    uint64_t size;
    uint64_t sequence;     /* allocation number in this process */
    uint32_t stack_id;     /* 0: no stack captured */
    uint32_t time_ms;      /* milliseconds since tracing started */
    uint16_t handle;       /* interned stream or pool, 0: none */
    uint16_t thread;       /* tracer's thread number */
    int8_t device;         /* -1: not known */
    uint8_t kind;          /* enum kind | BLOCK_* flags */
    uint8_t api;           /* entry point the program called */
    uint8_t context;       /* interned context, 0: none */
    UT_hash_handle hh;
};

static inline uint64_t block_key(uint64_t value, int space)
{
    return value ^ ((uint64_t)space << 60);
}

uint64_t block_value(const struct block *block);   /* the address or handle */
int block_kind(const struct block *block);

void registry_init(void);
void registry_reset(void);                 /* forget everything (after fork) */
struct block *registry_new(void);          /* a zeroed record, not yet in the table */
int registry_add(struct block *block);     /* 0, or -1 when out of memory */
struct block *registry_find(uint64_t key);
void registry_remove(struct block *block); /* unlink and return to the slab */
void registry_unlink(struct block *block); /* unlink only */
void registry_release(struct block *block);/* return an unlinked record */
size_t registry_count(void);
size_t registry_memory_bytes(void);        /* records + buckets, for the report */
struct block *registry_first(void);
struct block *registry_next(struct block *block);

#endif
