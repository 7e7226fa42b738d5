/* test_pending.c - framework events queued and entered later (pending.h),
 * the ring alone and through the tracker: nothing is counted before it is
 * entered, events are entered in the order they were made whichever thread
 * made them, a block's time is when it is entered, a full ring is emptied
 * by the thread that finds it full, and with the timeline on an event is
 * entered at once; the reader's chunks pair each free with its allocation. errno is kept throughout. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "counters.h"
#include "kinds.h"
#include "pending.h"
#include "registry.h"
#include "tracker.h"

#define CAPACITY 8192 /* pending.c's */

static void ring_alone(void)
{
    CHECK_EQ(pending_reset(), 0);
    CHECK(pending_next() == NULL);
    uint64_t first, second;
    struct pending_event *a = pending_claim(&first), *b = pending_claim(&second);
    CHECK(a && b && a != b);
    CHECK_EQ(second, first + 1);
    CHECK_EQ(pending_count(), 2);
    b->value = 2;
    pending_publish(b, second, CAPACITY);
    CHECK(pending_next() == NULL); /* the older one is not written yet */
    a->value = 1;
    pending_publish(a, first, CAPACITY);
    const struct pending_event *e = pending_next();
    CHECK(e && e->value == 1);
    pending_done();
    e = pending_next();
    CHECK(e && e->value == 2);
    pending_done();
    CHECK(pending_next() == NULL);
    CHECK_EQ(pending_count(), 0);

    uint64_t number = 0;
    for (int i = 0; i < CAPACITY; i++) {
        struct pending_event *slot = pending_claim(&number);
        CHECK(slot != NULL);
        slot->value = (uint64_t)i;
        pending_publish(slot, number, CAPACITY);
    }
    CHECK(pending_claim(&number) == NULL); /* full */
    e = pending_next();
    CHECK(e && e->value == 0);
    pending_done();
    struct pending_event *slot = pending_claim(&number);
    CHECK(slot != NULL); /* one slot free again: the oldest's */
    pending_publish(slot, number, CAPACITY);

    /* A reset forgets what was queued, stamps too: a claimed, unwritten slot
     * is not read as an old event. */
    CHECK_EQ(pending_reset(), 0);
    CHECK(pending_claim(&number) != NULL);
    CHECK_EQ(number, 0);
    CHECK(pending_next() == NULL);
    CHECK_EQ(pending_reset(), 0);
}

/* Queue an event of `type` at `value`, `size` bytes. */
static void queue_event(int type, uint64_t value, uint64_t size)
{
    uint64_t number;
    struct pending_event *slot = pending_claim(&number);
    CHECK(slot != NULL);
    slot->value = value;
    slot->size = size;
    slot->type = (uint8_t)type;
    pending_publish(slot, number, CAPACITY);
}

/* The reader's chunks: a free is paired with the allocation of its address
 * just before it in the chunk, not with one in an earlier chunk, nor with
 * an allocation too large for a record; an allocation at an address the
 * chunk freed before is noted. A chunk is as long as PENDING_CHUNK at most,
 * and its slots are freed only when it is done. */
static void chunks_paired(void)
{
    CHECK_EQ(pending_reset(), 0);
    pending_lock();
    CHECK(pending_chunk() == NULL);
    queue_event(PENDING_ALLOC, 0x1000, 8);                  /* 0 */
    queue_event(PENDING_ALLOC, 0x2000, 8);                  /* 1 */
    queue_event(PENDING_FREE, 0x1000, 0);                   /* 2: ends 0 */
    queue_event(PENDING_ALLOC, 0x1000, 8);                  /* 3: at an address freed before */
    queue_event(PENDING_ALLOC, 0x3000, BLOCK_SIZE_MAX + 1); /* 4: too large */
    queue_event(PENDING_FREE, 0x3000, 0);                   /* 5: unpaired */
    queue_event(PENDING_FREE, 0x4000, 0);                   /* 6: nothing of it in the chunk */
    const struct pending_chunk *c = pending_chunk();
    CHECK(c != NULL);
    CHECK_EQ(c->count, 7);
    CHECK_EQ(c->partner[0], 2);
    CHECK_EQ(c->partner[2], 0);
    CHECK_EQ(c->partner[1], PENDING_UNPAIRED);
    CHECK_EQ(c->partner[3], PENDING_UNPAIRED);
    CHECK_EQ(c->partner[4], PENDING_UNPAIRED);
    CHECK_EQ(c->partner[5], PENDING_UNPAIRED);
    CHECK_EQ(c->partner[6], PENDING_UNPAIRED);
    CHECK(!c->freed_before[0] && !c->freed_before[1] && c->freed_before[3]);
    CHECK_EQ(pending_count(), 7); /* not freed until done */
    pending_chunk_done();
    CHECK_EQ(pending_count(), 0);

    queue_event(PENDING_FREE, 0x2000, 0); /* its allocation was in the last chunk */
    c = pending_chunk();
    CHECK(c && c->count == 1 && c->partner[0] == PENDING_UNPAIRED);
    pending_chunk_done();

    for (int i = 0; i < PENDING_CHUNK + 3; i++)
        queue_event(PENDING_ALLOC, 0x100000 + (uint64_t)i * 0x1000, 8);
    c = pending_chunk();
    CHECK(c && c->count == PENDING_CHUNK);
    pending_chunk_done();
    c = pending_chunk();
    CHECK(c && c->count == 3 && c->events[0]->value == 0x100000 + PENDING_CHUNK * 0x1000);
    pending_chunk_done();
    CHECK(pending_chunk() == NULL);
    pending_unlock();
    CHECK_EQ(pending_reset(), 0);
}

