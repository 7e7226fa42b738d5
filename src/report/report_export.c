/* report_export.c - the report in other tools' formats.
 *
 * A Python program ends (its exit hooks run) before its process does, and
 * the interpreter's teardown then frees what module globals held: where the
 * program's end was seen, the folded stacks and the memviz snapshot are of
 * that end, not of what the teardown left, and the Chrome trace marks it.
 *
 * folded:   "outer;...;inner bytes" lines of the memory live at exit (at the
 *           program's end, where seen: report.h's r->held; the root frame
 *           then says so), one per group of live blocks, for flamegraph.pl,
 *           speedscope and inferno;
 *           the frames frames.h hides are left out (CUMEMTRACE_ALL_FRAMES).
 *           The outermost frame is the kind in brackets ("[device]"), so host
 *           and device memory are never summed into one bar. VMM mappings
 *           and reservations are left out: they are address space, and the
 *           memory behind them is already counted as vmm_physical. Where a
 *           framework's blocks are known ("[torch_tensor]"), its cache's
 *           segments are shown only by what they hold unused, so nothing
 *           is counted twice.
 * perfetto: Chrome's Trace Event format (JSON), loaded by ui.perfetto.dev
 *           and chrome://tracing: a counter track of live bytes per device
 *           and kind, one per device for all device memory when it sums
 *           several kinds, and instant events for failed allocations
 *           (OOMs), marks and the program's end (with the stacks held then,
 *           most bytes first). From the event timeline; without it, from the
 *           coarse series (series.h).
 * memviz:   a pickle of the snapshot dictionary that PyTorch's memory_viz
 *           page (pytorch.org/memory_viz) and torch.cuda._memory_viz read:
 *           "segments" and "device_traces". PyTorch's snapshot describes its
 *           caching allocator (segments from cudaMalloc, split into blocks);
 *           where a framework's blocks are known, its segments hold them at
 *           their addresses, with the free ranges between as inactive
 *           blocks, and its blocks' events are allocs and frees in them;
 *           other driver allocations are each a segment holding one block of
 *           the same size, traced as a segment_alloc and an alloc. Only memory
 *           with device addresses is exported (device, stream-ordered and
 *           managed blocks): VMM handles and arrays are handles, not
 *           addresses, and the page lays memory out by address. At the
 *           program's end: its blocks still live, and those the teardown
 *           freed, from the timeline's frees after the end (their
 *           addresses are known nowhere else); the traces stop at the end.
 *           A "cumemtrace" key says which moment, and the bytes held then
 *           that no address could be found for (no timeline).
 *
 * All three are written from struct report only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "counters.h"
#include "frames.h"
#include "kinds.h"
#include "report.h"

#define U(x) ((unsigned long long)(x))

static const struct symbol *frame_symbol(const struct report *r, uintptr_t address)
{
    long index = report_frame_index(r, address);
    return index >= 0 ? &r->symbols[index] : NULL;
}

/* A frame's name for folded stacks (frames_name); ';' and line breaks
 * would break the format. */
static void folded_frame_name(const struct symbol *s, uintptr_t address, char *text, size_t size)
{
    frames_name(s, address, text, size);
    for (char *p = text; *p; p++)
        if (*p == ';' || *p == '\n' || *p == '\r')
            *p = ':';
}

/* ---- folded stacks ---------------------------------------------------- */

/* The program's end was seen: exports are of that moment, and the folded
 * stacks' root frame says so ("[device, at the program's end]"). */
#define AT_END_ROOT ", at the program's end"
static int at_end(const struct report *r)
{
    return r->end.ended;
}

