/* self_time.c - the tracer's own time, CUMEMTRACE_SELF_TIME=1.
 *
 * From hook_call to the real call and from its return to hook_end (and
 * around a framework's events, frameworks.c), a thread's clock runs; the
 * intervals are added to the tracker's count of our own time. A wrapper
 * nested in another's real call (cudaMalloc -> cuMemAlloc_v2) runs its own
 * intervals while the outer one's clock is stopped, so nothing is counted
 * twice. An interval measured holds about one clock read of its own, which
 * is taken off: the least of 32 back-to-back reads' differences, measured
 * once. */
#include "clock.h"
#include "preload.h"

static __thread uint64_t self_time_since; /* 0: this thread's clock is stopped */

static uint64_t clock_read_ns = UINT64_MAX; /* not measured yet */

static uint64_t one_clock_read(void)
{
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < 32; i++) {
        uint64_t before = monotonic_ns(), after = monotonic_ns();
        if (after - before < least)
            least = after - before;
    }
    return least;
}

void self_time_start(void)
{
    if (__atomic_load_n(&clock_read_ns, __ATOMIC_RELAXED) == UINT64_MAX)
        __atomic_store_n(&clock_read_ns, one_clock_read(), __ATOMIC_RELAXED);
    if (!self_time_since)
        self_time_since = monotonic_ns();
}

void self_time_stop(void)
{
    if (self_time_since) {
        uint64_t spent = monotonic_ns() - self_time_since;
        uint64_t read = __atomic_load_n(&clock_read_ns, __ATOMIC_RELAXED);
        tracker_add_self_time(spent > read ? spent - read : 0);
        self_time_since = 0;
    }
}