/* A PyTorch tensor of `size` bytes at `address` on `device`, deferred as
 * src/frameworks says it (cache_blocks.c). */
static void defer_tensor(int device, uint64_t address, uint64_t size)
{
    tracker_defer_alloc(KIND_TORCH_TENSOR, device, address, size, 0, NULL);
}

static struct counters *tensors(void)
{
    static struct counter_table now;
    counters_snapshot(&now);
    return &now.sets[counters_slot(0)][KIND_TORCH_TENSOR];
}

/* Thread "A" allocates tensors, thread "B" frees each one A hands it, as
 * PyTorch's autograd engine frees the forward's: three times the ring's
 * capacity, and no thread enters them but the ones that find the ring long
 * or full. A reuses 64 addresses, each once B has freed it. */
#define HANDED (3 * CAPACITY)
static uint64_t handed[HANDED];
static int handed_count, freed_count;
static pthread_mutex_t hand = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t moved = PTHREAD_COND_INITIALIZER;

static void *allocating(void *unused)
{
    (void)unused;
    for (int i = 0; i < HANDED; i++) {
        uint64_t address = 0x7f0000000000ull + (uint64_t)(i % 64) * 0x1000;
        defer_tensor(0, address, 512);
        pthread_mutex_lock(&hand);
        handed[i] = address;
        handed_count = i + 1;
        pthread_cond_broadcast(&moved);
        while (i % 64 == 63 && freed_count < i + 1)
            pthread_cond_wait(&moved, &hand);
        pthread_mutex_unlock(&hand);
    }
    return NULL;
}

static void *freeing(void *unused)
{
    (void)unused;
    for (int i = 0; i < HANDED; i++) {
        pthread_mutex_lock(&hand);
        while (handed_count <= i)
            pthread_cond_wait(&moved, &hand);
        uint64_t address = handed[i];
        pthread_mutex_unlock(&hand);
        tracker_defer_free(address);
        pthread_mutex_lock(&hand);
        freed_count = i + 1;
        pthread_cond_broadcast(&moved);
        pthread_mutex_unlock(&hand);
    }
    return NULL;
}

