/* driver.c - the driver API wrappers, generated from entrypoints.h.
 *
 * Every wrapper: find the real function, call it, and tell the core what the
 * call did. The result the program sees is always the real call's result. */
#include "preload.h"

#define AS_U64(x) ((uint64_t)(uintptr_t)(x))

#define DRIVER_ALLOC(symbol, base, version, flavour, params, args, kind, address, size, handle,    \
                     device)                                                                       \
    PUBLIC CUresult symbol params                                                                  \
    {                                                                                              \
        CUresult(*real) params = real_function(API_##symbol);                                      \
        if (!real)                                                                                 \
            return driver_unresolved(API_##symbol);                                                \
        hook_call(API_##symbol);                                                                   \
        frameworks_check(__builtin_return_address(0));                                             \
        real_call_begin();                                                                         \
        CUresult result = real args;                                                               \
        real_call_end();                                                                           \
        if (result == CUDA_SUCCESS)                                                                \
            hook_alloc(API_##symbol, kind, AS_U64(address), (size), AS_U64(handle), device);       \
        else                                                                                       \
            hook_failure(API_##symbol, kind, (size), result, result == CUDA_ERROR_OUT_OF_MEMORY,   \
                         device);                                                                  \
        return hook_end(result);                                                                   \
    }

#define DRIVER_FREE(symbol, base, version, flavour, params, args, space, address)                  \
    PUBLIC CUresult symbol params                                                                  \
    {                                                                                              \
        CUresult(*real) params = real_function(API_##symbol);                                      \
        if (!real)                                                                                 \
            return driver_unresolved(API_##symbol);                                                \
        hook_call(API_##symbol);                                                                   \
        struct block saved;                                                                        \
        int taken = hook_take(AS_U64(address), space, &saved);                                     \
        real_call_begin();                                                                         \
        CUresult result = real args;                                                               \
        real_call_end();                                                                           \
        if (taken && result != CUDA_SUCCESS)                                                       \
            tracker_put_back(&saved);                                                              \
        return hook_end(result);                                                                   \
    }

#define DRIVER_UNMAP(symbol, base, version, flavour, params, args, space, address, size)           \
    PUBLIC CUresult symbol params                                                                  \
    {                                                                                              \
        CUresult(*real) params = real_function(API_##symbol);                                      \
        if (!real)                                                                                 \
            return driver_unresolved(API_##symbol);                                                \
        hook_call(API_##symbol);                                                                   \
        real_call_begin();                                                                         \
        CUresult result = real args;                                                               \
        real_call_end();                                                                           \
        if (result == CUDA_SUCCESS)                                                                \
            hook_take_range(space, AS_U64(address), (size));                                       \
        return hook_end(result);                                                                   \
    }

#define DRIVER_CALL(symbol, base, version, flavour, params, args, after)                           \
    PUBLIC CUresult symbol params                                                                  \
    {                                                                                              \
        CUresult(*real) params = real_function(API_##symbol);                                      \
        if (!real)                                                                                 \
            return driver_unresolved(API_##symbol);                                                \
        hook_call(API_##symbol);                                                                   \
        real_call_begin();                                                                         \
        CUresult result = real args;                                                               \
        real_call_end();                                                                           \
        (void)(after);                                                                             \
        return hook_end(result);                                                                   \
    }

#include "entrypoints.h"
