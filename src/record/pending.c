/* pending.c - the framework event queue (see pending.h): the ring of
 * framework block events waiting to be entered, and its reader's chunks. */
#include "pending.h"

#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "hot_path.h"
#include "registry.h"

/* 8192 events: 512 KiB, some 13 steps of a transformer's 614 tensors. */
#define PENDING_CAPACITY 8192u

/* Writers and the reader share as few lines as they can: the reader never
 * reads head (a slot's stamp says it is published), and a writer reads tail,
 * which the reader moves at every event, only when its last look says the
 * ring may be full or long. */
static struct {
    struct pending_event *events;
    _Alignas(64) uint64_t head; /* events claimed */
    _Alignas(64) uint64_t tail; /* events entered: written by the reader only */
} ring;
static __thread uint64_t tail_seen; /* this writer's last look at tail */

static uint64_t look_at_tail(void)
{
    tail_seen = __atomic_load_n(&ring.tail, __ATOMIC_ACQUIRE);
    return tail_seen;
}

/* Only the slots ever claimed hold a stamp: a forked child of a process
 * that queued nothing (no PyTorch) writes none of the ring's pages, which
 * it shares with its parent until then. */
int pending_reset(void)
{
    if (!ring.events)
        ring.events = pages_alloc(PENDING_CAPACITY * sizeof(struct pending_event));
    else
        for (uint64_t i = 0; i < ring.head && i < PENDING_CAPACITY; i++)
            ring.events[i].stamp = 0;
    ring.head = ring.tail = 0;
    tail_seen = 0;
    return ring.events ? 0 : -1;
}

/* x86-64: the next slot is fetched for writing (prefetchw: a no-op on the
 * oldest processors that lack it, never a fault). */
#if defined(__x86_64__)
__attribute__((target("prfchw")))
#endif
HOT_PATH struct pending_event *
pending_claim(uint64_t *number)
{
    if (!ring.events)
        return NULL;
    uint64_t head = __atomic_load_n(&ring.head, __ATOMIC_RELAXED);
    do {
        /* tail_seen may be older than the head read (another thread's
         * look, or a forked child's reset): then look again. */
        if ((head - tail_seen >= PENDING_CAPACITY || head < tail_seen) &&
            head - look_at_tail() >= PENDING_CAPACITY)
            return NULL;
    } while (!__atomic_compare_exchange_n(&ring.head, &head, head + 1, 1, __ATOMIC_ACQUIRE,
                                          __ATOMIC_RELAXED));
    /* The next event's slot, for writing: its line was last read by the
     * reader, on another core, a lap ago. Fetched now, in the time until
     * that event, rather than by its writer, which PyTorch waits for (a
     * tensor's free often follows its allocation, or the next one, within
     * a microsecond, on the same thread). */
    __builtin_prefetch(&ring.events[(head + 1) % PENDING_CAPACITY], 1);
    *number = head;
    return &ring.events[head % PENDING_CAPACITY];
}

HOT_PATH uint64_t pending_publish(struct pending_event *e, uint64_t number, uint64_t longer_than)
{
    __atomic_store_n(&e->stamp, number + 1, __ATOMIC_RELEASE);
    if (number + 1 - tail_seen <= longer_than && number >= tail_seen)
        return number + 1 - tail_seen;
    return number + 1 - look_at_tail();
}

uint64_t pending_claimed(void)
{
    return __atomic_load_n(&ring.head, __ATOMIC_RELAXED);
}

uint64_t pending_count(void)
{
    return __atomic_load_n(&ring.head, __ATOMIC_ACQUIRE) -
           __atomic_load_n(&ring.tail, __ATOMIC_ACQUIRE);
}

const struct pending_event *pending_peek(uint32_t ahead)
{
    uint64_t number = __atomic_load_n(&ring.tail, __ATOMIC_RELAXED) + ahead;
    if (!ring.events || ahead >= PENDING_CAPACITY)
        return NULL;
    /* Published stamps are unique: an older lap's, or 0, is never number + 1. */
    const struct pending_event *e = &ring.events[number % PENDING_CAPACITY];
    return __atomic_load_n(&e->stamp, __ATOMIC_ACQUIRE) == number + 1 ? e : NULL;
}

const struct pending_event *pending_next(void)
{
    return pending_peek(0);
}

void pending_done(void)
{
    __atomic_store_n(&ring.tail, __atomic_load_n(&ring.tail, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELEASE);
}

/* ---- the reader: its lock, and the events a chunk at a time ---------------- */

static pthread_mutex_t reader_lock = PTHREAD_MUTEX_INITIALIZER;

void pending_lock(void)
{
    pthread_mutex_lock(&reader_lock);
}

int pending_trylock(void)
{
    return pthread_mutex_trylock(&reader_lock) == 0;
}

void pending_unlock(void)
{
    pthread_mutex_unlock(&reader_lock);
}

void pending_fork_child(void)
{
    pthread_mutex_init(&reader_lock, NULL);
}

/* The chunk being read, guarded by reader_lock. */
static struct pending_chunk chunk;

/* The chunk's latest event at each address while it is looked over: open
 * addressing by address, twice the chunk's slots, so probes stay short and
 * end. A slot belongs to the current look only if its round is this
 * one's, so the table is cleared only when the round wraps. */
#define OPEN_SLOTS (2 * PENDING_CHUNK)
static struct {
    uint16_t round;
    uint16_t index; /* into chunk.events[] */
} latest[OPEN_SLOTS];
static uint16_t latest_round;

static uint32_t latest_slot(uint64_t value)
{
    uint32_t i = (uint32_t)((value >> 9) * 0x9e3779b97f4a7c15ull >> 40) & (OPEN_SLOTS - 1);
    while (latest[i].round == latest_round && chunk.events[latest[i].index]->value != value)
        i = (i + 1) & (OPEN_SLOTS - 1);
    return i;
}

/* Pair each free in the chunk with the allocation of its address just
 * before it in the chunk (pending.h), and note the allocations whose
 * address the chunk freed before. */
static void pair_chunk(void)
{
    if (++latest_round == 0) { /* wrapped: no slot may look current */
        memset(latest, 0, sizeof(latest));
        latest_round = 1;
    }
    for (uint32_t i = 0; i < chunk.count; i++) {
        const struct pending_event *e = chunk.events[i];
        chunk.partner[i] = PENDING_UNPAIRED;
        uint32_t at = latest_slot(e->value);
        const struct pending_event *before =
            latest[at].round == latest_round ? chunk.events[latest[at].index] : NULL;
        if (e->type == PENDING_ALLOC) {
            chunk.freed_before[i] = before && before->type == PENDING_FREE;
        } else if (before && before->type == PENDING_ALLOC && before->size <= BLOCK_SIZE_MAX) {
            uint16_t j = latest[at].index;
            chunk.partner[i] = j;
            chunk.partner[j] = (uint16_t)i;
        }
        latest[at].round = latest_round;
        latest[at].index = (uint16_t)i;
    }
}

const struct pending_chunk *pending_chunk(void)
{
    uint32_t n = 0;
    while (n < PENDING_CHUNK && (chunk.events[n] = pending_peek(n)))
        n++;
    chunk.count = n;
    if (n == 0)
        return NULL;
    pair_chunk();
    return &chunk;
}

void pending_chunk_done(void)
{
    __atomic_store_n(&ring.tail, __atomic_load_n(&ring.tail, __ATOMIC_RELAXED) + chunk.count,
                     __ATOMIC_RELEASE);
}