static void through_the_tracker(void)
{
    defer_tensor(0, 0x5000, 1000);
    defer_tensor(0, 0x6000, 3000);
    CHECK_EQ(tensors()->blocks_current, 0); /* queued, not entered */
    CHECK(tracker_apply() == 1);
    CHECK_EQ(tensors()->blocks_current, 2);
    CHECK_EQ(tensors()->bytes_current, 4000);
    CHECK(tracker_apply() == 0);

    /* A free queued after its allocation is entered after it, and a report's
     * lock enters what is queued before it looks. */
    tracker_defer_free(0x5000);
    defer_tensor(0, 0x5000, 10);
    tracker_lock();
    tracker_unlock();
    CHECK_EQ(tensors()->blocks_current, 2);
    CHECK_EQ(tensors()->bytes_current, 3010);
    tracker_defer_free(0x5000);
    tracker_defer_free(0x6000);
    tracker_apply();
    CHECK_EQ(tensors()->blocks_current, 0);

    /* A queued block's time is when it is entered: the allocating thread
     * reads no clock. */
    uint32_t made = tracker_now_ms();
    defer_tensor(0, 0x7000, 64);
    usleep(30 * 1000);
    uint32_t before = tracker_now_ms();
    tracker_apply();
    uint32_t after = tracker_now_ms();
    struct block saved;
    CHECK(tracker_take(0x7000, SPACE_FRAMEWORK, &saved));
    CHECK(before >= made + 30);
    CHECK(saved.time_ms >= before && saved.time_ms <= after);

    pthread_t a, b;
    CHECK(pthread_create(&b, NULL, freeing, NULL) == 0);
    CHECK(pthread_create(&a, NULL, allocating, NULL) == 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(pending_count() <= CAPACITY);
    tracker_apply();
    CHECK_EQ(pending_count(), 0);
    CHECK_EQ(tensors()->blocks_current, 0);
    CHECK_EQ(tensors()->blocks_allocated, HANDED + 4);
    CHECK_EQ(tracker.lost[LOST_UNKNOWN_FREE], 0);
    CHECK_EQ(tracker.lost[LOST_MISSED_FREE], 0);
}

/* Tensors that end within the batch that enters them are counted, each
 * event at its place, as if their records had been made and ended: the
 * peak between them, the totals, a missed free at a reused address. Device
 * 2, whose figures no other check touches. */
static struct counters *on_device_2(void)
{
    static struct counter_table now;
    counters_snapshot(&now);
    return &now.sets[counters_slot(2)][KIND_TORCH_TENSOR];
}

static void pairs_in_a_batch(void)
{
    defer_tensor(2, 0x40000, 700);
    tracker_apply(); /* entered: its free is missed */
    uint64_t missed = tracker.lost[LOST_MISSED_FREE];

    defer_tensor(2, 0x10000, 1000);
    defer_tensor(2, 0x20000, 5000);
    tracker_defer_free(0x10000);
    defer_tensor(2, 0x10000, 300);
    tracker_defer_free(0x20000);
    defer_tensor(2, 0x40000, 10);
    tracker_defer_free(0x10000);
    tracker_defer_free(0x40000);
    defer_tensor(2, 0x30000, 64);
    CHECK(tracker_apply() == 1);
    CHECK_EQ(pending_count(), 0);

    struct counters *c = on_device_2();
    CHECK_EQ(c->blocks_current, 1);
    CHECK_EQ(c->bytes_current, 64);
    CHECK_EQ(c->bytes_peak, 6700); /* 700 missed, 1000 and 5000 at once */
    CHECK_EQ(c->blocks_peak, 3);
    CHECK_EQ(c->blocks_allocated, 6);
    CHECK_EQ(c->bytes_allocated, 700 + 1000 + 5000 + 300 + 10 + 64);
    CHECK_EQ(tracker.lost[LOST_MISSED_FREE], missed + 1);
    struct block saved;
    CHECK(!tracker_take(0x10000, SPACE_FRAMEWORK, &saved));
    CHECK(!tracker_take(0x40000, SPACE_FRAMEWORK, &saved));
    CHECK(tracker_take(0x30000, SPACE_FRAMEWORK, &saved));
    CHECK_EQ(saved.size, 64);
    CHECK_EQ(saved.device, 2);
}

/* A framework calls these from inside its allocator, around which the
 * program may read errno: kept on a thread's first event, with the ring
 * full (this thread enters it), and with the timeline on (with_timeline). */
static void *first_events(void *unused)
{
    (void)unused;
    errno = EDOM;
    defer_tensor(0, 0x9000, 64);
    tracker_defer_free(0x9000);
    return errno == EDOM ? (void *)1 : NULL;
}

static void errno_kept(void)
{
    pthread_t thread;
    void *kept = NULL;
    CHECK(pthread_create(&thread, NULL, first_events, NULL) == 0);
    pthread_join(thread, &kept);
    CHECK(kept != NULL);
    errno = EDOM;
    for (uint64_t i = 0; i < CAPACITY + 100; i++)
        defer_tensor(0, 0x100000000ull + i * 0x1000, 64);
    CHECK_EQ(errno, EDOM);
    for (uint64_t i = 0; i < CAPACITY + 100; i++)
        tracker_defer_free(0x100000000ull + i * 0x1000);
    CHECK_EQ(errno, EDOM);
    tracker_apply();
    CHECK_EQ(pending_count(), 0);
}

/* With the timeline on, its times are the events' own: entered at once. */
static int with_timeline(void)
{
    setenv("CUMEMTRACE_EVENTS", "100", 1);
    tracker_init();
    errno = EDOM;
    defer_tensor(0, 0x5000, 1000);
    CHECK_EQ(errno, EDOM);
    CHECK_EQ(pending_count(), 0);
    CHECK_EQ(tensors()->blocks_current, 1);
    return checks_failed;
}

int main(void)
{
    setenv("CUMEMTRACE_QUIET", "1", 1);
    setenv("CUMEMTRACE_FORMAT", "none", 1);
    setenv("CUMEMTRACE_DEPTH", "0", 1);
    /* A growth observation enters what is queued when one is due (at the
     * run's first events, at each): these tests say when entering happens. */
    setenv("CUMEMTRACE_GROWTH", "0", 1);
    pid_t child = fork(); /* before this process's tracker_init */
    CHECK(child >= 0);
    if (child == 0)
        _exit(with_timeline() ? 1 : 0);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    ring_alone();
    chunks_paired();
    tracker_init();
    through_the_tracker();
    pairs_in_a_batch();
    errno_kept();
    return check_done("pending");
}
