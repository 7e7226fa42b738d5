/* report_text.c - the report a person reads: the findings first, then what
 * grows, leaks and is held, the counters, the largest holders.
 *
 * The summary printed on stderr (report_summary, `brief` below) holds the
 * findings, the top CUMEMTRACE_TOP entries of each section that has any
 * (with their first frames where the entry is a verdict, the site and its
 * callers in one line where it is an inventory; a cache's segments counted
 * only) and where the full report is. The .txt file
 * (report_text) is the same with every entry and every frame. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cuda_errors.h"
#include "frames.h"
#include "kinds.h"
#include "python.h"
#include "report.h"

#define BRIEF_FRAMES 8
/* The summary's context sections (held at the end, the largest holders) show
 * at most this many entries, however many CUMEMTRACE_TOP asks: the findings
 * already name the top of each, and the summary must stay one screen. */
#define BRIEF_CONTEXT_TOP 3

/* How much of a stack an entry shows: every frame, the first BRIEF_FRAMES
 * of them (the summary's verdicts), or the site and its two callers in one
 * line (the summary's inventories: held at the end, largest holders). */
enum { STACK_FULL, STACK_BRIEF, STACK_SITE };

/* One frame: "function+0xoffset at file:line [module+0xoffset]", as much of
 * it as is known; "module+0xoffset" without a symbol, never a bare address
 * when the module is known (addresses change from run to run). */
static void write_frame_text(struct out *out, const struct symbol *s, uintptr_t address)
{
    char function[1024], file[OUTPUT_PATH_MAX], module[1024];
    if (s && s->python) {
        out_printf(out, "%s at %s:%d [python]",
                   output_text(s->function ? s->function : "?", function, sizeof(function)),
                   output_text(s->file ? s->file : "?", file, sizeof(file)), s->line);
        return;
    }
    char name[256];
    if (s && s->function) {
        out_printf(out, "%s+0x%lx",
                   output_text(frames_short_name(s->function, name, sizeof(name)), function,
                               sizeof(function)),
                   (unsigned long)s->function_offset);
        if (s->file)
            out_printf(out, " at %s:%d", output_text(s->file, file, sizeof(file)), s->line);
        if (s->module)
            out_printf(out, " [%s+0x%lx]",
                       output_text(output_base_name(s->module), module, sizeof(module)),
                       (unsigned long)s->module_offset);
    } else if (s && s->module) {
        out_printf(out, "%s+0x%lx",
                   output_text(output_base_name(s->module), module, sizeof(module)),
                   (unsigned long)s->module_offset);
    } else {
        out_printf(out, "0x%lx", (unsigned long)address);
    }
}

static const struct stack *stack_of(const struct report *r, uint32_t stack_id)
{
    return stack_id >= 1 && stack_id <= r->stack_count ? &r->stacks[stack_id - 1] : NULL;
}

static const struct symbol *symbol_at(const struct report *r, uintptr_t address)
{
    long i = report_frame_index(r, address);
    return i >= 0 ? &r->symbols[i] : NULL;
}

/* The site in one line (frames_site_line), "at file:line in function",
 * with at least `callers` of its callers: an inventory's line names two,
 * where a site in a helper needs them to tell it from the helper's other
 * uses. */
static void write_site(const struct report *r, struct out *out, uint32_t stack_id, int callers)
{
    char site[OUTPUT_PATH_MAX + 1024], shown[sizeof(site) * 4];
    frames_site_line(r, stack_id, callers, site, sizeof(site));
    out_printf(out, "      at %s\n", output_text(site, shown, sizeof(shown)));
}

static const char *const hidden_words[ORIGIN_COUNT] = {
    [ORIGIN_CUDA] = "CUDA",
    [ORIGIN_FRAMEWORK] = "framework",
    [ORIGIN_INTERPRETER] = "interpreter",
    [ORIGIN_SYSTEM] = "runtime",
    [ORIGIN_STARTUP] = "start-up",
    [ORIGIN_LIBRARY] = "library",
};

/* "(5 frames hidden: interpreter, start-up)": what the frames left out were. */
static void write_hidden_note(struct out *out, uint32_t hidden, const int *origins_hidden)
{
    out_printf(out, "      (%u frame%s hidden:", hidden, hidden == 1 ? "" : "s");
    for (int o = 0, first = 1; o < ORIGIN_COUNT; o++) {
        if (!origins_hidden[o] || !hidden_words[o])
            continue;
        out_printf(out, "%s %s", first ? "" : ",", hidden_words[o]);
        first = 0;
    }
    out_str(out, ")\n");
}

/* The site first, then the frames a person needs (frames.h: start-up,
 * runtime, interpreter and framework frames hidden unless
 * CUMEMTRACE_ALL_FRAMES), numbered as in the whole stack; `detail` (STACK_*)
 * says how many. A marker frame (line 0: a thread that runs no Python
 * borrows the main thread's frames after it) is no frame: a note says whose
 * frames follow. */
