/* test_timeline.c - the event ring: what the tracker records, in which order,
 * how the oldest are dropped, and writers on several threads at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "check.h"
#include "config.h"
#include "counters.h"
#include "kinds.h"
#include "run_events.h"
#include "series.h"
#include "timeline.h"
#include "tracker.h"

static struct timeline_event copy[64];

static void allocate(uint64_t value, uint64_t size, int kind, int context)
{
    struct allocation a = {value, size, 0, 0, kind, 0, context, NULL};
    tracker_alloc(&a);
}

static void test_tracker_events(void)
{
    struct block saved;
    uint64_t total;
    allocate(0x1000, 100, KIND_DEVICE, 1);
    allocate(0x2000, 200, KIND_DEVICE, 1);
    CHECK(tracker_take(0x1000, SPACE_MEMORY, &saved) == 1);
    tracker_put_back(&saved); /* the real free failed */
    run_mark("step");
    struct allocation failed = {0, 1 << 30, 0, 0, KIND_DEVICE, 0, 1, NULL};
    run_failure(&failed, 2, 1);
    run_context_gone(1); /* frees both implicitly */

    size_t n = timeline_copy(copy, &total);
    static const int expected[] = {TIMELINE_ALLOC,         TIMELINE_ALLOC,        TIMELINE_FREE,
                                   TIMELINE_ALLOC,         TIMELINE_MARK,         TIMELINE_OOM,
                                   TIMELINE_FREE_IMPLICIT, TIMELINE_FREE_IMPLICIT};
    CHECK_EQ(n, 8);
    CHECK_EQ(total, 8);
    for (size_t i = 0; i < n && i < 8; i++)
        CHECK_EQ(copy[i].type, expected[i]);
    CHECK_EQ(copy[0].value, 0x1000);
    CHECK_EQ(copy[1].size, 200);
    CHECK_EQ(copy[4].size, 1); /* the first mark */
    CHECK_EQ(copy[5].size, 1 << 30);
    int64_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += timeline_delta(&copy[i]);
    CHECK_EQ(live, 0); /* and the counters say 0 too */
    CHECK_EQ(counter_table.sets[0][KIND_DEVICE].bytes_current, 0);
    for (size_t i = 1; i < n; i++)
        CHECK(copy[i].time_us >= copy[i - 1].time_us);

    /* 16 more events in a ring of 16: only the newest 16 of 24 are kept. */
    for (int i = 0; i < 8; i++) {
        allocate(0x10000 + i * 0x1000, 1000 + i, KIND_DEVICE, 0);
        CHECK(tracker_take(0x10000 + i * 0x1000, SPACE_MEMORY, &saved) == 1);
    }
    n = timeline_copy(copy, &total);
    CHECK_EQ(total, 24);
    CHECK_EQ(n, 16);
    CHECK_EQ(copy[0].type, TIMELINE_ALLOC);
    CHECK_EQ(copy[0].size, 1000);
    CHECK_EQ(copy[15].type, TIMELINE_FREE);
    CHECK_EQ(copy[15].size, 1007);
}

#define WRITERS 4
#define EACH 20000

static void *writer(void *argument)
{
    uint64_t id = (uint64_t)(uintptr_t)argument;
    for (uint64_t i = 0; i < EACH; i++)
        timeline_add(TIMELINE_ALLOC, id << 32 | i, i, 0, KIND_DEVICE, 0, 1);
    return NULL;
}

static void test_threads(void)
{
    pthread_t threads[WRITERS];
    uint64_t total;
    timeline_reset(0);
    for (uintptr_t t = 0; t < WRITERS; t++)
        pthread_create(&threads[t], NULL, writer, (void *)t);
    for (int t = 0; t < WRITERS; t++)
        pthread_join(threads[t], NULL);
    struct timeline_event *all = pages_alloc(timeline.capacity * sizeof(*all));
    size_t n = timeline_copy(all, &total);
    CHECK_EQ(total, WRITERS * EACH);
    CHECK_EQ(n, timeline.capacity); /* every kept entry is complete */
    for (size_t i = 0; i < n; i++)
        CHECK((all[i].value & 0xffffffff) == all[i].size && (all[i].value >> 32) < WRITERS);
    pages_free(all, timeline.capacity * sizeof(*all));
}

/* The coarse series: bounded, spanning the whole run, in time order. */
static void test_series(void)
{
    series_reset();
    counter_table.device_seen[2] = 1;
    for (uint32_t t = 0; t < 1000; t++) {
        counter_table.sets[2][KIND_MANAGED].bytes_current = t * 10;
        series_sample(t);
    }
    CHECK(series.count > SERIES_SAMPLES / 2 && series.count <= SERIES_SAMPLES);
    CHECK_EQ(series.every, 4); /* halved twice: 256, then 512 offered */
    CHECK_EQ(series.samples[0].time_ms, 0);
    CHECK(series.samples[series.count - 1].time_ms >= 1000 - series.every);
    for (uint32_t i = 1; i < series.count; i++) {
        CHECK(series.samples[i].time_ms > series.samples[i - 1].time_ms);
        CHECK_EQ(series.samples[i].bytes[2][KIND_MANAGED], series.samples[i].time_ms * 10);
    }
    counter_table.sets[2][KIND_MANAGED].bytes_current = 0;
    counter_table.device_seen[2] = 0;
}

int main(void)
{
    setenv("CUMEMTRACE_QUIET", "1", 1);
    setenv("CUMEMTRACE_FORMAT", "none", 1);
    setenv("CUMEMTRACE_EVENTS", "16", 1);
    tracker_init();
    CHECK_EQ(timeline.capacity, 16);
    test_tracker_events();
    test_threads();
    test_series();
    return check_done("test_timeline");
}
