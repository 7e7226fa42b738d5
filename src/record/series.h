/* series.h - a coarse, always-on series of live bytes per device and kind.
 *
 * Without the event timeline (CUMEMTRACE_EVENTS=0, the default for text and
 * JSON reports) a report could not say how memory moved over time. This
 * series costs nothing per allocation: each time a growth observation is
 * taken (over the program's events, or at its marks; growth.h) it copies
 * the counters' current bytes of devices 0-7 into a fixed table of
 * SERIES_SAMPLES entries. When the table is full every other sample is
 * dropped and samples are kept half as often, so it always spans the whole
 * run. Called with the tracker's lock held. */
#ifndef CUMEMTRACE_SERIES_H
#define CUMEMTRACE_SERIES_H

#include <stdint.h>

#include "kinds.h"

#define SERIES_SAMPLES 256
#define SERIES_DEVICES 8

struct series_sample {
    uint32_t time_ms;
    uint64_t bytes[SERIES_DEVICES][KIND_COUNT];
};

struct series_state {
    uint32_t count;   /* samples kept */
    uint32_t every;   /* one growth sample in `every` is kept */
    uint32_t offered; /* growth samples seen */
    struct series_sample samples[SERIES_SAMPLES];
};
extern struct series_state series;

void series_reset(void);
/* A sample at a growth observation; two in one ms make one, the later. */
void series_sample(uint32_t now_ms);
/* For a report: `copy` (of `series`) with the counters now as its last point. */
void series_now(struct series_state *copy, uint32_t now_ms);

#endif