static void write_stack(const struct report *r, struct out *out, uint32_t stack_id, int detail)
{
    const struct stack *s = stack_of(r, stack_id);
    if (!s) {
        out_str(out, "      (no stack: out of memory in the tracer)\n");
        return;
    }
    if (s->depth == 0) {
        out_str(out,
                "      (no stack recorded: CUMEMTRACE_DEPTH=0 or below CUMEMTRACE_MIN_SIZE)\n");
        return;
    }
    const uintptr_t *frames = r->frames + s->first_frame;
    struct frame_view view;
    frames_view(r, s, &view);
    write_site(r, out, stack_id, detail == STACK_SITE ? 2 : 0);
    if (detail == STACK_SITE)
        return;
    int brief = detail == STACK_BRIEF;
    uint32_t written = 0, hidden = 0, unwritten = 0;
    int origins_hidden[ORIGIN_COUNT] = {0};
    for (uint32_t i = 0; i < s->depth; i++) {
        if (frames_marker(r, frames[i])) {
            if (!brief || written < BRIEF_FRAMES)
                out_str(out, "      -- this thread runs no Python; the main thread's frames at "
                             "that moment:\n");
        } else if (frames_left_out(r, s, i, &view)) {
            hidden++;
            origins_hidden[frames_origin(r, frames[i])] = 1;
        } else if (brief && written == BRIEF_FRAMES) {
            unwritten++;
        } else {
            out_printf(out, "      #%-2u ", i);
            write_frame_text(out, symbol_at(r, frames[i]), frames[i]);
            out_str(out, "\n");
            written++;
        }
    }
    if (unwritten)
        out_printf(out, "      ... %u more frames in the full report\n", unwritten);
    if (hidden)
        write_hidden_note(out, hidden, origins_hidden);
}

static void write_counter_row(struct out *out, const char *label, const struct counters *c)
{
    char live[24], peak[24], total[24];
    format_bytes(c->bytes_current, live, sizeof(live));
    format_bytes(c->bytes_peak, peak, sizeof(peak));
    format_bytes(c->bytes_allocated, total, sizeof(total));
    out_printf(out, "    %-18s %10s %10s %10s %8llu %8llu %8llu %6llu %5llu\n", label, live, peak,
               total, (unsigned long long)c->blocks_allocated, (unsigned long long)c->blocks_freed,
               (unsigned long long)c->implicit_blocks, (unsigned long long)c->failures,
               (unsigned long long)c->ooms);
}

/* " [nccl: communication buffers]" for a stack allocated through a library. */
static void write_label(const struct report *r, struct out *out, uint32_t stack_id)
{
    const char *label = report_stack_label(r, stack_id);
    if (label)
        out_printf(out, " [%s%s]", label,
                   strcmp(label, "nccl") == 0 ? ": communication buffers" : "");
}

static void write_pool(struct out *out, const char *label, const struct pool_figures *figures)
{
    char reserved[24], used[24], idle[24];
    format_bytes(figures->reserved, reserved, sizeof(reserved));
    format_bytes(figures->used, used, sizeof(used));
    format_bytes(figures->reserved > figures->used ? figures->reserved - figures->used : 0, idle,
                 sizeof(idle));
    out_printf(out,
               "    %s: reserved %s, used %s; %s reserved but unused (cudaMemPoolTrimTo "
               "releases it)\n",
               label, reserved, used, idle);
}

/* PyTorch's own counters for one device, next to the traced figures. */
static void write_torch_device(const struct report *r, struct out *out, int device)
{
    if (!r->torch.valid || device < 0 || device >= r->torch.device_count)
        return;
    const uint64_t *t = r->torch.figures[device];
    if (t[TORCH_RESERVED] == TORCH_MISSING || t[TORCH_RESERVED_PEAK] == 0)
        return;
    char when[256];
    if (r->torch.now && r->torch.read == TORCH_READ_EXIT)
        snprintf(when, sizeof(when), "at Python's exit");
    else if (r->torch.now && r->torch.read == TORCH_READ_OOM)
        snprintf(when, sizeof(when), "at the OOM, in PyTorch's out-of-memory observer");
    else if (r->torch.now)
        snprintf(when, sizeof(when), "at this report");
    else
        snprintf(when, sizeof(when), "%.1f s before this report: %s",
                 report_torch_age_ms(r) / 1000.0, r->torch.why_not ? r->torch.why_not : "");
    out_printf(out, "    PyTorch (torch.cuda.memory_stats, %s):", when);
    for (int i = 0; i < TORCH_FIGURE_COUNT; i++) {
        if (t[i] == TORCH_MISSING)
            continue;
        out_printf(out, "%s %s ", i ? ";" : "", torch_figure_name(i));
        if (i == TORCH_ALLOC_RETRIES || i == TORCH_OOMS || i == TORCH_INACTIVE_SPLIT_BLOCKS)
            out_printf(out, "%llu", (unsigned long long)t[i]);
        else
            out_bytes(out, t[i]);
    }
    out_str(out, "\n");
}

static const struct {
    const char *framework, *blocks, *empty_cache;
} cache_words[CACHE_KINDS] = {
    {"PyTorch", "tensors", "torch.cuda.empty_cache()"},
    {"CuPy", "arrays", "cupy.get_default_memory_pool().free_all_blocks()"},
    {"JAX", "arrays", "nothing short of deleting the arrays"},
};

/* Each framework's cache on one device (caches.c): what its live blocks
 * hold, and where the rest of what it reserved lies unused. */
static void write_caches_device(const struct report *r, struct out *out, int device)
{
    for (int i = 0; i < r->cache_count; i++) {
        const struct report_cache *c = &r->caches[i];
        int k = c->kind - KIND_TORCH_TENSOR;
        if (c->device != device || k < 0 || k >= CACHE_KINDS)
            continue;
        const struct report_cache_view *seen = &r->cache_views[k];
        out_printf(out, "    %s's cache%s: reserved ", cache_words[k].framework,
                   report_caches_at_end(r) ? " (at the program's end)" : "");
        out_bytes(out, c->reserved);
        out_printf(out, " in %llu segment%s", (unsigned long long)c->segments,
                   c->segments == 1 ? "" : "s");
        if (seen->view != CACHE_BLOCKS) {
            out_printf(out, "; its %s are not traced one by one%s%s\n", cache_words[k].blocks,
                       seen->why[0] ? ": " : "", seen->why);
            continue;
        }
        out_printf(out, "; %s ", cache_words[k].blocks);
        out_bytes(out, c->block_bytes);
        out_printf(out, " in %llu block%s; unused ", (unsigned long long)c->blocks,
                   c->blocks == 1 ? "" : "s");
        out_bytes(out, c->unused);
        out_str(out, "\n");
        if (c->hole_bytes) {
            out_str(out, "      ");
            out_bytes(out, c->hole_bytes);
            out_printf(out, " of it in %llu hole%s between live %s (largest ",
                       (unsigned long long)c->holes, c->holes == 1 ? "" : "s",
                       cache_words[k].blocks);
            out_bytes(out, c->largest_hole);
            out_str(out, "): only requests that fit reuse them\n");
        }
        if (c->releasable) {
            out_str(out, "      ");
            out_bytes(out, c->releasable);
            out_printf(out, " of it in segments with no live block: %s returns it\n",
                       cache_words[k].empty_cache);
        }
    }
}

