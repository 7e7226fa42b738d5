/* ring.h - where an entry of one of the tracker's rings lies.
 *
 * The failures and the marks are kept in rings: an array of slots, and the
 * count `total` of entries ever added. Entry number n (1 = the first ever)
 * lies in slot (n - 1) % slots, and is still there while it is one of the
 * newest `slots`: from RING_FIRST(ring, total) to `total`. The tracker writes
 * the rings; the reports, the crash dump and the command's loaders read or
 * fill them; all of them find an entry here, so they agree on where it is.
 * `ring` is the array itself: its size comes from its type. */
#ifndef CUMEMTRACE_RING_H
#define CUMEMTRACE_RING_H

#include <stdint.h>

#define RING_SLOTS(ring) (sizeof(ring) / sizeof((ring)[0]))

/* Entry `number`'s slot (a pointer into `ring`). */
#define RING_ENTRY(ring, number) (&(ring)[((number)-1) % RING_SLOTS(ring)])

/* The number of the oldest entry still kept (total + 1 when there is none). */
#define RING_FIRST(ring, total) ring_first((total), RING_SLOTS(ring))

static inline uint64_t ring_first(uint64_t total, uint64_t slots)
{
    return total > slots ? total - slots + 1 : 1;
}

#endif
