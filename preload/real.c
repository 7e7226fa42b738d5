/* real.c - find the real CUDA functions behind our wrappers.
 *
 * A real pointer reaches a slot in one of three ways: a caller's dlsym or
 * cuGetProcAddress lookup returned it (and got our wrapper instead), or the
 * wrapper ran first and looks it up itself: RTLD_NEXT, then the already loaded
 * libcuda.so.1 / libcudart.so.* (loaded with RTLD_LOCAL by frameworks, so
 * invisible to RTLD_NEXT). Slots are written once, atomically. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "log.h"
#include "preload.h"

#define DRIVER_ALLOC(symbol, base, version, flavour, ...)                                          \
    [API_##symbol] = {#symbol, base, version, flavour, (void *)symbol},
#define DRIVER_FREE DRIVER_ALLOC
#define DRIVER_UNMAP DRIVER_ALLOC
#define DRIVER_CALL DRIVER_ALLOC
#define DRIVER_LOOKUP DRIVER_ALLOC
#define RUNTIME_ALLOC(symbol, ...) [API_##symbol] = {#symbol, NULL, 0, ANY, (void *)symbol},
#define RUNTIME_FREE RUNTIME_ALLOC
#define RUNTIME_CALL RUNTIME_ALLOC
#define CACHE_ALLOCATOR(name) [API_##name] = {#name, NULL, 0, ANY, NULL},
const struct entry entries[API_COUNT] = {
#include "entrypoints.h"
};

#define DRIVER_ALLOC(symbol, ...) [API_##symbol] = #symbol,
#define DRIVER_FREE DRIVER_ALLOC
#define DRIVER_UNMAP DRIVER_ALLOC
#define DRIVER_CALL DRIVER_ALLOC
#define DRIVER_LOOKUP DRIVER_ALLOC
#define RUNTIME_ALLOC DRIVER_ALLOC
#define RUNTIME_FREE DRIVER_ALLOC
#define RUNTIME_CALL DRIVER_ALLOC
#define CACHE_ALLOCATOR DRIVER_ALLOC
const char *const entry_names[API_COUNT] = {
#include "entrypoints.h"
};

static void *real_slots[API_COUNT];

__thread int in_cuda_call;

int real_call_in_progress(void)
{
    return in_cuda_call > 0;
}

int entry_by_symbol(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return -1;
    for (int api = 0; api < API_COUNT; api++)
        if (strcmp(entries[api].symbol, name) == 0)
            return api;
    return -1;
}

/* The entry cuGetProcAddress(base, version, flags) should be wrapped with:
 * the right flavour, and the highest minimum version not above `version`. */
int entry_for_lookup(const char *base, int version, uint64_t flags, int *name_known)
{
    int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? PER_THREAD : LEGACY;
    int best = -1;
    *name_known = 0;
    if (!base || base[0] != 'c' || base[1] != 'u')
        return -1;
    for (int api = 0; api < API_COUNT; api++) {
        const struct entry *e = &entries[api];
        if (!e->base || strcmp(e->base, base) != 0)
            continue;
        *name_known = 1;
        if (e->flavour != ANY && e->flavour != want)
            continue;
        if (e->version <= version && (best < 0 || e->version > entries[best].version))
            best = api;
    }
    return best;
}

void real_offer(int api, void *function)
{
    if (!function || function == entries[api].wrapper)
        return;
    void *expected = NULL;
    if (!__atomic_compare_exchange_n(&real_slots[api], &expected, function, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE) &&
        expected != function)
        log_debug("%s: keeping %p, a lookup also returned %p", entries[api].symbol, expected,
                  function);
}

struct found_library {
    const char *prefix;
    char path[4096];
};

static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct found_library *found = data;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *name = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(name, found->prefix, strlen(found->prefix)) != 0)
        return 0;
    strncpy(found->path, info->dlpi_name, sizeof(found->path) - 1);
    return 1;
}

/* A handle to an already loaded library whose file name starts with prefix. */
static void *loaded_library(const char *prefix)
{
    struct found_library found = {prefix, ""};
    if (!dl_iterate_phdr(find_loaded, &found))
        return NULL;
    return dlopen(found.path, RTLD_LAZY | RTLD_NOLOAD);
}

void *real_driver_symbol(const char *name)
{
    static void *libcuda;
    void *handle = __atomic_load_n(&libcuda, __ATOMIC_ACQUIRE);
    if (!handle) {
        handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (!handle)
            handle = loaded_library("libcuda.so");
        if (!handle)
            return NULL;
        __atomic_store_n(&libcuda, handle, __ATOMIC_RELEASE);
    }
    return real_dlsym(handle, name);
}

static void *resolve(int api)
{
    const struct entry *e = &entries[api];
    void *function = real_dlsym(RTLD_NEXT, e->symbol);
    if (function == e->wrapper)
        function = NULL;
    if (!function && e->base)
        function = real_driver_symbol(e->symbol);
    if (!function && !e->base) {
        void *cudart = loaded_library("libcudart.so");
        if (cudart)
            function = real_dlsym(cudart, e->symbol);
    }
    return function == e->wrapper ? NULL : function;
}

void *real_function(int api)
{
    void *function = __atomic_load_n(&real_slots[api], __ATOMIC_ACQUIRE);
    if (function)
        return function;
    real_offer(api, resolve(api));
    return __atomic_load_n(&real_slots[api], __ATOMIC_ACQUIRE);
}

CUresult driver_unresolved(int api)
{
    static int once;
    tracker_lost(LOST_UNRESOLVED);
    log_once(&once,
             "cannot find the real %s (is libcuda.so.1 loaded?); returning "
             "CUDA_ERROR_NOT_FOUND",
             entries[api].symbol);
    return CUDA_ERROR_NOT_FOUND;
}

cudaError_t runtime_unresolved(int api)
{
    static int once;
    tracker_lost(LOST_UNRESOLVED);
    log_once(&once,
             "cannot find the real %s (is libcudart loaded?); returning "
             "cudaErrorSymbolNotFound",
             entries[api].symbol);
    return cudaErrorSymbolNotFound;
}