static void write_counters(const struct report *r, struct out *out)
{
    out_printf(out, "  %-20s %10s %10s %10s %8s %8s %8s %6s %5s\n", "Memory by device", "live",
               "peak", "allocated", "allocs", "frees", "implicit", "failed", "ooms");
    for (int d = 0; d < r->device_count; d++) {
        const struct report_device *dev = &r->devices[d];
        if (dev->slot == COUNTER_NO_DEVICE)
            out_str(out, "  device unknown\n");
        else
            out_printf(out, "  device %d\n", dev->slot);
        const struct counters *all = report_counters(r, dev->slot, COUNTER_DEVICE_MEMORY);
        int summed = 0;
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            const struct counters *c = report_counters(r, dev->slot, kind);
            if (!c->blocks_allocated && !c->failures)
                continue;
            write_counter_row(out, kind_name(kind), c);
            summed += kind_uses_device_memory(kind);
        }
        /* The sum of the kinds that occupy device memory, when it is a sum:
         * with one such kind it would repeat that kind's row. */
        if (summed > 1)
            write_counter_row(out, "all device memory", all);
        if (dev->has_memory_info) {
            char free_text[24], total_text[24], tracked[24], untracked[24];
            uint64_t used = dev->total - dev->free;
            uint64_t mine = all->bytes_current;
            format_bytes(dev->free, free_text, sizeof(free_text));
            format_bytes(dev->total, total_text, sizeof(total_text));
            format_bytes(mine, tracked, sizeof(tracked));
            format_bytes(used > mine ? used - mine : 0, untracked, sizeof(untracked));
            out_printf(out,
                       "    driver: %s free of %s; tracked %s; untracked %s "
                       "(contexts, libraries' own memory, other processes)\n",
                       free_text, total_text, tracked, untracked);
        } else if (dev->slot != COUNTER_NO_DEVICE) {
            out_str(out, "    driver: free/total not available (no live context at this point)\n");
        }
        if (dev->has_pool)
            write_pool(out, "default stream-ordered pool", &dev->pool);
        for (int i = 0; i < r->pool_count; i++) {
            if (r->pools[i].device != dev->slot ||
                r->pools[i].figures.reserved == POOL_FIGURE_UNKNOWN)
                continue;
            char label[48];
            snprintf(label, sizeof(label), "pool 0x%llx", (unsigned long long)r->pools[i].handle);
            write_pool(out, label, &r->pools[i].figures);
        }
        write_torch_device(r, out, dev->slot);
        write_caches_device(r, out, dev->slot);
    }
}

/* Whether a group of live blocks goes in the section of a cache's segments
 * (`segments`) or the other: not at all if it was held when the program
 * ended, at exit (write_held lists it). */
static int in_section(const struct report *r, const struct report_group *g, int segments)
{
    if (report_cache_segment(r, g->stack_id))
        return segments;
    return !segments && !(g->held_at_end && strcmp(r->reason, "exit") == 0);
}

static void write_groups(const struct report *r, struct out *out, int brief, int segments,
                         const char *title)
{
    uint64_t bytes = 0, blocks = 0;
    size_t sites = 0;
    for (size_t i = 0; i < r->group_count; i++) {
        if (!in_section(r, &r->groups[i], segments))
            continue;
        bytes += r->groups[i].bytes;
        blocks += r->groups[i].blocks;
        sites++;
    }
    if (!sites)
        return;
    out_printf(out, "\n  %s: ", title);
    out_bytes(out, bytes);
    out_printf(out, " in %llu block%s from %zu allocation site%s\n", (unsigned long long)blocks,
               blocks == 1 ? "" : "s", sites, sites == 1 ? "" : "s");
    /* The summary lists no segment: the findings and the tensors they hold
     * say what matters; the count is here, the list in the full report. */
    size_t limit = brief && segments                         ? 0
                   : brief && sites > (size_t)r->options.top ? (size_t)r->options.top
                                                             : sites;
    for (size_t i = 0, n = 0; i < r->group_count && n < limit; i++) {
        const struct report_group *g = &r->groups[i];
        if (!in_section(r, g, segments))
            continue;
        out_printf(out, "   #%zu ", ++n);
        out_bytes(out, g->bytes);
        out_printf(out, " in %llu %s block%s via %s", (unsigned long long)g->blocks,
                   kind_name(g->kind), g->blocks == 1 ? "" : "s", report_api_name(r, g->api));
        if (g->device >= 0)
            out_printf(out, " on device %d", g->device);
        write_label(r, out, g->stack_id);
        out_printf(out, ", largest ");
        out_bytes(out, g->largest);
        out_printf(out, ", oldest from %.1f s\n", g->oldest_ms / 1000.0);
        write_stack(r, out, g->stack_id, brief ? STACK_BRIEF : STACK_FULL);
    }
    if (limit < sites)
        out_printf(out, "   ... %zu %ssite%s in the full report%s\n", sites - limit,
                   limit ? "more " : "", sites - limit == 1 ? "" : "s",
                   limit ? " (CUMEMTRACE_TOP)" : "");
}

