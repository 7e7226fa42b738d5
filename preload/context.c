/* context.c - which context and device an allocation belongs to, and what a
 * context's teardown frees.
 *
 * Each allocation is tagged with a small context number (1..255). Destroying a
 * context, resetting a primary context or releasing it for the last time frees
 * the context's device, managed, pinned, registered and array memory without
 * any free call: the tracker records those blocks as freed implicitly.
 *
 * The current context is asked of the driver on every allocation (a cheap
 * thread-local read inside libcuda) and mapped to its number through a
 * per-thread cache, checked against a generation count bumped on teardown. */
#include <pthread.h>
#include <string.h>

#include "counters.h"
#include "preload.h"
#include "run_events.h"

struct context_entry {
    CUcontext handle;
    int device;
    int alive;
};

static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct context_entry contexts[MAX_CONTEXTS + 1]; /* [0] unused */
static int contexts_used;
static CUcontext primary[MAX_DEVICES];
static unsigned generation;

static __thread struct {
    CUcontext handle;
    unsigned generation;
    int number, device;
} cache;

typedef CUresult (*get_current_fn)(CUcontext *);
typedef CUresult (*get_device_fn)(CUdevice *);

static void *driver(const char *name)
{
    return real_driver_symbol(name);
}

/* Lock held. The number of `handle`, adding it if new; 0 if the table is full. */
static int number_of(CUcontext handle, int device, int add)
{
    for (int i = 1; i <= contexts_used; i++)
        if (contexts[i].alive && contexts[i].handle == handle)
            return i;
    if (!add)
        return 0;
    for (int i = 1; i <= MAX_CONTEXTS; i++) {
        if (i <= contexts_used && contexts[i].alive)
            continue;
        contexts[i].handle = handle;
        contexts[i].device = device;
        contexts[i].alive = 1;
        if (i > contexts_used)
            contexts_used = i;
        return i;
    }
    return 0;
}

int context_current(int *device)
{
    static get_current_fn get_current;
    static get_device_fn get_device;
    CUcontext handle = NULL;
    *device = -1;
    if (!get_current) {
        get_current = (get_current_fn)driver("cuCtxGetCurrent");
        get_device = (get_device_fn)driver("cuCtxGetDevice");
    }
    if (!get_current || get_current(&handle) != CUDA_SUCCESS || !handle)
        return 0;
    if (cache.handle == handle &&
        cache.generation == __atomic_load_n(&generation, __ATOMIC_ACQUIRE)) {
        *device = cache.device;
        return cache.number;
    }
    CUdevice dev = -1;
    if (!get_device || get_device(&dev) != CUDA_SUCCESS)
        dev = -1;
    pthread_mutex_lock(&contexts_lock);
    int number = number_of(handle, dev, 1);
    cache.handle = handle;
    cache.generation = generation;
    cache.number = number;
    cache.device = dev;
    pthread_mutex_unlock(&contexts_lock);
    *device = dev;
    return number;
}

int device_of_location(const CUmemAllocationProp *prop)
{
    return prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
}

/* The device that owns a handle's memory: ours if we saw it created, else
 * the driver's answer - a handle imported from another process (NCCL maps
 * its peers' buffers so) is one we never saw. -1 if neither knows. */
int device_of_vmm_handle(CUmemGenericAllocationHandle handle)
{
    int device = tracker_device_of((uint64_t)handle, SPACE_VMM_HANDLE);
    if (device >= 0)
        return device;
    CUresult (*properties)(CUmemAllocationProp *, CUmemGenericAllocationHandle) =
        (CUresult(*)(CUmemAllocationProp *, CUmemGenericAllocationHandle))driver(
            "cuMemGetAllocationPropertiesFromHandle");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    if (properties && properties(&prop, handle) == CUDA_SUCCESS)
        return device_of_location(&prop);
    return -1;
}

/* The context is gone: forget its number, free its blocks implicitly. */
static void context_gone(CUcontext handle)
{
    if (!handle)
        return;
    pthread_mutex_lock(&contexts_lock);
    int number = number_of(handle, -1, 0);
    if (number)
        contexts[number].alive = 0;
    __atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&contexts_lock);
    run_context_gone(number);
}

