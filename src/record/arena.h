/* arena.h - memory for the tracer's own tables, straight from mmap.
 *
 * The tracer never calls the traced program's malloc: a program may replace
 * malloc, may be inside malloc when a CUDA call happens on another thread, and
 * a crash dump must be able to walk these tables without any allocator.
 *
 * pages_*: whole pages, for tables that grow by doubling.
 * slab_*:  fixed-size records carved from chunks (of a size the owner picks),
 *          4-aligned (a record with 8-byte fields that is a multiple of 4
 *          long packs tight), with a free list. The chunks are linked, so every record ever
 *          carved can be walked in address order within a chunk (the owner
 *          tells live records from freed ones).
 *          Not thread-safe: the owner of the slab holds its lock. */
#ifndef CUMEMTRACE_ARENA_H
#define CUMEMTRACE_ARENA_H

#include <stddef.h>

void *pages_alloc(size_t bytes); /* zeroed; NULL on failure */
void pages_free(void *p, size_t bytes);
void *pages_grow(void *p, size_t old_bytes, size_t new_bytes); /* may move */

struct slab {
    size_t item_size;
    size_t chunk_size; /* bytes mapped at a time */
    void *free_list;
    char *cursor, *end; /* unused part of the newest chunk */
    size_t chunk_bytes; /* total mapped, for the memory figure */
    size_t in_use;
    char *newest; /* newest chunk; each starts with a pointer to the one before */
};

struct slab_walk {
    char *chunk;
    char *at;
};

void slab_init(struct slab *slab, size_t item_size, size_t chunk_size);
void *slab_alloc(struct slab *slab); /* zeroed; NULL on failure */
void slab_free(struct slab *slab, void *item);
/* Every record carved so far, free or not: newest chunk first, in address
 * order within a chunk. NULL at the end. */
void *slab_walk_first(const struct slab *slab, struct slab_walk *walk);
void *slab_walk_next(const struct slab *slab, struct slab_walk *walk);

#endif