/* What the first groups section lists: at exit, what nobody freed (not
 * what the program held at its end: write_held); else what is live. */
static const char *live_title(const struct report *r)
{
    if (strcmp(r->reason, "exit") != 0)
        return "Live now";
    return r->end.ended ? "Leaked (allocated after the program ended, by the "
                          "interpreter's teardown, and never freed)"
                        : "Leaked (live at exit)";
}

/* Who holds stack_id's tensors: a line per path (report_holders). */
static void write_holders(const struct report *r, struct out *out, uint32_t stack_id)
{
    const struct report_holders *k = &r->classes.held_by;
    for (int i = 0; i < k->count; i++) {
        const struct report_holder_path *p = &k->paths[i];
        if (p->stack_id != stack_id)
            continue;
        char path[REPORT_CLASS_TEXT * 4];
        out_printf(out, "      held by %s (", output_text(p->path, path, sizeof(path)));
        if (p->container[0])
            out_printf(out, "%s, ", p->container);
        out_printf(out, "%llu %s, ", (unsigned long long)p->tensors, report_holder_noun(p));
        out_bytes(out, p->bytes);
        out_str(out, ")\n");
    }
}

/* Held when the program ended: memory kept to the end on purpose (model
 * weights, a data set), or by a global that grew all along (then it is
 * growing, below). Not a leak, whether the interpreter's teardown freed it
 * or left it to the process's exit. */
static void write_held(const struct report *r, struct out *out, int brief)
{
    if (!r->end.ended || !r->held_count)
        return;
    uint64_t bytes = 0, blocks = 0, freed = 0;
    for (size_t i = 0; i < r->held_count; i++) {
        bytes += r->held[i].bytes;
        blocks += r->held[i].blocks;
        freed += r->held[i].freed_at_teardown;
    }
    out_str(out, "\n  Held at the end of the program (not leaked): ");
    out_bytes(out, bytes);
    out_printf(out,
               " in %llu block%s from %zu allocation site%s; the interpreter's teardown "
               "freed ",
               (unsigned long long)blocks, blocks == 1 ? "" : "s", r->held_count,
               r->held_count == 1 ? "" : "s");
    out_bytes(out, freed);
    out_str(out, " of it, the process's exit the rest\n");
    size_t top = (size_t)r->options.top;
    if (brief && top > BRIEF_CONTEXT_TOP)
        top = BRIEF_CONTEXT_TOP;
    size_t limit = brief && r->held_count > top ? top : r->held_count;
    for (size_t i = 0; i < limit; i++) {
        const struct report_group *g = &r->held[i];
        out_printf(out, "   #%zu ", i + 1);
        out_bytes(out, g->bytes);
        out_printf(out, " in %llu %s block%s via %s", (unsigned long long)g->blocks,
                   kind_name(g->kind), g->blocks == 1 ? "" : "s", report_api_name(r, g->api));
        if (g->device >= 0)
            out_printf(out, " on device %d", g->device);
        out_str(out, "; ");
        out_bytes(out, g->freed_at_teardown);
        out_str(out, " freed by the teardown\n");
        write_holders(r, out, g->stack_id);
        write_stack(r, out, g->stack_id, brief ? STACK_SITE : STACK_FULL);
    }
    if (limit < r->held_count)
        out_printf(out, "   ... %zu more sites in the full report (CUMEMTRACE_TOP)\n",
                   r->held_count - limit);
}

static void write_growing(const struct report *r, struct out *out, int brief)
{
    if (!r->growing_count)
        return;
    int marks = r->growth.mode == GROWTH_MARKS;
    out_printf(out,
               "\n  Growing (leak suspects: what the site kept rose all along, over %u "
               "observations, %s):\n",
               r->growth.samples, marks ? "at the program's marks" : "spread over its work");
    uint32_t top = (uint32_t)r->options.top;
    uint32_t limit = brief && r->growing_count > top ? top : r->growing_count;
    for (uint32_t i = 0; i < limit; i++) {
        const struct stack *s = &r->stacks[r->growing[i] - 1];
        const struct stack_growth *g = &s->growth;
        char rates[96], first[24], now[24];
        report_growth_rates(r, g, 0, rates, sizeof(rates));
        format_bytes(g->first_bytes, first, sizeof(first));
        format_bytes(report_growth_bytes(r, s), now, sizeof(now));
        out_printf(out, "   #%u %s: from %s at %.1f s to %s %s; rose at %u of %u observations\n",
                   i + 1, rates, first, g->first_ms / 1000.0, now,
                   r->growth.ended ? "when the program ended" : "now", g->rises,
                   r->growth.samples - g->first_sample);
        write_holders(r, out, r->growing[i]);
        write_stack(r, out, r->growing[i], brief ? STACK_BRIEF : STACK_FULL);
    }
    if (limit < r->growing_count)
        out_printf(out, "   ... %u more in the full report (CUMEMTRACE_TOP)\n",
                   r->growing_count - limit);
}

/* Sites that grew as a leak does, then were freed at the run's last samples
 * (a list of outputs freed when its function returned): what reached the peak. */