void report_folded(const struct report *r, struct out *out)
{
    char name[1024];
    const struct report_group *groups = at_end(r) ? r->held : r->groups;
    size_t count = at_end(r) ? r->held_count : r->group_count;
    for (size_t i = 0; i < count; i++) {
        const struct report_group *g = &groups[i];
        if (g->kind == KIND_VMM_MAPPING || g->kind == KIND_VMM_RESERVATION || g->bytes == 0 ||
            report_cache_segment(r, g->stack_id))
            continue;
        out_printf(out, "[%s%s]", kind_name(g->kind), at_end(r) ? AT_END_ROOT : "");
        const struct stack *s =
            g->stack_id >= 1 && g->stack_id <= r->stack_count ? &r->stacks[g->stack_id - 1] : NULL;
        if (!s || s->depth == 0)
            out_str(out, ";[no stack]");
        struct frame_view view = {-1, -1, -1, -1, -1};
        if (s)
            frames_view(r, s, &view);
        for (uint32_t f = s ? s->depth : 0; f > 0; f--) {
            if (frames_left_out(r, s, f - 1, &view))
                continue;
            uintptr_t address = r->frames[s->first_frame + f - 1];
            folded_frame_name(frame_symbol(r, address), address, name, sizeof(name));
            out_str(out, ";");
            out_str(out, name);
        }
        out_printf(out, " %llu\n", U(g->bytes));
    }
    /* A cache's segments hold its blocks, listed above by their own stacks:
     * only what they hold besides is left to show, once per cache. */
    for (int i = 0; i < r->cache_count; i++) {
        const struct report_cache *c = &r->caches[i];
        if (c->unused && r->cache_views[c->kind - KIND_TORCH_TENSOR].view == CACHE_BLOCKS)
            out_printf(out, "[device%s];[%s cache: reserved, unused] %llu\n",
                       at_end(r) ? AT_END_ROOT : "", kind_name(c->kind), U(c->unused));
    }
}

/* ---- Chrome trace events (Perfetto) ------------------------------------ */

/* Live bytes per (slot, kind), and per slot for all device memory
 * (index KIND_COUNT), as the timeline is replayed. A track is active when
 * it is written: a kind the slot used; the total only when it sums two
 * kinds or more (else it would repeat the one kind's track, line on line). */
struct replay {
    int64_t bytes[MAX_DEVICES + 1][KIND_COUNT + 1];
    uint8_t active[MAX_DEVICES + 1][KIND_COUNT + 1];
};

static void replay_start(const struct report *r, struct replay *p)
{
    memset(p, 0, sizeof(*p));
    for (int d = 0; d < r->device_count; d++) {
        int slot = r->devices[d].slot;
        int summed = 0;
        for (int kind = 0; kind <= KIND_COUNT; kind++) {
            const struct counters *c = report_counters(r, slot, kind);
            p->bytes[slot][kind] = (int64_t)c->bytes_current;
            if (c->blocks_allocated && kind < KIND_COUNT) {
                p->active[slot][kind] = 1;
                summed += kind_uses_device_memory(kind);
            }
        }
        p->active[slot][KIND_COUNT] = summed > 1;
    }
    for (size_t i = 0; i < r->timeline_count; i++) {
        const struct timeline_event *e = &r->timeline[i];
        int slot = counters_slot(e->device);
        if (e->kind >= KIND_COUNT || timeline_delta(e) == 0)
            continue;
        p->bytes[slot][e->kind] -= timeline_delta(e);
        if (kind_uses_device_memory(e->kind))
            p->bytes[slot][KIND_COUNT] -= timeline_delta(e);
    }
}

static void write_counter(const struct report *r, struct out *out, int slot, int kind,
                          uint64_t time_us, int64_t bytes)
{
    char device[32];
    if (slot == COUNTER_NO_DEVICE)
        snprintf(device, sizeof(device), "no device");
    else
        snprintf(device, sizeof(device), "device %d", slot);
    out_printf(out,
               ",\n{\"ph\":\"C\",\"pid\":%d,\"tid\":0,\"ts\":%llu,\"name\":\"%s: %s\","
               "\"args\":{\"bytes\":%lld}}",
               r->pid, U(time_us), device,
               kind == KIND_COUNT ? "all device memory" : kind_name(kind), (long long)bytes);
}

