/* preload.h - shared declarations of the interposition layer.
 *
 * The layer is thin: wrappers generated from entrypoints.h call the real CUDA
 * function and tell the core (src/record/tracker.h) what happened. This header gives
 * them the entry table, the real-function slots, and the small helpers that
 * need CUDA types (context -> device, array sizes). */
#ifndef CUMEMTRACE_PRELOAD_H
#define CUMEMTRACE_PRELOAD_H

#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "config.h"
#include "kinds.h"
#include "registry.h"
#include "tracker.h"

/* cuda.h maps these names to their newer versions; we define both. */
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset

#define PUBLIC __attribute__((visibility("default")))

/* Which default-stream flavour a driver symbol is (see entrypoints.h). */
enum flavour { ANY, LEGACY, PER_THREAD };

#define DEVICE_OF_CONTEXT (-2)
#define DEVICE_NONE (-1)

enum api {
#define DRIVER_ALLOC(symbol, ...) API_##symbol,
#define DRIVER_FREE(symbol, ...) API_##symbol,
#define DRIVER_UNMAP(symbol, ...) API_##symbol,
#define DRIVER_CALL(symbol, ...) API_##symbol,
#define DRIVER_LOOKUP(symbol, ...) API_##symbol,
#define RUNTIME_ALLOC(symbol, ...) API_##symbol,
#define RUNTIME_FREE(symbol, ...) API_##symbol,
#define RUNTIME_CALL(symbol, ...) API_##symbol,
#define CACHE_ALLOCATOR(name) API_##name,
#include "entrypoints.h"
    API_COUNT
};

/* A prototype for every wrapper (some are declared by the CUDA headers only
 * under per-thread-stream builds, and cuGetProcAddress v1 not at all). */
#define DRIVER_ALLOC(symbol, base, version, flavour, params, ...) CUresult symbol params;
#define DRIVER_FREE DRIVER_ALLOC
#define DRIVER_UNMAP DRIVER_ALLOC
#define DRIVER_CALL DRIVER_ALLOC
#define RUNTIME_ALLOC(symbol, params, ...) cudaError_t symbol params;
#define RUNTIME_FREE RUNTIME_ALLOC
#define RUNTIME_CALL RUNTIME_ALLOC
#include "entrypoints.h"
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);

struct entry {
    const char *symbol; /* exported name */
    const char *base;   /* name given to cuGetProcAddress; NULL for runtime */
    int version;        /* lowest cudaVersion that maps base to symbol */
    int flavour;
    void *wrapper; /* our function */
};
extern const struct entry entries[API_COUNT];
extern const char *const entry_names[API_COUNT];

/* libc_dlsym.c: the C library's dlsym, which ours shadows. */
typedef void *(*dlsym_function)(void *, const char *);
dlsym_function libc_dlsym(void);
void *real_dlsym(void *handle, const char *name);

/* exec.c: find the C library's exec functions (at load: a vfork child
 * must not look them up). */
void exec_init(void);

/* init.c: the tracer started, once. */
void preload_init(void);

/* real.c: the real functions behind the wrappers. in_cuda_call counts real
 * CUDA calls in progress on this thread (real_call_begin/end, below): an
 * exit() from a signal handler that interrupted one must not run the full
 * exit report (the CUDA libraries, or malloc below them, may hold locks it
 * needs), and real_call_in_progress says so to the core. */
extern __thread int in_cuda_call;
int real_call_in_progress(void);
void *real_function(int api);               /* NULL if it cannot be found */
void real_offer(int api, void *function);   /* a real pointer seen by a lookup */
void *real_driver_symbol(const char *name); /* any libcuda function, unwrapped */
int entry_by_symbol(const char *name);      /* -1 if not ours */
int entry_for_lookup(const char *base, int version, uint64_t flags, int *name_known);
CUresult driver_unresolved(int api);
cudaError_t runtime_unresolved(int api);

/* hooks.c: what the generated wrappers call. */
void hook_call(int api);
/* self_time.c: CUMEMTRACE_SELF_TIME's clock, one per thread. */
void self_time_stop(void);
void self_time_start(void);

/* Around the real call in every wrapper; hook_end closes the wrapper. With
 * CUMEMTRACE_SELF_TIME=1 the time a thread spends in a wrapper outside the
 * real call is added up (hooks.c). */
static inline void real_call_begin(void)
{
    if (config.self_time)
        self_time_stop();
    in_cuda_call++;
}

static inline void real_call_end(void)
{
    in_cuda_call--;
    if (config.self_time)
        self_time_start();
}

static inline int hook_end(int result)
{
    if (config.self_time)
        self_time_stop();
    return result;
}
void hook_alloc(int api, int kind, uint64_t value, uint64_t size, uint64_t handle, int device);
void hook_failure(int api, int kind, uint64_t size, int code, int oom, int device);
int hook_take(uint64_t value, int space, struct block *saved);
void hook_take_range(int space, uint64_t start, uint64_t size);
struct runtime_label {
    int api;  /* runtime entry point in progress, -1: none */
    int used; /* a driver wrapper recorded under this label */
};
struct runtime_label runtime_label_push(int api);     /* returns the one it replaces */
int runtime_label_pop(struct runtime_label previous); /* 1 if a driver wrapper used it */
int hook_take_runtime(uint64_t value, int space, struct block *saved);

/* sizes.c: bytes from a call's arguments. pitch_bytes: the pitch the driver
 * chose (ok) or the width asked for, times the rows. */
uint64_t pitch_bytes(int ok, const size_t *pitch, size_t width, size_t rows);
uint64_t array_bytes(CUarray_format format, unsigned channels, size_t width, size_t height,
                     size_t depth, unsigned levels);
uint64_t channel_bytes(const struct cudaChannelFormatDesc *desc);

/* frameworks.c: PyTorch's tensors, from its allocator's trace tracker. Until
 * frameworks_settled, every allocating wrapper shows its caller to
 * frameworks_probe(), which attaches the tracker at the first caller inside
 * PyTorch's allocator. */
extern int frameworks_settled;
void frameworks_probe(const void *caller);
/* Around fork (init.c): a probe under way finishes before the fork. */
void frameworks_fork_prepare(void);
void frameworks_fork_parent(void);
void frameworks_fork_child(void);

static inline void frameworks_check(const void *caller)
{
    if (__builtin_expect(!__atomic_load_n(&frameworks_settled, __ATOMIC_RELAXED), 0))
        frameworks_probe(caller);
}

/* context.c: contexts, their devices, and their teardown. */
int context_current(int *device); /* interned context, 0 if none */
int device_of_location(const CUmemAllocationProp *prop);
int device_of_vmm_handle(CUmemGenericAllocationHandle handle);
int context_destroyed(CUresult result, CUcontext ctx);
int context_primary_retained(CUresult result, CUcontext *ctx, CUdevice device);
int context_primary_reset(CUresult result, CUdevice device);
int context_primary_released(CUresult result, CUdevice device);
int context_memory_info(int device, uint64_t *free_bytes, uint64_t *total_bytes);
void context_after_fork(void);

/* pools.c: stream-ordered pools (pool_default_info and pool_created_info
 * are lent to the core, host.h). */
int pool_default_info(int device, struct pool_figures *figures);
int pool_created(CUresult result, CUmemoryPool *pool, const CUmemPoolProps *props);
int pool_destroyed(CUresult result, CUmemoryPool pool);
int pool_created_info(int index, uint64_t *handle, int *device, struct pool_figures *figures);
void pools_after_fork(void);

#endif
