/* runtime.c - the runtime API wrappers, generated from entrypoints.h.
 *
 * They label, they do not record: cudart reaches the driver through our
 * cuGetProcAddress, and the driver wrapper records the block with the name
 * of the runtime function the program called. Only when no driver wrapper saw
 * the call (a path we do not know) does the runtime wrapper record it itself,
 * marked BLOCK_FROM_RUNTIME, and then its free is taken here too. */
#include "preload.h"

#define AS_U64(x) ((uint64_t)(uintptr_t)(x))

#define RUNTIME_ALLOC(symbol, params, args, kind, address, size, handle)                           \
    PUBLIC cudaError_t symbol params                                                               \
    {                                                                                              \
        cudaError_t(*real) params = real_function(API_##symbol);                                   \
        if (!real)                                                                                 \
            return runtime_unresolved(API_##symbol);                                               \
        hook_call(API_##symbol);                                                                   \
        frameworks_check(__builtin_return_address(0));                                             \
        struct runtime_label previous = runtime_label_push(API_##symbol);                          \
        real_call_begin();                                                                         \
        cudaError_t result = real args;                                                            \
        real_call_end();                                                                           \
        if (runtime_label_pop(previous))                                                           \
            return hook_end(result);                                                               \
        if (result == cudaSuccess)                                                                 \
            hook_alloc(API_##symbol, (kind) | BLOCK_FROM_RUNTIME, AS_U64(address), (size),         \
                       AS_U64(handle), DEVICE_OF_CONTEXT);                                         \
        else                                                                                       \
            hook_failure(API_##symbol, kind, (size), result, result == cudaErrorMemoryAllocation,  \
                         DEVICE_OF_CONTEXT);                                                       \
        return hook_end(result);                                                                   \
    }

#define RUNTIME_FREE(symbol, params, args, space, address)                                         \
    PUBLIC cudaError_t symbol params                                                               \
    {                                                                                              \
        cudaError_t(*real) params = real_function(API_##symbol);                                   \
        if (!real)                                                                                 \
            return runtime_unresolved(API_##symbol);                                               \
        hook_call(API_##symbol);                                                                   \
        struct block saved;                                                                        \
        int taken = hook_take_runtime(AS_U64(address), space, &saved);                             \
        struct runtime_label previous = runtime_label_push(API_##symbol);                          \
        real_call_begin();                                                                         \
        cudaError_t result = real args;                                                            \
        real_call_end();                                                                           \
        runtime_label_pop(previous);                                                               \
        if (taken && result != cudaSuccess)                                                        \
            tracker_put_back(&saved);                                                              \
        return hook_end(result);                                                                   \
    }

#define RUNTIME_CALL(symbol, params, args)                                                         \
    PUBLIC cudaError_t symbol params                                                               \
    {                                                                                              \
        cudaError_t(*real) params = real_function(API_##symbol);                                   \
        if (!real)                                                                                 \
            return runtime_unresolved(API_##symbol);                                               \
        hook_call(API_##symbol);                                                                   \
        struct runtime_label previous = runtime_label_push(API_##symbol);                          \
        real_call_begin();                                                                         \
        cudaError_t result = real args;                                                            \
        real_call_end();                                                                           \
        runtime_label_pop(previous);                                                               \
        return hook_end(result);                                                                   \
    }

#include "entrypoints.h"
