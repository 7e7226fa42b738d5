/* findings.c - the answer first: one line per verdict of the report, each
 * with its site and the figure it rests on, in the order a person chasing an
 * OOM or a leak asks (report.h, struct report_finding).
 *
 * Every writer opens with these (the summary on stderr, the text report,
 * the JSON's `findings`, which the HTML page shows at its top), so the
 * verdicts read the same everywhere; a new verdict of the model is one more
 * entry here. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kinds.h"
#include "report.h"

#define GROWING_SHOWN 3
#define RELEASED_SHOWN 2
#define HELD_SHOWN 3

struct findings {
    struct report_finding *list;
    int count, max;
};

/* One more entry, its text formatted; nothing once the list is full. */
static struct report_finding *add(struct findings *f, const char *verdict, const char *label,
                                  uint32_t stack_id, uint64_t bytes, const char *format, ...)
{
    if (f->count >= f->max)
        return NULL;
    struct report_finding *entry = &f->list[f->count++];
    memset(entry, 0, sizeof(*entry));
    entry->verdict = verdict;
    entry->label = label;
    entry->stack_id = stack_id;
    entry->bytes = bytes;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(entry->text, sizeof(entry->text), format, arguments);
    va_end(arguments);
    return entry;
}

static const char *bytes_text(uint64_t bytes, char *text, size_t size)
{
    format_bytes(bytes, text, size);
    return text;
}

static const char *const frameworks[CACHE_KINDS] = {"PyTorch", "CuPy", "JAX"};

/* The OOM the report is about: the request, and the verdict in a few words
 * with what helps (verdicts.c says why in full). */
static void add_oom(const struct report *r, struct findings *f)
{
    const struct report_event *e = &r->event;
    char size[24], a[24], b[24];
    bytes_text(e->size, size, sizeof(size));
    if (e->has_memory_info && kind_in_cache(e->kind)) {
        struct report_cache_oom why;
        const char *verdict = report_cache_oom(r, &why);
        const char *framework = frameworks[e->kind - KIND_TORCH_TENSOR];
        const struct report_cache *c = why.cache;
        if (strcmp(verdict, "cache_fragmented") == 0) {
            char hole_why[240];
            add(f, "oom", "out of memory", e->stack_id, e->size,
                "%s on device %d; %s's cache is fragmented: %s unused in %llu holes, but %s%s",
                size, e->device, framework, bytes_text(c->unused, a, sizeof(a)),
                (unsigned long long)c->holes, report_hole_why(r, c, hole_why, sizeof(hole_why)),
                e->kind == KIND_TORCH_TENSOR
                    ? " (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps)"
                    : "");
        } else if (strcmp(verdict, "cache_idle") == 0)
            add(f, "oom", "out of memory", e->stack_id, e->size,
                "%s on device %d; %s's cache keeps %s in segments with no live block "
                "(emptying the cache returns it)",
                size, e->device, framework, bytes_text(c->releasable, a, sizeof(a)));
        else if (strcmp(verdict, "others_hold") == 0)
            add(f, "oom", "out of memory", e->stack_id, e->size,
                "%s on device %d; others hold it: %s outside %s's cache against %s in its "
                "blocks",
                size, e->device, bytes_text(why.others, a, sizeof(a)), framework,
                bytes_text(c->block_bytes, b, sizeof(b)));
        else
            add(f, "oom", "out of memory", e->stack_id, e->size,
                "%s on device %d; live blocks fill the device: %s of %s", size, e->device,
                bytes_text(c->block_bytes, a, sizeof(a)), bytes_text(e->total, b, sizeof(b)));
    } else if (e->has_memory_info) {
        add(f, "oom", "out of memory", e->stack_id, e->size,
            "%s via %s on device %d; %s: the driver had %s free", size, report_api_name(r, e->api),
            e->device, e->free < e->size ? "exhausted" : "fragmented, no free range large enough",
            bytes_text(e->free, a, sizeof(a)));
    } else {
        add(f, "oom", "out of memory", e->stack_id, e->size,
            "%s via %s on device %d; why is not known (the driver's free memory could not "
            "be read)",
            size, report_api_name(r, e->api), e->device);
    }
}

/* In a report after an OOM (the exit report), that OOM's final verdict,
 * in the words its own report said it (run_oom_verdict). */
static void add_last_oom(const struct report *r, struct findings *f)
{
    const struct report_last_oom *oom = &r->last_oom;
    if (r->event.type != EVENT_OOM && oom->verdict[0])
        add(f, "oom", "out of memory", oom->stack_id, oom->size, "%s", oom->text);
}