static void write_released(const struct report *r, struct out *out, int brief)
{
    if (!r->released_count)
        return;
    out_str(out,
            "\n  Grew, then freed near the end (peak-memory suspects; not held at the end):\n");
    uint32_t top = (uint32_t)r->options.top;
    uint32_t limit = brief && r->released_count > top ? top : r->released_count;
    for (uint32_t i = 0; i < limit; i++) {
        const struct stack *s = &r->stacks[r->released[i] - 1];
        const struct stack_growth *g = &s->growth;
        char peak[24], rates[96], first[24], now[24];
        format_bytes(g->peak_bytes, peak, sizeof(peak));
        report_growth_rates(r, g, 1, rates, sizeof(rates));
        format_bytes(g->first_bytes, first, sizeof(first));
        format_bytes(report_growth_bytes(r, s), now, sizeof(now));
        out_printf(out,
                   "   #%u peak %s at %.1f s, grew %s, from %s at %.1f s; %s %s; "
                   "rose at %u of %u observations to the peak\n",
                   i + 1, peak, g->peak_ms / 1000.0, rates, first, g->first_ms / 1000.0, now,
                   r->growth.ended ? "when the program ended" : "now", g->peak_rises,
                   g->peak_sample - g->first_sample);
        write_stack(r, out, r->released[i], brief ? STACK_BRIEF : STACK_FULL);
    }
    if (limit < r->released_count)
        out_printf(out, "   ... %u more in the full report (CUMEMTRACE_TOP)\n",
                   r->released_count - limit);
}

static void write_fragmentation(const struct report *r, struct out *out, int brief)
{
    struct report_fragmentation f;
    report_fragmentation(r, &f);
    if (strcmp(f.verdict, "none") == 0 && (brief || (!f.vmm_unmapped && !f.torch_cached)))
        return;
    char a[24], b[24], c[24];
    out_str(out, "\n  Fragmentation and idle reserves: ");
    if (strcmp(f.verdict, "none") == 0)
        out_str(out, "nothing significant\n");
    else
        out_printf(out, "%s: %s\n",
                   strcmp(f.verdict, "fragmented") == 0   ? "FRAGMENTED"
                   : strcmp(f.verdict, "idle_cache") == 0 ? "idle cache"
                                                          : "idle pool reserve",
                   f.reason);
    if (f.has_torch) {
        format_bytes(f.torch_cached, a, sizeof(a));
        format_bytes(f.torch_reserved, b, sizeof(b));
        format_bytes(f.torch_inactive_split, c, sizeof(c));
        out_printf(out,
                   "    PyTorch: %s cached but unused of %s reserved; %s of it in %llu "
                   "holes between live tensors\n",
                   a, b, c, (unsigned long long)f.torch_holes);
    }
    if (f.pool_reserved) {
        format_bytes(f.pool_idle, a, sizeof(a));
        format_bytes(f.pool_reserved, b, sizeof(b));
        format_bytes(f.pool_used, c, sizeof(c));
        out_printf(out, "    default pools: %s idle of %s reserved (%s used)\n", a, b, c);
    }
    if (f.vmm_unmapped) {
        format_bytes(f.vmm_unmapped, a, sizeof(a));
        format_bytes(f.vmm_reserved, b, sizeof(b));
        out_printf(out,
                   "    VMM: %s of %s reserved address space not mapped (address space, "
                   "not memory)\n",
                   a, b);
    }
}

static void write_implicit(const struct report *r, struct out *out, int brief)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < r->shown_count; i++)
        if (r->stacks[r->shown[i] - 1].stats.implicit_blocks)
            count++;
    if (!count)
        return;
    out_printf(out,
               "\n  Leaked (freed only implicitly, by context destroy or device reset): "
               "%u allocation site%s\n",
               count, count == 1 ? "" : "s");
    uint32_t written = 0;
    uint32_t top = (uint32_t)r->options.top;
    for (uint32_t i = 0; i < r->shown_count && (!brief || written < top); i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        if (!s->stats.implicit_blocks)
            continue;
        out_printf(out, "   #%u ", ++written);
        out_bytes(out, s->stats.implicit_bytes);
        out_printf(out, " in %llu blocks\n", (unsigned long long)s->stats.implicit_blocks);
        write_stack(r, out, r->shown[i], brief ? STACK_BRIEF : STACK_FULL);
    }
}

static void write_peaks(const struct report *r, struct out *out, int brief)
{
    uint32_t first = 0; /* the first entry: cache segments are listed apart */
    while (first < r->shown_count && report_cache_segment(r, r->by_peak[first]))
        first++;
    if (first == r->shown_count || r->stacks[r->by_peak[first] - 1].stats.peak_live_bytes == 0)
        return;
    out_str(out, "\n  Largest holders during the run (highest live bytes per allocation site):\n");
    uint32_t top = (uint32_t)r->options.top;
    if (brief && top > BRIEF_CONTEXT_TOP)
        top = BRIEF_CONTEXT_TOP;
    uint32_t limit = brief && r->shown_count > top ? top : r->shown_count;
    for (uint32_t i = 0, n = 0; i < r->shown_count && n < limit; i++) {
        const struct stack *stack = &r->stacks[r->by_peak[i] - 1];
        const struct stack_stats *s = &stack->stats;
        if (s->peak_live_bytes == 0)
            break;
        if (report_cache_segment(r, r->by_peak[i]))
            continue;
        out_printf(out, "   #%u peak ", ++n);
        out_bytes(out, s->peak_live_bytes);
        int kind, api;
        if (stack_first_use(stack, &kind, &api))
            out_printf(out, " of %s via %s", kind_name(kind), report_api_name(r, api));
        out_str(out, ", now ");
        out_bytes(out, s->live_bytes);
        out_printf(out, "; %llu allocation%s, ", (unsigned long long)s->allocations,
                   s->allocations == 1 ? "" : "s");
        out_bytes(out, s->allocated_bytes);
        out_str(out, " in total");
        write_label(r, out, r->by_peak[i]);
        out_str(out, "\n");
        write_stack(r, out, r->by_peak[i], brief ? STACK_SITE : STACK_FULL);
    }
}

/* "error 35 (cudaErrorInsufficientDriver)": the number alone means little,
 * and the same number means different things to the runtime and the driver. */
