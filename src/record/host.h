/* host.h - what the layer that loaded the tracer lends the core.
 *
 * The core knows neither CUDA nor how the process's own dlsym is shadowed;
 * the interposer (preload/) knows both. So once, at its first event, it
 * lends the core the few things only it can do, in this one struct
 * (tracker_start). Nothing resets it: a forked child calls the same
 * functions. Until it is lent (a program that calls cumemtrace_snapshot()
 * before any CUDA call, the unit tests) every field is zero, and each user
 * does without: no Python frames, no driver figures, "unknown" entry points. */
#ifndef CUMEMTRACE_HOST_H
#define CUMEMTRACE_HOST_H

#include <stdint.h>

/* A stream-ordered pool's bytes, as cuMemPoolGetAttribute gives them:
 * reserved from the device and handed out, now and at their peaks. What a
 * pool reserves beyond what it uses is memory nobody else can have. */
struct pool_figures {
    uint64_t reserved, reserved_peak, used, used_peak;
};
#define POOL_FIGURE_UNKNOWN UINT64_MAX /* every figure of a pool the driver would not describe */

struct host {
    /* dlsym past our own, for the core's look-ups (libgcc's unwinder, libz, Python). */
    void *(*lookup)(void *handle, const char *name);
    const char *const *api_names; /* the entry points, by the index blocks carry */
    int api_count;
    int cache_api[3];              /* the index blocks of each cache kind carry
                                     * (KIND_TORCH_TENSOR, KIND_CUPY_BLOCK, KIND_JAX_ARRAY) */
    int (*call_in_progress)(void); /* this thread is inside a real CUDA call */
    /* A device's free and total bytes; 0, or -1 when not known. */
    int (*memory_info)(int device, uint64_t *free_bytes, uint64_t *total_bytes);
    /* A device's default stream-ordered pool; 0, or -1 when not known. */
    int (*pool_info)(int device, struct pool_figures *figures);
    /* The index-th pool the program created (figures all POOL_FIGURE_UNKNOWN
     * when the driver would not say); -1 past the last. */
    int (*created_pool_info)(int index, uint64_t *handle, int *device,
                             struct pool_figures *figures);
};

extern struct host host;

#endif