static void write_instant(const struct report *r, struct out *out, uint64_t time_us,
                          const char *what, uint64_t size, int device, int kind, int api)
{
    char bytes[32];
    format_bytes(size, bytes, sizeof(bytes));
    out_printf(out,
               ",\n{\"ph\":\"i\",\"s\":\"g\",\"pid\":%d,\"tid\":0,\"ts\":%llu,"
               "\"name\":\"%s %s\",\"args\":{\"size\":%llu,\"device\":%d,\"kind\":\"%s\","
               "\"api\":",
               r->pid, U(time_us), what, bytes, U(size), device, kind_name(kind));
    out_json_string(out, report_api_name(r, api));
    out_str(out, "}}");
}

static void write_mark(const struct report *r, struct out *out, uint64_t time_us, const char *label)
{
    out_printf(out,
               ",\n{\"ph\":\"i\",\"s\":\"g\",\"pid\":%d,\"tid\":0,\"ts\":%llu,\"name\":", r->pid,
               U(time_us));
    char name[96];
    snprintf(name, sizeof(name), "mark: %s", label ? label : "?");
    out_json_string(out, name);
    out_str(out, "}");
}

/* The program's end, with the stacks held then (r->held, most bytes first,
 * the first 20), each as its frames that matter, site first. */
static void write_program_end(const struct report *r, struct out *out)
{
    char bytes[32], name[1024];
    uint64_t total = 0;
    for (size_t i = 0; i < r->held_count; i++)
        total += r->held[i].bytes;
    format_bytes(total, bytes, sizeof(bytes));
    out_printf(out,
               ",\n{\"ph\":\"i\",\"s\":\"g\",\"pid\":%d,\"tid\":0,\"ts\":%llu,"
               "\"name\":\"program end: %s held\",\"args\":{\"held_bytes\":%llu,\"held\":[",
               r->pid, U((uint64_t)r->end.time_ms * 1000), bytes, U(total));
    for (size_t i = 0; i < r->held_count && i < 20; i++) {
        const struct report_group *g = &r->held[i];
        char site[OUTPUT_PATH_MAX + 1024];
        frames_site_text(r, g->stack_id, site, sizeof(site));
        out_printf(out, "%s{\"bytes\":%llu,\"kind\":\"%s\",\"site\":", i ? "," : "", U(g->bytes),
                   kind_name(g->kind));
        out_json_string(out, site[0] ? site : NULL);
        out_str(out, ",\"stack\":[");
        const struct stack *s =
            g->stack_id >= 1 && g->stack_id <= r->stack_count ? &r->stacks[g->stack_id - 1] : NULL;
        struct frame_view view = {-1, -1, -1, -1, -1};
        if (s)
            frames_view(r, s, &view);
        for (uint32_t f = view.site > 0 ? (uint32_t)view.site : 0, n = 0; s && f < s->depth; f++) {
            if (frames_left_out(r, s, f, &view))
                continue;
            uintptr_t address = r->frames[s->first_frame + f];
            frames_name(frame_symbol(r, address), address, name, sizeof(name));
            out_str(out, n++ ? "," : "");
            out_json_string(out, name);
        }
        out_str(out, "]}");
    }
    out_str(out, "]}}");
}