static void write_error(const struct report *r, struct out *out, int api, int code)
{
    const char *name = cuda_error_name(report_api_name(r, api), code);
    out_printf(out, "error %d", code);
    if (name)
        out_printf(out, " (%s)", name);
}

static void write_failures(const struct report *r, struct out *out, int brief)
{
    uint64_t total = r->failures.total;
    if (!total)
        return;
    out_printf(out, "\n  Failed allocations: %llu\n", (unsigned long long)total);
    uint64_t first = RING_FIRST(r->failures.ring, total);
    if (brief && total - first >= 3)
        first = total - 2; /* the newest three */
    for (uint64_t n = total; n >= first; n--) {
        const struct report_failure *f = RING_ENTRY(r->failures.ring, n);
        out_str(out, "   ");
        out_bytes(out, f->size);
        out_printf(out, " %s via %s", kind_name(f->kind), report_api_name(r, f->api));
        if (f->device >= 0)
            out_printf(out, " on device %d", f->device);
        out_str(out, " failed with ");
        write_error(r, out, f->api, f->code);
        out_printf(out, "%s at %.1f s\n", f->oom ? " (out of memory)" : "", f->time_ms / 1000.0);
        write_stack(r, out, f->stack_id, brief ? STACK_BRIEF : STACK_FULL);
    }
    /* The one failure a newcomer meets first: no GPU, or no driver for it. */
    const struct report_failure *last = &r->failures.ring[(total - 1) % FAILURE_RING];
    if (cuda_error_no_driver(report_api_name(r, last->api), last->code))
        out_str(out, "   CUDA found no usable driver or GPU here. Without a GPU, the CUDA "
                     "simulator built with the tests stands in: LD_LIBRARY_PATH=build/sim\n");
}

static int any_frame_left_out(const struct report *r)
{
    for (uint32_t i = 0; i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        struct frame_view view;
        frames_view(r, s, &view);
        for (uint32_t f = 0; f < s->depth; f++)
            if (frames_left_out(r, s, f, &view))
                return 1;
    }
    return 0;
}

static void write_lost(const struct report *r, struct out *out)
{
    static const char *what[LOST_COUNT] = {
        [LOST_REENTRY] = "calls made from inside the tracer",
        [LOST_NO_MEMORY] = "events dropped: the tracer ran out of memory",
        [LOST_UNRESOLVED] = "calls whose real function could not be found",
        [LOST_UNKNOWN_FREE] = "frees of blocks never seen allocated",
        [LOST_MISSED_FREE] = "addresses reused while still recorded (a free was missed)",
        [LOST_UNWRAPPED] = "lookups passed through unwrapped (unsupported version)",
    };
    for (int i = 0; i < LOST_COUNT; i++)
        if (r->lost[i])
            out_printf(out, "  note: %llu %s\n", (unsigned long long)r->lost[i], what[i]);
    if (any_frame_left_out(r))
        out_str(out, "  note: frames of start-up, the runtimes, the interpreter and frameworks, "
                     "and CUDA's inner ones, are hidden; CUMEMTRACE_ALL_FRAMES=1 (or cumemtrace "
                     "report --all-frames) shows them\n");
    if (r->self_time_ns >= 0)
        out_printf(out,
                   "  note: the tracer's own time in CUDA calls: %.3f ms (CUMEMTRACE_SELF_TIME)\n",
                   r->self_time_ns / 1e6);
}

static const char *retry_text[] = {
    [RETRY_NONE] = "none seen",
    [RETRY_PENDING] = "not yet known (a caching allocator may free memory and ask again)",
    [RETRY_SUCCEEDED] = "the same request was made again and succeeded (a caching allocator "
                        "freed memory first)",
    [RETRY_FAILED] = "the same request was made again and failed too",
};

/* A framework gave up: why, in its cache's terms (report_cache_oom). */
static void write_cache_oom(const struct report *r, struct out *out)
{
    const struct report_event *e = &r->event;
    struct report_cache_oom why;
    const char *verdict = report_cache_oom(r, &why);
    const struct report_cache *c = why.cache;
    int k = e->kind - KIND_TORCH_TENSOR;
    const char *framework = cache_words[k].framework, *blocks = cache_words[k].blocks;
    char a[24], b[24], f[24], t[24], h[24], n[24];
    format_bytes(c->unused, a, sizeof(a));
    format_bytes(c->reserved, b, sizeof(b));
    format_bytes(e->free, f, sizeof(f));
    format_bytes(e->total, t, sizeof(t));
    format_bytes(c->largest_hole, h, sizeof(h));
    format_bytes(e->size, n, sizeof(n));
    if (strcmp(verdict, "cache_fragmented") == 0) {
        char hole_why[320];
        out_printf(out,
                   "  verdict: cache fragmented: %s held %s of its %s reserved unused, and "
                   "the driver had %s free: more than the %s asked for, but in %llu holes "
                   "between live %s\n",
                   framework, a, b, f, n, (unsigned long long)c->holes, blocks);
        out_printf(out, "  why no hole served: %s\n",
                   report_hole_why(r, c, hole_why, sizeof(hole_why)));
        if (k == 0)
            out_str(out, "  what helps: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the "
                         "cache grows its segments in place instead of needing one hole); "
                         "torch.cuda.empty_cache() cannot: every such segment holds a live "
                         "tensor\n");
    } else if (strcmp(verdict, "cache_idle") == 0) {
        format_bytes(c->releasable, a, sizeof(a));
        out_printf(out,
                   "  verdict: cache idle: %s keeps %s in segments with no live block, "
                   "enough with the driver's %s free for the %s asked for: %s returns "
                   "it\n",
                   framework, a, f, n, cache_words[k].empty_cache);
    } else if (strcmp(verdict, "others_hold") == 0) {
        format_bytes(why.others, a, sizeof(a));
        format_bytes(c->block_bytes, h, sizeof(h));
        out_printf(out,
                   "  verdict: others hold it: %s of the device's %s is held outside %s's "
                   "cache (other processes, contexts, libraries, this process's other "
                   "allocations), against %s in its %s; the driver had %s free for the %s "
                   "asked for\n",
                   a, t, framework, h, blocks, f, n);
    } else {
        format_bytes(c->block_bytes, b, sizeof(b));
        out_printf(out,
                   "  verdict: %s exhausted the device: live %s hold %s of %s; the %s "
                   "%s's cache holds unused and the %s free are less than the %s asked "
                   "for\n",
                   blocks, blocks, b, t, a, framework, f, n);
    }
}

