/* framework_hooks.h - what the layer above the frameworks' bridge lends it.
 *
 * The Python bridge (torch_stats.c, cupy_pool.c) sees two moments that the
 * reports above it act on: a framework's cache gave up (runtime/triggers.c
 * writes the OOM report in its terms), and the program ended (collect.c
 * keeps the caches' view for the exit report). It cannot call them by name
 * without a circle, so the interposer lends them once, at its first event
 * (framework_hooks_lend). Until then (a copy that stands aside, the unit
 * tests) both are NULL, and the bridge tells no one. Nothing resets them: a
 * forked child calls the same functions. */
#ifndef CUMEMTRACE_FRAMEWORK_HOOKS_H
#define CUMEMTRACE_FRAMEWORK_HOOKS_H

#include <stdint.h>

struct framework_hooks {
    /* The cache of `cache_kind` (KIND_TORCH_TENSOR, ...) gave up on a
     * request of `request` bytes on `device`, the driver's free bytes then
     * `driver_free` (0: not known). */
    void (*cache_oom)(int cache_kind, int device, uint64_t request, uint64_t driver_free);
    /* The program ended (its interpreter's exit hooks ran), after
     * run_program_end. */
    void (*program_ended)(void);
};

extern struct framework_hooks framework_hooks;

/* Keep a copy of `lent`'s functions; any field may be NULL. */
void framework_hooks_lend(const struct framework_hooks *lent);

#endif