void report_perfetto(const struct report *r, struct out *out)
{
    struct replay *p = pages_alloc(sizeof(*p));
    if (!p) {
        out->failed = 1;
        return;
    }
    replay_start(r, p);
    const char *program = r->argv_bytes ? r->argv : "process";
    char name[300];
    snprintf(name, sizeof(name), "cumemtrace: %.200s (%.40s report)", program, r->reason);
    out_printf(out,
               "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"cumemtrace-trace\","
               "\"timeline_dropped\":%llu},\"traceEvents\":[\n"
               "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":",
               U(r->timeline_total - r->timeline_count), r->pid);
    out_json_string(out, name);
    out_str(out, "}}");

    /* Where each track stands before the first recorded event. */
    uint64_t first_us = r->timeline_count ? r->timeline[0].time_us : 0;
    for (int slot = 0; slot <= MAX_DEVICES && r->has_timeline; slot++)
        for (int kind = 0; kind <= KIND_COUNT; kind++)
            if (p->active[slot][kind])
                write_counter(r, out, slot, kind, first_us, p->bytes[slot][kind]);

    uint64_t last_us = first_us;
    int end_written = !at_end(r);
    for (size_t i = 0; i < r->timeline_count; i++) {
        const struct timeline_event *e = &r->timeline[i];
        int slot = counters_slot(e->device);
        if (i == r->timeline_end && !end_written) { /* in time's order */
            write_program_end(r, out);
            end_written = 1;
        }
        last_us = e->time_us;
        if (e->type == TIMELINE_MARK) {
            write_mark(r, out, e->time_us, report_mark_label(r, e->size));
            continue;
        }
        if (e->type == TIMELINE_OOM || e->type == TIMELINE_FAILURE) {
            write_instant(r, out, e->time_us, e->type == TIMELINE_OOM ? "OOM" : "failed", e->size,
                          e->device, e->kind, e->api);
            continue;
        }
        if (e->kind >= KIND_COUNT)
            continue;
        p->bytes[slot][e->kind] += timeline_delta(e);
        p->active[slot][e->kind] = 1;
        write_counter(r, out, slot, e->kind, e->time_us, p->bytes[slot][e->kind]);
        if (kind_uses_device_memory(e->kind)) {
            p->bytes[slot][KIND_COUNT] += timeline_delta(e);
            if (p->active[slot][KIND_COUNT])
                write_counter(r, out, slot, KIND_COUNT, e->time_us, p->bytes[slot][KIND_COUNT]);
        }
    }

    /* Without a timeline: the coarse series of growth samples, and failures
     * and marks from their own small rings. */
    if (!r->has_timeline && r->series) {
        for (uint32_t i = 0; i < r->series->count; i++) {
            const struct series_sample *s = &r->series->samples[i];
            for (int device = 0; device < SERIES_DEVICES; device++) {
                int64_t all = 0;
                for (int kind = 0; kind < KIND_COUNT; kind++) {
                    if (kind_uses_device_memory(kind))
                        all += (int64_t)s->bytes[device][kind];
                    if (p->active[device][kind])
                        write_counter(r, out, device, kind, (uint64_t)s->time_ms * 1000,
                                      (int64_t)s->bytes[device][kind]);
                }
                if (p->active[device][KIND_COUNT])
                    write_counter(r, out, device, KIND_COUNT, (uint64_t)s->time_ms * 1000, all);
            }
        }
        if (r->series->count)
            last_us = (uint64_t)r->series->samples[r->series->count - 1].time_ms * 1000;
    }
    if (!r->has_timeline) {
        uint64_t total = r->failures.total;
        for (uint64_t n = RING_FIRST(r->failures.ring, total); n <= total; n++) {
            const struct report_failure *f = RING_ENTRY(r->failures.ring, n);
            write_instant(r, out, (uint64_t)f->time_ms * 1000, f->oom ? "OOM" : "failed", f->size,
                          f->device, f->kind, f->api);
        }
        total = r->marks.total;
        for (uint64_t n = RING_FIRST(r->marks.ring, total); n <= total; n++) {
            const struct report_mark *m = RING_ENTRY(r->marks.ring, n);
            write_mark(r, out, (uint64_t)m->time_ms * 1000, m->label);
        }
    }

    if (!end_written)
        write_program_end(r, out);

    /* Every track ends where the counters stand at the report. */
    uint64_t end_us = (uint64_t)r->now_ms * 1000;
    if (end_us < last_us)
        end_us = last_us;
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        for (int kind = 0; kind <= KIND_COUNT; kind++)
            if (p->active[slot][kind])
                write_counter(r, out, slot, kind, end_us,
                              (int64_t)report_counters(r, slot, kind)->bytes_current);
    out_str(out, "\n]}\n");
    pages_free(p, sizeof(*p));
}

