/* holders_live.c - who holds the arrays, for `cumemtrace live` (see
 * holders_live.h).
 *
 * The live view's server (src/runtime/live.c) asks; the bridge's reader
 * thread (torch_stats.c), the one that already takes the GIL every
 * CUMEMTRACE_SAMPLE_MS, walks at its next reading (torch_classes.c's
 * holders walk, within CUMEMTRACE_HOLDERS_MS) and answers here; the server
 * copies the answer into its next documents. Never in a signal handler,
 * never on the server's thread (it does not take the GIL).
 *
 * The walk holds the GIL: the program's Python stands still while it runs.
 * So a viewer asking without pause must not slow the program down:
 * requests coalesce (a request made while one is pending gets that one's
 * number: at most one walk per number), and a walk begins no sooner than
 * HOLDERS_LIVE_GAP_MS, and 20 times its predecessor's duration, after that
 * one ended: at most one walk a second, and at most 1/21 of the program's
 * time (a walk cut short at its 1 s budget: then one every 21 s). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "holders_live.h"
#include "torch_classes.h"
#include "torch_figures.h"
#include "tracker.h"

#define HOLDERS_LIVE_GAP_MS 1000
#define HOLDERS_LIVE_SPACING 20

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct holders_live state;

uint64_t holders_live_ask(void)
{
    pthread_mutex_lock(&lock);
    if (state.asked == state.answered)
        state.asked++;
    uint64_t number = state.asked;
    pthread_mutex_unlock(&lock);
    return number;
}

void holders_live_copy(struct holders_live *out)
{
    pthread_mutex_lock(&lock);
    *out = state;
    pthread_mutex_unlock(&lock);
}

int holders_live_due_in(void)
{
    pthread_mutex_lock(&lock);
    int pending = state.asked != state.answered, first = !state.walks;
    uint32_t due = state.due_ms;
    pthread_mutex_unlock(&lock);
    if (!pending)
        return -1;
    if (first)
        return 0;
    uint32_t now = tracker_now_ms();
    return (int32_t)(due - now) > 0 ? (int)(due - now) : 0;
}

/* The walk's paths summed (bytes, storages, tensors), the
 * HOLDERS_LIVE_LINES with most bytes into `a`. */
static void top_paths(const struct torch_holders *h, struct holders_live *a)
{
    size_t bytes = (h->path_count ? h->path_count : 1) * sizeof(struct holders_live_line);
    struct holders_live_line *sums = pages_alloc(bytes);
    if (!sums) {
        a->why = "out of memory in the tracer";
        return;
    }
    uint64_t *largest = pages_alloc((h->path_count ? h->path_count : 1) * sizeof(uint64_t));
    for (uint32_t i = 0; largest && i < h->count; i++) {
        const struct torch_holder_ref *t = &h->refs[i];
        struct holders_live_line *s = &sums[t->path]; /* t->path < path_count: unpacked so */
        s->bytes += t->bytes;
        s->storages++;
        s->tensors += t->tensors;
        if (t->bytes >= largest[t->path]) {
            largest[t->path] = t->bytes;
            s->largest = t->address;
        }
    }
    for (uint32_t p = 0; largest && p < h->path_count; p++) {
        if (!sums[p].storages)
            continue;
        a->paths++;
        uint32_t at = a->count;
        while (at > 0 && a->lines[at - 1].bytes < sums[p].bytes)
            at--;
        if (at == HOLDERS_LIVE_LINES)
            continue;
        uint32_t last = a->count < HOLDERS_LIVE_LINES ? a->count++ : HOLDERS_LIVE_LINES - 1;
        memmove(&a->lines[at + 1], &a->lines[at], (last - at) * sizeof(a->lines[0]));
        struct holders_live_line *l = &a->lines[at];
        *l = sums[p];
        snprintf(l->path, sizeof(l->path), "%s", h->paths[p]);
        snprintf(l->container, sizeof(l->container), "%s", h->containers[p]);
    }
    if (!largest)
        a->why = "out of memory in the tracer";
    else
        pages_free(largest, (h->path_count ? h->path_count : 1) * sizeof(uint64_t));
    pages_free(sums, bytes);
}

void holders_live_answer(void)
{
    if (holders_live_due_in() != 0)
        return;
    pthread_mutex_lock(&lock);
    uint64_t number = state.asked;
    pthread_mutex_unlock(&lock);
    static struct holders_live a; /* the reader's alone: 2 KiB off its stack */
    memset(&a, 0, sizeof(a));
    uint32_t start = tracker_now_ms();
    struct torch_holders *h = torch_holders_read();
    if (!h)
        a.why = "out of memory in the tracer";
    else if (h->why)
        a.why = h->why;
    else
        top_paths(h, &a);
    if (h) {
        a.objects = h->objects;
        a.ms = h->ms;
        memcpy(a.cut, h->cut, sizeof(a.cut));
    }
    torch_holders_free(h);
    uint32_t end = tracker_now_ms(), spent = end - start;
    uint32_t gap = spent * HOLDERS_LIVE_SPACING > HOLDERS_LIVE_GAP_MS ? spent * HOLDERS_LIVE_SPACING
                                                                      : HOLDERS_LIVE_GAP_MS;
    pthread_mutex_lock(&lock);
    a.asked = state.asked;
    a.answered = number;
    a.walks = state.walks + 1;
    a.due_ms = end + gap;
    state = a;
    pthread_mutex_unlock(&lock);
}

void holders_live_reset(void)
{
    pthread_mutex_init(&lock, NULL);
    memset(&state, 0, sizeof(state));
}