/* "parameters 1.2 GiB, gradients 1.2 GiB, optimizer state 2.4 GiB, the rest
 * 3.0 GiB": the split of PyTorch's tensors in one line. */
static void write_class_split(const struct report *r, struct out *out)
{
    static const char *const words[REPORT_CLASSES] = {"parameters", "gradients", "optimizer state",
                                                      "the rest"};
    for (int c = 0; c < REPORT_CLASSES; c++) {
        out_printf(out, "%s%s ", c ? ", " : "", words[c]);
        out_bytes(out, r->classes.bytes[c]);
    }
}

/* The OOM's line: what the tensors were at that moment, and the rest's
 * largest site. */
static void write_class_oom(const struct report *r, struct out *out, int brief)
{
    const struct report_classes *k = &r->classes;
    if (!k->known) {
        out_printf(out, "  at OOM: what the tensors are is not known: %s\n", k->why);
        return;
    }
    out_str(out, "  at OOM: ");
    write_class_split(r, out);
    if (k->site_count) {
        out_str(out, ", of which ");
        out_bytes(out, k->sites[0].bytes);
        out_str(out, " from the site below\n");
        write_stack(r, out, k->sites[0].stack_id, brief ? STACK_SITE : STACK_BRIEF);
    } else {
        out_str(out, "\n");
    }
}

/* What PyTorch's tensors are: the split, the parameters holding the most
 * (with their gradients and state), and the rest by site. */
static void write_classes(const struct report *r, struct out *out, int brief)
{
    const struct report_classes *k = &r->classes;
    if (!k->known) {
        if (r->cache_count == 0) /* no framework's cache: no tensors to class */
            return;
        out_printf(out, "\n  What the tensors are: not known: %s\n", k->why);
        return;
    }
    out_str(out, "\n  What the tensors are");
    if (r->end.ended && strcmp(r->reason, "exit") == 0)
        out_str(out, " (at the program's end)");
    out_printf(out, ", from %u module%s and %u optimizer%s: ", k->modules,
               k->modules == 1 ? "" : "s", k->optimizers, k->optimizers == 1 ? "" : "s");
    write_class_split(r, out);
    out_str(out, "\n");
    int holders = brief && k->holder_count > 3 ? 3 : k->holder_count;
    if (holders)
        out_str(out, "    parameters holding the most (itself; its gradient; its optimizer "
                     "state):\n");
    for (int i = 0; i < holders; i++) {
        const struct report_class_holder *h = &k->holders[i];
        char name[REPORT_CLASS_TEXT * 4];
        out_printf(out, "     %s: ", output_text(h->name, name, sizeof(name)));
        for (int c = 0; c < CLASS_REST; c++) {
            out_str(out, c ? "; " : "");
            out_bytes(out, h->bytes[c]);
        }
        out_str(out, "\n");
    }
    const struct report_holders *h = &k->held_by;
    if (!h->known)
        out_printf(out, "    who holds them: not known: %s\n", h->why);
    else if (h->cut[0])
        out_printf(out,
                   "    who holds them: the walk from Python's roots was cut short %s "
                   "(%llu objects, %u ms): what it reached is named\n",
                   h->cut, (unsigned long long)h->objects, h->ms);
    int sites = brief && k->site_count > 1 ? 1 : k->site_count;
    for (int i = 0; i < sites; i++) {
        out_printf(out, "    the rest, #%d: ", i + 1);
        out_bytes(out, k->sites[i].bytes);
        out_printf(out, " in %llu tensor%s\n", (unsigned long long)k->sites[i].blocks,
                   k->sites[i].blocks == 1 ? "" : "s");
        write_stack(r, out, k->sites[i].stack_id, brief ? STACK_SITE : STACK_BRIEF);
    }
}

static void write_event(const struct report *r, struct out *out, int brief)
{
    const struct report_event *e = &r->event;
    if (e->type == EVENT_SIGNAL)
        out_printf(out, "  requested by signal %d\n", e->signal);
    if (e->type == EVENT_CRASH)
        out_printf(out, "  the process received signal %d (%s); %s\n", e->signal,
                   strsignal(e->signal),
                   e->lock && strcmp(e->lock, "taken") == 0
                       ? "state read under the tracer's lock"
                       : "state read without the tracer's lock (another thread held it): "
                         "counts may be off by the operations in flight");
    if (e->type != EVENT_OOM)
        return;
    out_str(out, "\n  OUT OF MEMORY: ");
    if (kind_in_cache(e->kind)) {
        out_printf(out, "%s's allocator gave up on ",
                   cache_words[e->kind - KIND_TORCH_TENSOR].framework);
        out_bytes(out, e->size);
        out_printf(out, " on device %d, after freeing its cache and asking again\n", e->device);
    } else {
        out_bytes(out, e->size);
        out_printf(out, " of %s memory via %s on device %d failed (", kind_name(e->kind),
                   report_api_name(r, e->api), e->device);
        write_error(r, out, e->api, e->code);
        out_str(out, ")\n");
    }
    if (e->has_memory_info && kind_in_cache(e->kind)) {
        write_cache_oom(r, out);
    } else if (e->has_memory_info) {
        char free_text[24], total_text[24], size_text[24];
        format_bytes(e->free, free_text, sizeof(free_text));
        format_bytes(e->total, total_text, sizeof(total_text));
        format_bytes(e->size, size_text, sizeof(size_text));
        if (e->free < e->size)
            out_printf(out,
                       "  verdict: exhausted: the driver had %s free of %s, less than the "
                       "%s asked for\n",
                       free_text, total_text, size_text);
        else
            out_printf(out,
                       "  verdict: fragmented: the driver had %s free of %s, more than the "
                       "%s asked for, but no free range large enough\n",
                       free_text, total_text, size_text);
    } else {
        out_str(out, "  verdict: unknown (the driver's free memory could not be read)\n");
    }
    if (kind_in_cache(e->kind) && e->kind == KIND_TORCH_TENSOR)
        write_class_oom(r, out, brief);
    out_printf(out, "  retry: %s\n", retry_text[e->retry]);
    out_str(out, "  the failing call:\n");
    write_stack(r, out, e->stack_id, brief ? STACK_BRIEF : STACK_FULL);
}

