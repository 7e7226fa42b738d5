/* hooks.c - what the generated wrappers tell the core, and the runtime label.
 *
 * The runtime label: a runtime wrapper sets it on its thread for the length of
 * the real call; the first driver wrapper that records something during that
 * call takes it, so the block is recorded once (at the driver level) under the
 * name the program used (cudaMalloc rather than cuMemAlloc_v2). */
#include <errno.h>

#include "config.h"
#include "live.h"
#include "preload.h"
#include "run_events.h"
#include "signals.h"
#include "triggers.h"

static __thread struct runtime_label label = {-1, 0};

struct runtime_label runtime_label_push(int api)
{
    struct runtime_label previous = label;
    label.api = api;
    label.used = 0;
    return previous;
}

int runtime_label_pop(struct runtime_label previous)
{
    int used = label.used;
    label = previous;
    return used;
}

/* Every wrapper calls this first: it counts the call, and the first call
 * starts the tracer, which the hooks below can then take as started (and
 * the first in a forked child, its snapshot thread and live view). */
void hook_call(int api)
{
    preload_init();
    signals_start_if_pending();
    live_start_if_pending();
    if (config.self_time)
        self_time_start();
    tracker_count_call(api);
}

/* The name to record: the runtime entry in progress if any, else our own. */
static int take_label(int api)
{
    if (label.api >= 0 && !label.used && api != label.api) {
        label.used = 1;
        return label.api;
    }
    return api;
}

static int resolve_device(int device, int *context)
{
    int current_device = -1;
    *context = context_current(&current_device);
    return device == DEVICE_OF_CONTEXT ? current_device : device;
}

void hook_alloc(int api, int kind, uint64_t value, uint64_t size, uint64_t handle, int device)
{
    if (!config.enabled || value == 0)
        return;
    int saved_errno = errno;
    struct allocation a;
    a.value = value;
    a.size = size;
    a.handle = handle;
    a.device = resolve_device(device, &a.context);
    a.kind = kind;
    a.api = take_label(api);
    tracker_alloc(&a);
    trigger_on_alloc(a.size);
    errno = saved_errno;
}

void hook_failure(int api, int kind, uint64_t size, int code, int oom, int device)
{
    if (!config.enabled)
        return;
    int saved_errno = errno;
    struct allocation a = {0};
    a.size = size;
    a.device = resolve_device(device, &a.context);
    a.kind = kind;
    a.api = take_label(api);
    uint32_t stack_id = run_failure(&a, code, oom);
    trigger_on_failure(&a, code, oom, stack_id);
    errno = saved_errno;
}

int hook_take(uint64_t value, int space, struct block *saved)
{
    if (value == 0 || !tracker_enabled())
        return 0;
    int saved_errno = errno;
    int taken = tracker_take(value, space, saved);
    errno = saved_errno;
    return taken;
}

/* Only blocks a runtime wrapper recorded itself; the driver takes the rest. */
int hook_take_runtime(uint64_t value, int space, struct block *saved)
{
    if (value == 0 || !tracker_has_runtime_blocks())
        return 0;
    return tracker_take_if(value, space, BLOCK_FROM_RUNTIME, saved);
}

void hook_take_range(int space, uint64_t start, uint64_t size)
{
    if (!tracker_enabled())
        return;
    int saved_errno = errno;
    run_range_freed(space, start, size);
    errno = saved_errno;
}