int context_destroyed(CUresult result, CUcontext ctx)
{
    if (result == CUDA_SUCCESS)
        context_gone(ctx);
    return 0;
}

int context_primary_retained(CUresult result, CUcontext *ctx, CUdevice device)
{
    if (result == CUDA_SUCCESS && ctx && device >= 0 && device < MAX_DEVICES) {
        pthread_mutex_lock(&contexts_lock);
        primary[device] = *ctx;
        pthread_mutex_unlock(&contexts_lock);
    }
    return 0;
}

static CUcontext primary_of(CUdevice device)
{
    if (device < 0 || device >= MAX_DEVICES)
        return NULL;
    pthread_mutex_lock(&contexts_lock);
    CUcontext handle = primary[device];
    pthread_mutex_unlock(&contexts_lock);
    return handle;
}

int context_primary_reset(CUresult result, CUdevice device)
{
    if (result == CUDA_SUCCESS)
        context_gone(primary_of(device));
    return 0;
}

/* Release frees the primary context only when it was the last reference. */
int context_primary_released(CUresult result, CUdevice device)
{
    CUresult (*get_state)(CUdevice, unsigned *, int *) =
        (CUresult(*)(CUdevice, unsigned *, int *))driver("cuDevicePrimaryCtxGetState");
    unsigned flags;
    int active = 1;
    if (result == CUDA_SUCCESS && get_state && get_state(device, &flags, &active) == CUDA_SUCCESS &&
        !active)
        context_gone(primary_of(device));
    return 0;
}

/* Free and total bytes of a device, for reports. Uses the device's primary
 * context only if it is already active: a report never creates a context. */
int context_memory_info(int device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    CUresult (*get_state)(CUdevice, unsigned *, int *) =
        (CUresult(*)(CUdevice, unsigned *, int *))driver("cuDevicePrimaryCtxGetState");
    CUresult (*retain)(CUcontext *, CUdevice) =
        (CUresult(*)(CUcontext *, CUdevice))real_function(API_cuDevicePrimaryCtxRetain);
    CUresult (*release)(CUdevice) =
        (CUresult(*)(CUdevice))real_function(API_cuDevicePrimaryCtxRelease_v2);
    CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))driver("cuCtxPushCurrent_v2");
    CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))driver("cuCtxPopCurrent_v2");
    CUresult (*get_info)(size_t *, size_t *) =
        (CUresult(*)(size_t *, size_t *))real_function(API_cuMemGetInfo_v2);
    get_current_fn get_current = (get_current_fn)driver("cuCtxGetCurrent");
    get_device_fn get_device = (get_device_fn)driver("cuCtxGetDevice");
    if (!get_state || !retain || !release || !push || !pop || !get_info || !get_current ||
        !get_device)
        return -1;

    size_t free_now = 0, total = 0;
    CUcontext current = NULL;
    CUdevice current_device = -1;
    if (get_current(&current) == CUDA_SUCCESS && current &&
        get_device(&current_device) == CUDA_SUCCESS && current_device == device)
        return get_info(&free_now, &total) == CUDA_SUCCESS
                   ? (*free_bytes = free_now, *total_bytes = total, 0)
                   : -1;

    unsigned flags;
    int active = 0;
    if (get_state(device, &flags, &active) != CUDA_SUCCESS || !active)
        return -1;
    CUcontext ctx;
    if (retain(&ctx, device) != CUDA_SUCCESS)
        return -1;
    int status = -1;
    if (push(ctx) == CUDA_SUCCESS) {
        if (get_info(&free_now, &total) == CUDA_SUCCESS) {
            *free_bytes = free_now;
            *total_bytes = total;
            status = 0;
        }
        CUcontext popped;
        pop(&popped);
    }
    release(device);
    return status;
}

void context_after_fork(void)
{
    pthread_mutex_init(&contexts_lock, NULL);
    memset(contexts, 0, sizeof(contexts));
    memset(primary, 0, sizeof(primary));
    contexts_used = 0;
    generation++;
}
