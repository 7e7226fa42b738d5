/* series.c - live bytes per device and kind at growth samples (see series.h). */
#include <string.h>

#include "counters.h"
#include "series.h"

struct series_state series = {.every = 1};

void series_reset(void)
{
    series.count = 0;
    series.every = 1;
    series.offered = 0;
}

void series_sample(uint32_t now_ms)
{
    if (series.offered++ % series.every != 0)
        return;
    if (series.count == SERIES_SAMPLES) {
        /* Full: keep samples 0, 2, 4, ... and from now on one in twice as many. */
        for (uint32_t i = 0; i < SERIES_SAMPLES / 2; i++)
            series.samples[i] = series.samples[2 * i];
        series.count = SERIES_SAMPLES / 2;
        series.every *= 2;
    }
    struct series_sample *s = &series.samples[series.count++];
    s->time_ms = now_ms;
    for (int device = 0; device < SERIES_DEVICES; device++)
        for (int kind = 0; kind < KIND_COUNT; kind++)
            s->bytes[device][kind] = counters_current_bytes(device, kind);
}