/* " — held by model.outs, a list of 3 tensors": who holds most of
 * stack_id's tensors (report_holders); "" if no one is known to. */
static const char *held_by(const struct report *r, uint32_t stack_id, char *text, size_t size)
{
    const struct report_holder_path *holder = report_holder_of(r, stack_id);
    int n = holder ? snprintf(text, size, " — held by ") : 0;
    if (holder && n > 0 && (size_t)n < size)
        report_holder_text(holder, text + n, size - (size_t)n);
    else if (size)
        text[0] = '\0';
    return text;
}

static void add_growth(const struct report *r, struct findings *f)
{
    for (uint32_t i = 0; i < r->growing_count && i < GROWING_SHOWN; i++) {
        const struct stack *s = &r->stacks[r->growing[i] - 1];
        char rates[96], now[24];
        uint64_t bytes = report_growth_bytes(r, s);
        char held[REPORT_CLASS_TEXT + 64];
        held_by(r, r->growing[i], held, sizeof(held));
        report_growth_rates(r, &s->growth, 0, rates, sizeof(rates));
        add(f, "growing", "growing", r->growing[i], bytes,
            "%s, %s %s (rose at %u of %u observations)%s", rates,
            bytes_text(bytes, now, sizeof(now)), r->growth.ended ? "when the program ended" : "now",
            s->growth.rises,
            r->growth.samples > s->growth.first_sample ? r->growth.samples - s->growth.first_sample
                                                       : 0,
            held);
    }
    if (r->growing_count > GROWING_SHOWN)
        add(f, "growing", "growing", 0, 0, "%u more sites", r->growing_count - GROWING_SHOWN);
    for (uint32_t i = 0; i < r->released_count && i < RELEASED_SHOWN; i++) {
        const struct stack_growth *g = &r->stacks[r->released[i] - 1].growth;
        char peak[24];
        add(f, "released", "grew, then freed near the end", r->released[i], g->peak_bytes,
            "peak %s at %.1f s", bytes_text(g->peak_bytes, peak, sizeof(peak)),
            g->peak_ms / 1000.0);
    }
}

/* What is live and nobody holds on purpose: at exit, leaked (not held when
 * the program ended, not a cache's segment); in any other report, what is
 * live now. The site holding most is named. */
static void add_live(const struct report *r, struct findings *f)
{
    int exit = strcmp(r->reason, "exit") == 0;
    uint64_t bytes = 0, blocks = 0;
    size_t sites = 0;
    const struct report_group *most = NULL;
    for (size_t i = 0; i < r->group_count; i++) {
        const struct report_group *g = &r->groups[i];
        if (report_cache_segment(r, g->stack_id) || (exit && g->held_at_end))
            continue;
        bytes += g->bytes;
        blocks += g->blocks;
        sites++;
        if (!most)
            most = g; /* groups: most bytes first */
    }
    if (!sites)
        return;
    char total[24], own[24], also[64] = "";
    bytes_text(bytes, total, sizeof(total));
    if (sites > 1)
        snprintf(also, sizeof(also), " (this one holds %s)",
                 bytes_text(most->bytes, own, sizeof(own)));
    if (!exit)
        add(f, "live", "live now", most->stack_id, bytes, "%s in %llu blocks from %zu site%s%s",
            total, (unsigned long long)blocks, sites, sites == 1 ? "" : "s", also);
    else
        add(f, "leaked", r->end.ended ? "leaked by the interpreter's teardown" : "leaked",
            most->stack_id, bytes, "%s in %llu blocks nobody freed, from %zu site%s%s", total,
            (unsigned long long)blocks, sites, sites == 1 ? "" : "s", also);
}

static void add_implicit(const struct report *r, struct findings *f)
{
    uint64_t bytes = 0, blocks = 0, first_bytes = 0;
    uint32_t sites = 0, first = 0;
    for (uint32_t i = 0; i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        if (!s->stats.implicit_blocks)
            continue;
        bytes += s->stats.implicit_bytes;
        blocks += s->stats.implicit_blocks;
        if (!sites++) {
            first = r->shown[i];
            first_bytes = s->stats.implicit_bytes;
        }
    }
    char total[24], own[24];
    if (sites)
        add(f, "leaked_implicitly", "freed only by a context's destroy or a device reset", first,
            bytes, "%s in %llu blocks from %u site%s%s%s%s",
            bytes_text(bytes, total, sizeof(total)), (unsigned long long)blocks, sites,
            sites == 1 ? "" : "s", sites > 1 ? " (this one " : "",
            sites > 1 ? bytes_text(first_bytes, own, sizeof(own)) : "", sites > 1 ? ")" : "");
}

