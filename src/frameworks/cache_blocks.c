/* cache_blocks.c - a framework's blocks, said to the recorder (see cache_blocks.h).
 *
 * What a block is in the recorder's terms: an allocation of the cache's kind,
 * on the entry point the interposer lent for that cache (host.cache_api),
 * keyed in SPACE_FRAMEWORK. The recording itself, stacks, queue and locks,
 * is the tracker's (tracker.h); these only check what a framework says and
 * keep errno, which the program may be reading around the framework's call. */
#include <errno.h>
#include <stddef.h>

#include "cache_blocks.h"
#include "config.h"
#include "host.h"
#include "kinds.h"
#include "tracker.h"

static struct allocation cache_allocation(int cache_kind, int device, uint64_t address,
                                          uint64_t size, uint64_t stream,
                                          uint64_t (*operation)(void))
{
    return (struct allocation){
        .value = address,
        .size = size,
        .handle = stream,
        .device = device,
        .kind = cache_kind,
        .api = host.cache_api[cache_kind - KIND_TORCH_TENSOR],
        .operation = operation,
    };
}

uint64_t cache_blocks_alloc(int cache_kind, int device, uint64_t address, uint64_t size,
                            uint64_t stream, uint64_t (*operation)(void))
{
    if (!cache_blocks_wanted(cache_kind, address))
        return 0;
    int saved_errno = errno;
    struct allocation a = cache_allocation(cache_kind, device, address, size, stream, operation);
    uint64_t number = tracker_alloc(&a);
    errno = saved_errno;
    return number;
}

uint64_t cache_blocks_alloc_with_frames(int cache_kind, int device, uint64_t address, uint64_t size,
                                        const uintptr_t *frames, int depth)
{
    if (!cache_blocks_wanted(cache_kind, address))
        return 0;
    int saved_errno = errno;
    struct allocation a = cache_allocation(cache_kind, device, address, size, 0, NULL);
    uint64_t number = tracker_alloc_with_frames(&a, frames, depth);
    errno = saved_errno;
    return number;
}

void cache_blocks_free_if(uint64_t address, uint64_t number)
{
    if (address == 0 || number == 0 || !config.enabled)
        return;
    int saved_errno = errno;
    tracker_take_numbered(address, SPACE_FRAMEWORK, number);
    errno = saved_errno;
}
