/* cache_blocks.h - a framework's blocks as records of their own (cache_blocks.c).
 *
 * PyTorch, CuPy and JAX take memory from the driver in large segments and
 * carve their tensors, blocks and arrays out of them. Where a framework tells
 * us about its blocks (preload/frameworks.c, cupy_pool.c, jax_arrays.c),
 * each block is a record of its own (a kind for which kind_in_cache() holds,
 * key space SPACE_FRAMEWORK), inside a driver allocation that is recorded
 * too: its bytes count once, as the driver's. These say a block in the
 * framework's terms; the recorder (tracker.h) takes it from there. Every one
 * keeps errno, and does nothing while tracing is off, for a kind that is not
 * a cache's, or at address 0. */
#ifndef CUMEMTRACE_CACHE_BLOCKS_H
#define CUMEMTRACE_CACHE_BLOCKS_H

#include <stdint.h>

#include "config.h"
#include "kinds.h"
#include "tracker.h"

/* A block of `cache_kind` handed out inside its cache, on this thread (its
 * stack is captured here). `operation`, if not NULL, tells the code address
 * of the function the framework runs on this thread (PyTorch's autograd
 * node, on its engine threads), or 0: on a thread that runs no Python that
 * frame stands for the native frames that would name it (tracker.c's
 * native_frames). The block's allocation number is returned (0: not
 * recorded). */
uint64_t cache_blocks_alloc(int cache_kind, int device, uint64_t address, uint64_t size,
                            uint64_t stream, uint64_t (*operation)(void));
/* The same, for a block whose stack is known rather than this thread's: its
 * frames, innermost first (tagged Python frames, python_frame_at), as a
 * framework recorded them when it made the block (a JAX array's traceback). */
uint64_t cache_blocks_alloc_with_frames(int cache_kind, int device, uint64_t address, uint64_t size,
                                        const uintptr_t *frames, int depth);
/* Whether a framework's event about `address` in the cache of `cache_kind`
 * is to be recorded at all. */
static inline int cache_blocks_wanted(int cache_kind, uint64_t address)
{
    return kind_in_cache(cache_kind) && config.enabled && address != 0;
}

/* The same as cache_blocks_alloc, entered in the registry later (pending.h),
 * for a framework whose blocks come and go by the hundred a step (PyTorch's
 * tensors): the stack is taken now, the record is made by the next
 * tracker_apply, report, mark or tracker_lock, in the order the events
 * happened. No allocation number. A free of a block that cache_blocks_alloc
 * recorded must not be deferred. Inline: in a function of their own, these
 * two checks took a line of code of their own at every tensor's event
 * (hot_path.h says why that counts). The tracker keeps errno itself here
 * (tracker.h). */
static inline void cache_blocks_defer_alloc(int cache_kind, int device, uint64_t address,
                                            uint64_t size, uint64_t stream,
                                            uint64_t (*operation)(void))
{
    if (cache_blocks_wanted(cache_kind, address))
        tracker_defer_alloc(cache_kind, device, address, size, stream, operation);
}

static inline void cache_blocks_defer_free(uint64_t address)
{
    if (address != 0 && config.enabled)
        tracker_defer_free(address);
}

/* The block at `address` went back to its cache, if it is still the one
 * numbered `number`: a framework that says so late (CuPy's block, once the
 * object holding it is gone) must not end a block recorded at the same
 * address since. */
void cache_blocks_free_if(uint64_t address, uint64_t number);

#endif