static void add_fragmentation(const struct report *r, struct findings *f)
{
    struct report_fragmentation frag;
    report_fragmentation(r, &frag);
    char a[24], b[24];
    if (strcmp(frag.verdict, "none") == 0 ||
        (r->event.type == EVENT_OOM && strcmp(frag.verdict, "fragmented") == 0 &&
         !frag.torch_holes))
        return; /* the OOM's own line says it */
    if (strcmp(frag.verdict, "fragmented") == 0)
        add(f, "fragmented", "fragmented", 0, frag.torch_inactive_split,
            "%s of PyTorch's %s reserved lies in %llu holes between live tensors; only "
            "requests that fit reuse them (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "helps)",
            bytes_text(frag.torch_inactive_split, a, sizeof(a)),
            bytes_text(frag.torch_reserved, b, sizeof(b)), (unsigned long long)frag.torch_holes);
    else if (strcmp(frag.verdict, "idle_cache") == 0)
        add(f, "idle_cache", "idle cache", 0, frag.torch_cached,
            "PyTorch keeps %s cached but unused of %s reserved (torch.cuda.empty_cache() "
            "returns it)",
            bytes_text(frag.torch_cached, a, sizeof(a)),
            bytes_text(frag.torch_reserved, b, sizeof(b)));
    else
        add(f, "idle_pool_reserve", "idle pool reserve", 0, frag.pool_idle,
            "stream-ordered pools keep %s unused of %s reserved (cudaMemPoolTrimTo returns it)",
            bytes_text(frag.pool_idle, a, sizeof(a)), bytes_text(frag.pool_reserved, b, sizeof(b)));
}

/* Failed allocations other than the OOM the report is about, or the one
 * the line of the last OOM is about: how many, and the newest's error and
 * line. */
static void add_failures(const struct report *r, struct findings *f)
{
    uint64_t total = r->failures.total;
    if (!total || r->event.type == EVENT_OOM)
        return;
    const struct report_failure *last = RING_ENTRY(r->failures.ring, total);
    if (last->oom && r->last_oom.verdict[0] && last->stack_id == r->last_oom.stack_id &&
        (uint64_t)last->size == r->last_oom.size)
        return; /* the OOM's line (add_last_oom) says it */
    char size[24], error[32];
    snprintf(error, sizeof(error), last->oom ? "out of memory" : "error %d", last->code);
    add(f, "failed", "allocations failed", last->stack_id, last->size,
        "%llu; the last (this one), %s via %s: %s", (unsigned long long)total,
        bytes_text(last->size, size, sizeof(size)), report_api_name(r, last->api), error);
}

/* Held when the program ended: not a verdict against the program, but where
 * its memory went (the weights, a data set): the total and the top sites. */
static void add_held(const struct report *r, struct findings *f)
{
    if (!r->end.ended || !r->held_count)
        return;
    uint64_t bytes = 0, blocks = 0;
    for (size_t i = 0; i < r->held_count; i++) {
        bytes += r->held[i].bytes;
        blocks += r->held[i].blocks;
    }
    char total[24], held[REPORT_CLASS_TEXT + 64];
    add(f, "held_at_end", "held at the end of the program (not leaked)", 0, bytes,
        "%s in %llu blocks from %zu site%s", bytes_text(bytes, total, sizeof(total)),
        (unsigned long long)blocks, r->held_count, r->held_count == 1 ? "" : "s");
    for (size_t i = 0; i < r->held_count && i < HELD_SHOWN; i++) {
        struct report_finding *entry =
            add(f, "held_at_end", "", r->held[i].stack_id, r->held[i].bytes, "%s in %llu blocks%s",
                bytes_text(r->held[i].bytes, total, sizeof(total)),
                (unsigned long long)r->held[i].blocks,
                held_by(r, r->held[i].stack_id, held, sizeof(held)));
        if (entry)
            entry->detail = 1;
    }
}

int report_findings(const struct report *r, struct report_finding *list, int max)
{
    struct findings f = {list, 0, max};
    if (r->event.type == EVENT_OOM)
        add_oom(r, &f);
    add_last_oom(r, &f);
    add_growth(r, &f);
    add_live(r, &f);
    add_implicit(r, &f);
    add_fragmentation(r, &f);
    add_failures(r, &f);
    if (!f.count)
        add(&f, "none", "nothing looks wrong", 0, 0,
            "no site grew, nothing leaked, no allocation failed");
    add_held(r, &f);
    return f.count;
}