/* The findings (findings.c), one line each: "- LABEL at SITE: TEXT"; the
 * sites of a finding's detail lines indented under it. */
static void write_findings(const struct report *r, struct out *out)
{
    struct report_finding findings[REPORT_FINDINGS_MAX];
    int count = report_findings(r, findings, REPORT_FINDINGS_MAX);
    out_str(out, "\n  Findings:\n");
    for (int i = 0; i < count; i++) {
        const struct report_finding *f = &findings[i];
        char site[OUTPUT_PATH_MAX + 1024], shown[sizeof(site) * 4];
        frames_site_text(r, f->stack_id, site, sizeof(site));
        out_str(out, f->detail ? "      " : "   - ");
        out_str(out, f->label);
        if (site[0])
            out_printf(out, "%sat %s", f->label[0] ? " " : "",
                       output_text(site, shown, sizeof(shown)));
        out_printf(out, ": %s\n", f->text);
    }
}

/* Where the full report went: the files just written, the JSON first (what
 * `cumemtrace report` reads back). */
static void write_where(const struct report *r, const struct report_files *files, struct out *out)
{
    if (!files || !files->count) {
        out_str(out, r->options.formats ? "  full report: not written (said above)\n"
                                        : "  full report: none written (CUMEMTRACE_FORMAT=text "
                                          "writes it as .txt)\n");
        return;
    }
    int json = -1;
    for (int i = 0; i < files->count; i++)
        if (files->file[i].format == FORMAT_INDEX_JSON)
            json = i;
    char path[OUTPUT_PATH_MAX * 4];
    out_str(out, "  full report:");
    for (int i = 0; i < files->count; i++)
        out_printf(out, "%s %s", i ? "," : "",
                   output_text(files->file[i].path, path, sizeof(path)));
    if (json >= 0)
        out_printf(out, " (cumemtrace report %s prints all of it)",
                   output_text(files->file[json].path, path, sizeof(path)));
    out_str(out, "\n");
}

static void write_report(const struct report *r, const struct report_files *files, struct out *out,
                         int brief)
{
    out_printf(out, "==== cumemtrace %s report, pid %d, %.1f s after start ====\n", r->reason,
               r->pid, r->now_ms / 1000.0);
    if (r->argv_bytes) {
        out_str(out, "  command:");
        char argument[sizeof(r->argv) * 4 + 8]; /* every byte may take four */
        for (size_t i = 0; i < r->argv_bytes; i += strlen(r->argv + i) + 1) {
            out_str(out, " ");
            out_str(out, output_text(r->argv + i, argument, sizeof(argument)));
        }
        out_str(out, "\n");
    }
    if (r->hostname[0] || r->rank >= 0) {
        char host[sizeof(r->hostname) * 4 + 8];
        out_printf(out, "  host: %s",
                   r->hostname[0] ? output_text(r->hostname, host, sizeof(host)) : "unknown");
        if (r->rank >= 0)
            out_printf(out, "; rank %d", r->rank);
        if (r->world_size >= 0)
            out_printf(out, " of %d", r->world_size);
        if (r->local_rank >= 0)
            out_printf(out, " (local rank %d)", r->local_rank);
        for (int d = 0, shown = 0; d < r->device_count; d++)
            if (r->devices[d].slot != COUNTER_NO_DEVICE)
                out_printf(out, "%s%d", shown++ ? "," : "; device ", r->devices[d].slot);
        out_str(out, "\n");
    }
    write_findings(r, out);
    write_event(r, out, brief);
    write_growing(r, out, brief);
    write_released(r, out, brief);
    write_groups(r, out, brief, 0, live_title(r));
    write_implicit(r, out, brief);
    write_held(r, out, brief);
    write_fragmentation(r, out, brief);
    out_str(out, "\n");
    if (r->device_count == 0)
        out_str(out, "  no CUDA memory was allocated\n");
    else
        write_counters(r, out);
    write_classes(r, out, brief);
    write_groups(r, out, brief, 1,
                 "Cache segments (memory a framework's cache took from the driver, each "
                 "charged to the line that first needed one; its blocks are listed above)");
    write_peaks(r, out, brief);
    write_failures(r, out, brief);
    write_lost(r, out);
    if (brief)
        write_where(r, files, out);
    out_str(out, "==== end of cumemtrace report ====\n");
}

void report_text(const struct report *r, struct out *out)
{
    write_report(r, NULL, out, 0);
}

void report_summary(const struct report *r, const struct report_files *files, struct out *out)
{
    write_report(r, files, out, 1);
}