/* ---- PyTorch memory_viz snapshot (pickle) ------------------------------
 *
 * Written with protocol 2 opcodes only, all of which both Python's pickle
 * module and MemoryViz.js's own reader know: PROTO, EMPTY_DICT, EMPTY_LIST,
 * MARK, SETITEMS, APPENDS, BININT1/BININT2/BININT, LONG1, BINUNICODE, and
 * LONG_BINPUT/LONG_BINGET so that each stack's frame list is written once. */

static void pickle_byte(struct out *out, unsigned char byte)
{
    out_write(out, (const char *)&byte, 1);
}

static void pickle_u32(struct out *out, uint32_t value)
{
    unsigned char bytes[4] = {value & 0xff, (value >> 8) & 0xff, (value >> 16) & 0xff,
                              (value >> 24) & 0xff};
    out_write(out, (const char *)bytes, 4);
}

static void pickle_int(struct out *out, uint64_t value)
{
    if (value < 256) {
        pickle_byte(out, 'K');
        pickle_byte(out, (unsigned char)value);
    } else if (value < 65536) {
        pickle_byte(out, 'M');
        pickle_byte(out, value & 0xff);
        pickle_byte(out, (value >> 8) & 0xff);
    } else if (value < 0x80000000u) {
        pickle_byte(out, 'J');
        pickle_u32(out, (uint32_t)value);
    } else {
        /* LONG1: little-endian two's complement; a ninth byte keeps the
         * sign positive when the top bit is set. */
        int n = value >> 63 ? 9 : 8;
        pickle_byte(out, 0x8a);
        pickle_byte(out, (unsigned char)n);
        for (int i = 0; i < 8; i++)
            pickle_byte(out, (value >> (8 * i)) & 0xff);
        if (n == 9)
            pickle_byte(out, 0);
    }
}

static void pickle_str(struct out *out, const char *text)
{
    size_t n = strlen(text);
    pickle_byte(out, 'X');
    pickle_u32(out, (uint32_t)n);
    out_write(out, text, n);
}

static void pickle_key_int(struct out *out, const char *key, uint64_t value)
{
    pickle_str(out, key);
    pickle_int(out, value);
}

static void pickle_key_str(struct out *out, const char *key, const char *value)
{
    pickle_str(out, key);
    pickle_str(out, value);
}

static void pickle_begin_dict(struct out *out)
{
    pickle_byte(out, '}');
    pickle_byte(out, '(');
}

static void pickle_begin_list(struct out *out)
{
    pickle_byte(out, ']');
    pickle_byte(out, '(');
}

static void pickle_end_dict(struct out *out)
{
    pickle_byte(out, 'u');
}

static void pickle_end_list(struct out *out)
{
    pickle_byte(out, 'e');
}

/* A stack's frames, innermost first like PyTorch's, as
 * [{"filename", "line", "name"}]; memo slot = stack id. */
static void pickle_frames(const struct report *r, struct out *out, uint32_t stack_id,
                          uint8_t *written)
{
    if (stack_id == 0 || stack_id > r->stack_count) {
        pickle_byte(out, ']');
        return;
    }
    if (written[stack_id]) {
        pickle_byte(out, 'j');
        pickle_u32(out, stack_id);
        return;
    }
    const struct stack *s = &r->stacks[stack_id - 1];
    pickle_begin_list(out);
    for (uint32_t f = 0; f < s->depth; f++) {
        uintptr_t address = r->frames[s->first_frame + f];
        const struct symbol *sym = frame_symbol(r, address);
        char name[1024];
        if (frames_marker(r, address))
            continue; /* a placeholder, not a frame (frames.h) */
        pickle_begin_dict(out);
        /* Named as in every other export (frames_name), the file apart. */
        const char *module = sym && sym->module ? sym->module : "??";
        if (sym && sym->file)
            pickle_key_str(out, "filename", sym->file);
        else
            pickle_key_str(out, "filename", output_base_name(module));
        pickle_key_int(out, "line", sym && sym->file && sym->line > 0 ? (uint64_t)sym->line : 0);
        if (sym && sym->python)
            snprintf(name, sizeof(name), "%s", sym->function ? sym->function : "?");
        else
            frames_name(sym, address, name, sizeof(name));
        pickle_key_str(out, "name", name);
        pickle_end_dict(out);
    }
    pickle_end_list(out);
    pickle_byte(out, 'r');
    pickle_u32(out, stack_id);
    written[stack_id] = 1;
}

