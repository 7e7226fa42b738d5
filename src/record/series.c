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

/* The counters' bytes now into sample `s`, at `now_ms`. */
static void copy_counters(struct series_sample *s, uint32_t now_ms)
{
    s->time_ms = now_ms;
    for (int device = 0; device < SERIES_DEVICES; device++)
        for (int kind = 0; kind < KIND_COUNT; kind++)
            s->bytes[device][kind] = counters_current_bytes(device, kind);
}

void series_sample(uint32_t now_ms)
{
    if (series.offered++ % series.every != 0)
        return;
    if (series.count && series.samples[series.count - 1].time_ms == now_ms) {
        copy_counters(&series.samples[series.count - 1], now_ms); /* one point a ms */
        return;
    }
    if (series.count == SERIES_SAMPLES) {
        /* Full: keep samples 0, 2, 4, ... and from now on one in twice as many. */
        for (uint32_t i = 0; i < SERIES_SAMPLES / 2; i++)
            series.samples[i] = series.samples[2 * i];
        series.count = SERIES_SAMPLES / 2;
        series.every *= 2;
    }
    copy_counters(&series.samples[series.count++], now_ms);
}

void series_now(struct series_state *copy, uint32_t now_ms)
{
    if (copy->count && copy->samples[copy->count - 1].time_ms >= now_ms)
        copy_counters(&copy->samples[copy->count - 1], copy->samples[copy->count - 1].time_ms);
    else if (copy->count < SERIES_SAMPLES)
        copy_counters(&copy->samples[copy->count++], now_ms);
    else
        copy_counters(&copy->samples[copy->count - 1], now_ms);
}
