/* pending.h - the framework event queue: framework block events recorded
 * now, entered in the registry later, in the order they happened.
 *
 * A training step of PyTorch's caching allocator hands out and takes back
 * hundreds of tensors, each an event in the allocating thread while PyTorch
 * waits. Entering one in the registry (shard lock, probes, counters, stack
 * totals) took most of the tracer's time there, and the caches that work
 * evicted cost PyTorch about as much again (docs/PERFORMANCE.md). So the
 * allocating thread only takes the stack and writes the event here; the
 * tracker enters the events later, in batches, on its own thread or at the
 * next report, whichever comes first (tracker.c).
 *
 * A bounded ring, many writers and one reader at a time: a writer claims a
 * slot (one compare-and-swap on the shared head), fills it and publishes it
 * by its stamp; the reader takes published events in claim order, so a
 * tensor's free is never entered before its allocation, whichever threads
 * made them. A full ring refuses a claim: the writer then enters what is
 * pending itself and tries again. Nothing is allocated per event.
 *
 * The reader holds the queue's lock (pending_lock) and takes the events a
 * chunk at a time (pending_chunk), each free paired with its allocation
 * when both are in the chunk, so that the tracker can count a block that
 * ends within its chunk without making its record. This module decides
 * nothing about records: it keeps the events, their order and the pairs
 * (perf's ordered events are the model); tracker.c enters them. */
#ifndef CUMEMTRACE_PENDING_H
#define CUMEMTRACE_PENDING_H

#include <stdint.h>

enum pending_type { PENDING_ALLOC = 1, PENDING_FREE };

/* One cache line, so writers on two cores never share one. A free's event
 * is its value and its type: the reader reads no other field of it. */
struct pending_event {
    _Alignas(64) uint64_t stamp; /* the event's number + 1 once written */
    uint64_t value;              /* the block's address */
    uint64_t size;
    uint64_t handle; /* its stream, 0 if none */
    uint32_t stack_id;
    uint16_t thread; /* the allocating thread's number */
    int8_t device;
    uint8_t type; /* enum pending_type */
    uint8_t kind; /* enum kind */
    uint8_t api;
    uint8_t context; /* interned CUDA context, 0 if none */
};

/* An empty ring; its memory is mapped at the first call (0, or -1 if it
 * could not be: then every claim is refused). Also in a forked child,
 * whose parent's events are not its own. */
int pending_reset(void);

/* A slot for the next event, its number in *number, or NULL if the ring is
 * full (or has no memory). The caller fills it and calls pending_publish. */
struct pending_event *pending_claim(uint64_t *number);
/* Slot `e`, claimed as event `number`, is written: the reader may take it.
 * Returns the events claimed and not yet entered (published or not), as
 * this writer last saw them: an estimate that may be high, looked at again
 * when over `longer_than`. One call, not two: a tensor's event is hundreds
 * a step on the framework's thread. */
uint64_t pending_publish(struct pending_event *e, uint64_t number, uint64_t longer_than);

/* Events claimed and not yet entered (published or not). */
uint64_t pending_count(void);
/* Events claimed since the ring was made (or reset): the next one's number. */
uint64_t pending_claimed(void);

/* The reader's side, one reader at a time (pending_lock's holder): the
 * oldest event if it is published, else NULL; pending_done once it is
 * entered frees its slot. pending_peek looks `ahead` events past the oldest
 * (0: the oldest), to see a batch before entering it: NULL if that one is
 * not published yet (an event is published after those before it only
 * while a writer is between its claim and its publish: the reader stops at
 * the first that is not). */
const struct pending_event *pending_next(void);
const struct pending_event *pending_peek(uint32_t ahead);
void pending_done(void);

/* The queue's lock: its holder is the one reader. The tracker takes it
 * before any registry shard (tracker.c's lock order). */
void pending_lock(void);
int pending_trylock(void); /* 1 if taken; never waits */
void pending_unlock(void);
/* In a forked child, whose parent's reader may have held the lock: a new
 * lock (pending_reset empties the ring). */
void pending_fork_child(void);

/* Events are taken a chunk at a time (512: the chunk's slots, read twice,
 * stay in the first caches). Most of a training step's tensors end within
 * a few hundred events (a layer's temporaries), so a chunk is looked over
 * before it is entered: each free is paired with the allocation of its
 * address just before it in the chunk, if there is one (not another free),
 * and an allocation too large for a record (BLOCK_SIZE_MAX) is left
 * unpaired, to be refused as it would be. */
#define PENDING_CHUNK 512
#define PENDING_UNPAIRED UINT16_MAX
_Static_assert(PENDING_CHUNK < PENDING_UNPAIRED, "a chunk's index fits a partner");

struct pending_chunk {
    uint32_t count;
    const struct pending_event *events[PENDING_CHUNK];
    uint16_t partner[PENDING_CHUNK];     /* the other event of a pair, or PENDING_UNPAIRED */
    uint8_t freed_before[PENDING_CHUNK]; /* an allocation whose address the chunk freed */
};

/* pending_lock held: the next chunk of published events, in order, paired;
 * NULL once none is left. Each chunk taken is given back by
 * pending_chunk_done once entered (a paired free reads its allocation's
 * slot until then). */
const struct pending_chunk *pending_chunk(void);
void pending_chunk_done(void);

#endif