static int memviz_kind(int kind)
{
    return kind == KIND_DEVICE || kind == KIND_STREAM_ORDERED || kind == KIND_MANAGED;
}

/* In the device traces too: a framework's blocks, inside those segments. */
static int memviz_traced(int kind)
{
    return memviz_kind(kind) || kind_in_cache(kind);
}

static void pickle_trace_entry(const struct report *r, struct out *out, const char *action,
                               const struct timeline_event *e, uint8_t *written)
{
    pickle_begin_dict(out);
    pickle_key_str(out, "action", action);
    pickle_key_int(out, "addr", e->value);
    pickle_key_int(out, "size", e->size);
    pickle_key_int(out, "stream", 0);
    pickle_key_int(out, "time_us", (uint64_t)(r->start_unix * 1e6) + e->time_us);
    if (strcmp(action, "oom") == 0) {
        /* Known only for the OOM this report is about; 0 means unknown. */
        int this_one = r->event.type == EVENT_OOM && r->event.has_memory_info &&
                       r->event.size == e->size && r->event.device == e->device;
        pickle_key_int(out, "device_free", this_one ? r->event.free : 0);
    }
    pickle_str(out, "frames");
    pickle_frames(r, out, e->stack_id, written);
    pickle_end_dict(out);
}

/* The live blocks of frameworks' caches (kind_in_cache), by address; NULL
 * when there are none (or no memory for the list). */
static int by_value(const void *a, const void *b)
{
    uint64_t x = (*(const struct report_block *const *)a)->value;
    uint64_t y = (*(const struct report_block *const *)b)->value;
    return x < y ? -1 : x > y;
}

static const struct report_block **sorted_cache_blocks(const struct report_block *blocks,
                                                       size_t count)
{
    const struct report_block **list = pages_alloc((count + 1) * sizeof(*list));
    size_t n = 0;
    for (size_t i = 0; list && i < count; i++)
        if (kind_in_cache(blocks[i].kind))
            list[n++] = &blocks[i];
    if (list)
        qsort(list, n, sizeof(*list), by_value);
    return list;
}

/* The blocks a snapshot lays out, and how many (`capacity`: the list's
 * room, 0 when it is r->blocks itself). At the program's end: the blocks
 * still live that were live then, and those the teardown freed: a free
 * recorded after the end whose address no allocation after the end had
 * taken first. Without a timeline those have no address: their bytes go to
 * *unplaced. NULL when out of memory. */
struct alloc_after {
    uint64_t value;
    size_t index;
    int device, kind;
};

