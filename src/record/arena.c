/* arena.c - mmap-backed pages and slabs (see arena.h). */
#include <string.h>
#include <sys/mman.h>

#include "arena.h"

#define CHUNK_HEADER sizeof(char *) /* the link to the chunk before */

void *pages_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pages_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

void *pages_grow(void *p, size_t old_bytes, size_t new_bytes)
{
    if (!p)
        return pages_alloc(new_bytes);
    void *q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}

void slab_init(struct slab *slab, size_t item_size, size_t chunk_size)
{
    memset(slab, 0, sizeof(*slab));
    slab->item_size = (item_size + 3) & ~(size_t)3;
    slab->chunk_size = chunk_size;
}

void *slab_alloc(struct slab *slab)
{
    void *item = slab->free_list;
    if (item) {
        memcpy(&slab->free_list, item, sizeof(void *)); /* items may be 4-aligned */
        memset(item, 0, slab->item_size);
    } else {
        if (slab->cursor == NULL || slab->cursor + slab->item_size > slab->end) {
            char *chunk = pages_alloc(slab->chunk_size);
            if (!chunk)
                return NULL;
            *(char **)chunk = slab->newest;
            slab->newest = chunk;
            slab->cursor = chunk + CHUNK_HEADER;
            slab->end = chunk + slab->chunk_size;
            slab->chunk_bytes += slab->chunk_size;
        }
        item = slab->cursor; /* fresh pages are already zero */
        slab->cursor += slab->item_size;
    }
    slab->in_use++;
    return item;
}

void slab_free(struct slab *slab, void *item)
{
    memcpy(item, &slab->free_list, sizeof(void *));
    slab->free_list = item;
    slab->in_use--;
}

/* Where the carved records of a chunk end: the cursor in the newest one. */
static char *carved_end(const struct slab *slab, const char *chunk)
{
    if (chunk == slab->newest)
        return slab->cursor;
    size_t items = (slab->chunk_size - CHUNK_HEADER) / slab->item_size;
    return (char *)chunk + CHUNK_HEADER + items * slab->item_size;
}

void *slab_walk_first(const struct slab *slab, struct slab_walk *walk)
{
    walk->chunk = slab->newest;
    walk->at = walk->chunk ? walk->chunk + CHUNK_HEADER : NULL;
    return walk->chunk && walk->at < carved_end(slab, walk->chunk) ? walk->at
                                                                   : slab_walk_next(slab, walk);
}

void *slab_walk_next(const struct slab *slab, struct slab_walk *walk)
{
    while (walk->chunk) {
        if (walk->at + slab->item_size < carved_end(slab, walk->chunk)) {
            walk->at += slab->item_size;
            return walk->at;
        }
        walk->chunk = *(char **)walk->chunk;
        walk->at = walk->chunk ? walk->chunk + CHUNK_HEADER : NULL;
        if (walk->chunk && walk->at < carved_end(slab, walk->chunk))
            return walk->at;
    }
    return NULL;
}