static int by_place(const void *a, const void *b)
{
    const struct alloc_after *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static const struct report_block *memviz_blocks(const struct report *r, size_t *count,
                                                size_t *capacity, uint64_t *unplaced)
{
    *unplaced = 0;
    *capacity = 0;
    *count = r->block_count;
    if (!at_end(r))
        return r->blocks;
    size_t after = r->timeline_count - r->timeline_end;
    struct report_block *list = pages_alloc((r->block_count + after + 1) * sizeof(*list));
    struct alloc_after *allocs = pages_alloc((after + 1) * sizeof(*allocs));
    size_t n = 0, a = 0;
    for (size_t i = 0; list && allocs && i < r->block_count; i++)
        if (r->blocks[i].held_at_end)
            list[n++] = r->blocks[i];
    for (size_t k = r->timeline_end; list && allocs && k < r->timeline_count; k++)
        if (r->timeline[k].type == TIMELINE_ALLOC)
            allocs[a++] = (struct alloc_after){r->timeline[k].value, k, r->timeline[k].device,
                                               r->timeline[k].kind};
    if (allocs)
        qsort(allocs, a, sizeof(*allocs), by_place);
    for (size_t k = r->timeline_end; list && allocs && k < r->timeline_count; k++) {
        const struct timeline_event *e = &r->timeline[k];
        if (e->type != TIMELINE_FREE && e->type != TIMELINE_FREE_IMPLICIT)
            continue;
        struct alloc_after key = {e->value, 0, e->device, e->kind};
        size_t low = 0, high = a; /* the first allocation after the end at its place */
        while (low < high) {
            size_t mid = low + (high - low) / 2;
            if (by_place(&allocs[mid], &key) < 0)
                low = mid + 1;
            else
                high = mid;
        }
        if (low < a && allocs[low].value == e->value && allocs[low].device == e->device &&
            allocs[low].kind == e->kind && allocs[low].index < k)
            continue;
        list[n++] = (struct report_block){.value = e->value,
                                          .size = e->size,
                                          .stack_id = e->stack_id,
                                          .device = e->device,
                                          .kind = e->kind,
                                          .api = e->api,
                                          .held_at_end = 1};
    }
    pages_free(allocs, (after + 1) * sizeof(*allocs));
    if (!list || !allocs) {
        pages_free(list, (r->block_count + after + 1) * sizeof(*list));
        return NULL;
    }
    for (size_t i = 0; !r->has_timeline && i < r->held_count; i++)
        *unplaced += r->held[i].freed_at_teardown;
    *count = n;
    *capacity = r->block_count + after + 1;
    return list;
}

static void pickle_block(const struct report *r, struct out *out, uint64_t address, uint64_t size,
                         uint64_t requested, const char *state, uint32_t stack_id, uint8_t *written)
{
    pickle_begin_dict(out);
    pickle_key_int(out, "address", address);
    pickle_key_int(out, "size", size);
    pickle_key_int(out, "requested_size", requested);
    pickle_key_str(out, "state", state);
    pickle_str(out, "frames");
    pickle_frames(r, out, stack_id, written);
    pickle_end_dict(out);
}

/* One driver allocation as a segment: of a framework's cache whose blocks
 * are known, with its live blocks at their addresses and the free ranges
 * between them, as PyTorch's own snapshot lays a segment out; else one
 * block the size of the segment. */
static void pickle_segment(const struct report *r, struct out *out, const struct report_block *b,
                           const struct report_block **inside, uint8_t *written)
{
    int cache = report_cache_segment(r, b->stack_id) && inside;
    uint64_t end = b->value + b->size, allocated = 0, requested = 0;
    size_t first = 0, n = 0;
    while (cache && inside[n])
        n++;
    for (size_t low = 0, high = n; cache && low < high;) { /* the first block at or after */
        size_t mid = low + (high - low) / 2;
        if (inside[mid]->value < b->value)
            low = first = mid + 1;
        else
            high = mid;
    }
    for (size_t i = first; cache && i < n && inside[i]->value < end; i++) {
        allocated += (inside[i]->size + 511) / 512 * 512;
        requested += inside[i]->size;
    }
    pickle_begin_dict(out);
    pickle_key_int(out, "device", (uint64_t)b->device);
    pickle_key_int(out, "address", b->value);
    pickle_key_int(out, "total_size", b->size);
    pickle_key_int(out, "allocated_size", cache ? allocated : b->size);
    pickle_key_int(out, "active_size", cache ? allocated : b->size);
    pickle_key_int(out, "requested_size", cache ? requested : b->size);
    pickle_key_int(out, "stream", 0);
    pickle_key_str(out, "segment_type", "large");
    pickle_str(out, "frames");
    pickle_frames(r, out, b->stack_id, written);
    pickle_str(out, "blocks");
    pickle_begin_list(out);
    if (!cache) {
        pickle_block(r, out, b->value, b->size, b->size, "active_allocated", b->stack_id, written);
    } else {
        uint64_t at = b->value;
        for (size_t i = first; i < n && inside[i]->value < end; i++) {
            const struct report_block *t = inside[i];
            uint64_t size = (t->size + 511) / 512 * 512;
            if (t->value > at)
                pickle_block(r, out, at, t->value - at, 0, "inactive", 0, written);
            pickle_block(r, out, t->value, size, t->size, "active_allocated", t->stack_id, written);
            at = t->value + size;
        }
        if (at < end)
            pickle_block(r, out, at, end - at, 0, "inactive", 0, written);
    }
    pickle_end_list(out);
    pickle_end_dict(out);
}

void report_memviz(const struct report *r, struct out *out)
{
    size_t count, capacity, traced = at_end(r) ? r->timeline_end : r->timeline_count;
    uint64_t unplaced;
    uint8_t *written = pages_alloc(r->stack_count + 1);
    const struct report_block *blocks = memviz_blocks(r, &count, &capacity, &unplaced);
    if (!written || !blocks) {
        pages_free(written, r->stack_count + 1);
        out->failed = 1;
        return;
    }
    int devices = 0;
    for (size_t i = 0; i < count; i++)
        if (memviz_kind(blocks[i].kind) && blocks[i].device >= devices)
            devices = blocks[i].device + 1;
    for (size_t i = 0; i < traced; i++)
        if (memviz_traced(r->timeline[i].kind) && r->timeline[i].device >= devices)
            devices = r->timeline[i].device + 1;

    pickle_byte(out, 0x80);
    pickle_byte(out, 2);
    pickle_begin_dict(out);

    pickle_str(out, "segments");
    pickle_begin_list(out);
    const struct report_block **inside = sorted_cache_blocks(blocks, count);
    for (size_t i = 0; i < count; i++) {
        const struct report_block *b = &blocks[i];
        if (!memviz_kind(b->kind) || b->device < 0)
            continue;
        pickle_segment(r, out, b, inside, written);
    }
    pickle_end_list(out);
    pages_free(inside, (count + 1) * sizeof(*inside));

    pickle_str(out, "device_traces");
    pickle_begin_list(out);
    for (int device = 0; device < devices; device++) {
        pickle_begin_list(out);
        for (size_t i = 0; i < traced; i++) {
            const struct timeline_event *e = &r->timeline[i];
            if (e->device != device || !memviz_traced(e->kind))
                continue;
            /* A framework's block is an alloc in its segment; the segment is
             * a segment_alloc of its own. Other memory is both at once. */
            int block = kind_in_cache(e->kind), segment = report_cache_segment(r, e->stack_id);
            switch (e->type) {
            case TIMELINE_ALLOC:
                if (!block)
                    pickle_trace_entry(r, out, "segment_alloc", e, written);
                if (!segment)
                    pickle_trace_entry(r, out, "alloc", e, written);
                break;
            case TIMELINE_FREE:
            case TIMELINE_FREE_IMPLICIT:
                if (!segment) {
                    pickle_trace_entry(r, out, "free_requested", e, written);
                    pickle_trace_entry(r, out, "free_completed", e, written);
                }
                if (!block)
                    pickle_trace_entry(r, out, "segment_free", e, written);
                break;
            case TIMELINE_OOM: pickle_trace_entry(r, out, "oom", e, written); break;
            default: break;
            }
        }
        pickle_end_list(out);
    }
    pickle_end_list(out);
    if (at_end(r)) {
        pickle_str(out, "cumemtrace");
        pickle_begin_dict(out);
        pickle_key_str(out, "moment", "program_end");
        pickle_key_int(out, "time_ms", r->end.time_ms);
        pickle_key_int(out, "unplaced_bytes", unplaced);
        pickle_end_dict(out);
    }
    pickle_end_dict(out);
    pickle_byte(out, '.');
    pages_free(written, r->stack_count + 1);
    if (capacity)
        pages_free((void *)blocks, capacity * sizeof(*blocks));
}
