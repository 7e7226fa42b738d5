/* report_json.c - the machine-readable report, schema docs/report.schema.json.
 *
 * Version 1. Addresses are hex strings (JSON numbers lose precision above
 * 2^53); byte counts are numbers. Stacks are lists of frame ids; each frame
 * (address, module, function, file:line) is written once in "frames". */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_errors.h"
#include "frames.h"
#include "kinds.h"
#include "registry.h" /* block_record_bytes: the size of a block record */
#include "report.h"

#define U(x) ((unsigned long long)(x))

/* {"allocated_bytes":{"current":N,...},...,"num_ooms":N}: counter_keys, in
 * order, a group's keys inside one object. */
static void write_counters(struct out *out, const struct counters *c)
{
    const char *group = NULL; /* the group whose object is open */
    int first = 1;            /* nothing written yet in the object open */
    out_str(out, "{");
    for (int i = 0; i < COUNTER_KEY_COUNT; i++) {
        const struct counter_key *k = &counter_keys[i];
        if (group && (!k->group || strcmp(k->group, group) != 0)) {
            out_str(out, "}");
            group = NULL;
            first = 0;
        }
        if (k->group && !group) {
            out_printf(out, "%s\"%s\":{", first ? "" : ",", k->group);
            group = k->group;
            first = 1;
        }
        out_printf(out, "%s\"%s\":%llu", first ? "" : ",", k->key, U(counter_value(c, i)));
        first = 0;
    }
    out_str(out, group ? "}}" : "}");
}

static void write_optional_int(struct out *out, const char *key, int value)
{
    if (value >= 0)
        out_printf(out, ",\"%s\":%d", key, value);
    else
        out_printf(out, ",\"%s\":null", key);
}

static void write_process(const struct report *r, struct out *out)
{
    out_printf(out, "\"process\":{\"pid\":%d,\"ppid\":%d,\"host\":", r->pid, r->ppid);
    out_json_string(out, r->hostname);
    out_str(out, ",\"argv\":[");
    for (size_t i = 0; i < r->argv_bytes; i += strlen(r->argv + i) + 1) {
        if (i)
            out_str(out, ",");
        out_json_string(out, r->argv + i);
    }
    out_str(out, "]");
    if (r->start_dir[0]) {
        out_str(out, ",\"cwd\":");
        out_json_string(out, r->start_dir);
    }
    write_optional_int(out, "rank", r->rank);
    write_optional_int(out, "local_rank", r->local_rank);
    write_optional_int(out, "world_size", r->world_size);
    out_printf(out, ",\"start_time\":%.3f,\"time\":%.3f,\"duration_s\":%.3f}", r->start_unix,
               r->now_unix, r->now_ms / 1000.0);
}

static void write_tracer(const struct report *r, struct out *out)
{
    out_printf(out,
               ",\"tracer\":{\"version\":\"%s\",\"depth\":%d,\"min_size\":%llu,"
               "\"block_record_bytes\":%zu,\"registry_bytes\":%zu,\"stack_table_bytes\":%zu,"
               "\"live_blocks\":%zu,\"stacks\":%u,\"symbolizer\":\"%s\","
               "\"all_frames\":%s,\"lost\":{",
               CUMEMTRACE_VERSION, r->options.depth, U(r->options.min_size), sizeof(struct block),
               r->registry_bytes, r->stacks_bytes, r->block_count, r->stack_count,
               symbolizer_has_lines(r->symbolizer) ? "built-in" : "dladdr",
               r->all_frames ? "true" : "false");
    for (int i = 0; i < LOST_COUNT; i++)
        out_printf(out, "%s\"%s\":%llu", i ? "," : "", lost_names[i], U(r->lost[i]));
    out_str(out, "}");
    if (r->user_packages && r->user_packages[0]) {
        out_str(out, ",\"user_packages\":");
        out_json_string(out, r->user_packages);
    }
    if (r->self_time_ns >= 0)
        out_printf(out, ",\"self_time_ns\":%lld}", (long long)r->self_time_ns);
    else
        out_str(out, ",\"self_time_ns\":null}");
}

static void write_entry_points(const struct report *r, struct out *out)
{
    out_str(out, ",\"entry_points\":[");
    int first = 1;
    for (int api = 0; api < r->api_count; api++) {
        if (!r->api_calls[api] && !r->api_allocations[api])
            continue;
        out_str(out, first ? "{\"name\":" : ",{\"name\":");
        first = 0;
        out_json_string(out, r->api_names[api]);
        out_printf(out, ",\"calls\":%llu,\"allocations\":%llu,\"failures\":%llu}",
                   U(r->api_calls[api]), U(r->api_allocations[api]), U(r->api_failures[api]));
    }
    out_str(out, "]");
}

static void write_pool_figure(struct out *out, const char *key, uint64_t value, int after)
{
    if (value == POOL_FIGURE_UNKNOWN)
        out_printf(out, "%s\"%s\":null", after ? "," : "", key);
    else
        out_printf(out, "%s\"%s\":%llu", after ? "," : "", key, U(value));
}

/* "reserved_bytes":N,... (null for a figure not known), after a comma if `after`. */
static void write_pool_figures(struct out *out, const struct pool_figures *figures, int after)
{
#define X(field, key) write_pool_figure(out, key, figures->field, after++);
    POOL_FIGURE_KEYS(X)
#undef X
}

static void write_devices(const struct report *r, struct out *out)
{
    out_str(out, ",\"devices\":[");
    for (int d = 0; d < r->device_count; d++) {
        const struct report_device *dev = &r->devices[d];
        const struct counters *all = report_counters(r, dev->slot, COUNTER_DEVICE_MEMORY);
        out_str(out, d ? ",{" : "{");
        if (dev->slot == COUNTER_NO_DEVICE)
            out_str(out, "\"device\":null");
        else
            out_printf(out, "\"device\":%d", dev->slot);
        if (dev->has_memory_info) {
            uint64_t used = dev->total - dev->free;
            out_printf(out, ",\"driver_free\":%llu,\"driver_total\":%llu,\"untracked_bytes\":%lld",
                       U(dev->free), U(dev->total), (long long)(used - all->bytes_current));
        } else {
            out_str(out, ",\"driver_free\":null,\"driver_total\":null,\"untracked_bytes\":null");
        }
        if (dev->has_pool) {
            out_str(out, ",\"default_pool\":{");
            write_pool_figures(out, &dev->pool, 0);
            out_str(out, "}");
        } else {
            out_str(out, ",\"default_pool\":null");
        }
        out_printf(out, ",\"tracked_bytes\":%llu,\"counters\":{\"device_memory\":",
                   U(all->bytes_current));
        write_counters(out, all);
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            out_printf(out, ",\"%s\":", kind_name(kind));
            write_counters(out, report_counters(r, dev->slot, kind));
        }
        out_str(out, "}}");
    }
    out_str(out, "]");
}

static void write_stacks(const struct report *r, struct out *out)
{
    out_str(out, ",\"stacks\":[");
    for (uint32_t i = 0; i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        out_printf(out, "%s{\"id\":%u,\"frames\":[", i ? "," : "", r->shown[i]);
        for (uint32_t f = 0; f < s->depth; f++)
            out_printf(out, "%s%ld", f ? "," : "",
                       report_frame_index(r, r->frames[s->first_frame + f]));
        struct frame_view view;
        frames_view(r, s, &view);
        if (view.site >= 0)
            out_printf(out, "],\"site\":%ld,\"hidden\":[", view.site);
        else
            out_str(out, "],\"site\":null,\"hidden\":[");
        for (uint32_t f = 0, n = 0; f < s->depth; f++)
            if (frames_hidden(r, s, f, &view))
                out_printf(out, "%s%u", n++ ? "," : "", f);
        char site[OUTPUT_PATH_MAX + 1024];
        frames_site_line(r, r->shown[i], 2, site, sizeof(site));
        out_str(out, "],\"site_text\":");
        out_json_string(out, site[0] ? site : NULL);
#define X(key, member) out_printf(out, ",\"" key "\":%llu", U(s->stats.member));
        STACK_STATS_FIELDS(X)
#undef X
        int kind, api;
        if (stack_first_use(s, &kind, &api)) {
            out_printf(out, ",\"kind\":\"%s\",\"api\":", kind_name(kind));
            out_json_string(out, report_api_name(r, api));
        } else {
            out_str(out, ",\"kind\":null,\"api\":null");
        }
        const char *label = report_stack_label(r, r->shown[i]);
        out_str(out, ",\"label\":");
        if (label)
            out_json_string(out, label);
        else
            out_str(out, "null");
        out_str(out, ",\"cache_segment\":");
        int cache = 0;
        for (int k = KIND_TORCH_TENSOR; k < KIND_TORCH_TENSOR + CACHE_KINDS && !cache; k++)
            if (s->flags & STACK_CACHE_SEGMENT(k))
                cache = k;
        out_printf(out, cache ? "\"%s\"}" : "null}", kind_name(cache));
    }
    out_str(out, "]");
}

/* Each frame once, by hand: of its keys only four are plain numbers, among
 * strings to escape and keys written only sometimes (mangled, line), so a
 * list in records.h would cut the record in four. test_report_fields
 * compares each read back, but the origin, which the loader works out again. */
static void write_frames(const struct report *r, struct out *out)
{
    out_str(out, ",\"frames\":[");
    for (size_t i = 0; i < r->address_count; i++) {
        const struct symbol *s = &r->symbols[i];
        out_printf(out, "%s{\"id\":%zu,\"address\":\"0x%lx\",\"module\":", i ? "," : "", i,
                   (unsigned long)s->address);
        out_json_string(out, s->module);
        out_printf(out, ",\"module_offset\":%lu,\"function\":", (unsigned long)s->module_offset);
        out_json_string(out, s->function);
        if (s->mangled) {
            out_str(out, ",\"mangled\":");
            out_json_string(out, s->mangled);
        }
        out_printf(out, ",\"function_offset\":%lu,\"file\":", (unsigned long)s->function_offset);
        out_json_string(out, s->file);
        if (s->file)
            out_printf(out, ",\"line\":%d", s->line);
        else
            out_str(out, ",\"line\":null");
        out_printf(out, ",\"python\":%s,\"origin\":\"%s\"}", s->python ? "true" : "false",
                   origin_name(r->origins ? r->origins[i] : ORIGIN_USER));
    }
    out_str(out, "]");
}

/* The fields of a record in the forms records.h names (hex, u64, kind, ...):
 * the value only, after its key. */
static void put_hex(const struct report *r, struct out *out, uint64_t value)
{
    (void)r;
    out_printf(out, "\"0x%llx\"", U(value));
}

static void put_u64(const struct report *r, struct out *out, uint64_t value)
{
    (void)r;
    out_printf(out, "%llu", U(value));
}

static void put_kind(const struct report *r, struct out *out, int kind)
{
    (void)r;
    out_printf(out, "\"%s\"", kind_name(kind));
}

static void put_api(const struct report *r, struct out *out, int api)
{
    out_json_string(out, report_api_name(r, api));
}

static void put_device(const struct report *r, struct out *out, int device)
{
    (void)r;
    if (device >= 0)
        out_printf(out, "%d", device);
    else
        out_str(out, "null");
}

static void put_stack(const struct report *r, struct out *out, uint32_t id)
{
    (void)r;
    out_printf(out, "%u", id);
}

/* A handle's number in the report's table: the stream or pool, or null. */
static void put_handle(const struct report *r, struct out *out, uint32_t handle)
{
    if (handle && handle <= r->handles.count)
        out_printf(out, "\"0x%llx\"", U(r->handles.list[handle - 1]));
    else
        out_str(out, "null");
}

static void put_flag(const struct report *r, struct out *out, int value)
{
    (void)r;
    out_str(out, value ? "true" : "false");
}

static void put_int(const struct report *r, struct out *out, int value)
{
    (void)r;
    out_printf(out, "%d", value);
}

/* The fields `list` (records.h) names of *item_, the first after what
 * `before` holds and the others after a comma: a record's fields among
 * those the caller writes by hand. `r`, `out` and `before` are the
 * writer's. */
#define PUT_FIELD(key, member, form)                                                               \
    out_printf(out, "%s\"" key "\":", before);                                                     \
    put_##form(r, out, item->member);                                                              \
    before = ",";
#define PUT_FIELDS(list, item_)                                                                    \
    do {                                                                                           \
        const __typeof__(*(item_)) *item = (item_);                                                \
        list(PUT_FIELD)                                                                            \
    } while (0)

/* The fields `list` names of *item_, as one object after a comma unless
 * `first`. */
#define PUT_RECORD(list, item_, first)                                                             \
    do {                                                                                           \
        const char *before = (first) ? "{" : ",{"; /* what comes before the next key */            \
        PUT_FIELDS(list, item_);                                                                   \
        out_str(out, "}");                                                                         \
    } while (0)

static void write_device_field(struct out *out, int device)
{
    out_str(out, ",\"device\":");
    put_device(NULL, out, device);
}

static void write_live(const struct report *r, struct out *out)
{
    out_str(out, ",\"live\":[");
    for (size_t i = 0; i < r->group_count; i++)
        PUT_RECORD(REPORT_LIVE_GROUP_FIELDS, &r->groups[i], i == 0);
    size_t listed = r->block_count < (size_t)r->options.max_blocks ? r->block_count
                                                                   : (size_t)r->options.max_blocks;
    out_printf(out, "],\"blocks\":{\"total\":%zu,\"listed\":%zu,\"items\":[", r->block_count,
               listed);
    for (size_t i = 0; i < listed; i++)
        PUT_RECORD(REPORT_BLOCK_FIELDS, &r->blocks[i], i == 0);
    out_str(out, "]}");
}

static void write_failures(const struct report *r, struct out *out)
{
    uint64_t total = r->failures.total, first = RING_FIRST(r->failures.ring, total);
    out_printf(out,
               ",\"failures\":{\"total\":%llu,\"ooms\":%llu,\"oom_retries_succeeded\":%llu,"
               "\"oom_retries_failed\":%llu,\"recent\":[",
               U(total), U(r->failures.ooms), U(r->failures.retries_succeeded),
               U(r->failures.retries_failed));
    for (uint64_t n = first; n <= total; n++) {
        const struct report_failure *f = RING_ENTRY(r->failures.ring, n);
        const char *before = n > first ? ",{" : "{";
        PUT_FIELDS(REPORT_FAILURE_CALL_FIELDS, f);
        out_str(out, ",\"error\":");
        out_json_string(out, cuda_error_name(report_api_name(r, f->api), f->code));
        PUT_FIELDS(REPORT_FAILURE_CONTEXT_FIELDS, f);
        out_str(out, "}");
    }
    out_str(out, "]");
    const struct report_last_oom *oom = &r->last_oom;
    if (oom->verdict[0]) {
        out_str(out, ",\"last_oom\":{\"verdict\":");
        out_json_string(out, oom->verdict);
        out_str(out, ",\"text\":");
        out_json_string(out, oom->text);
        out_printf(out, ",\"size\":%llu,\"stack\":%u,\"time_ms\":%u}", U(oom->size), oom->stack_id,
                   oom->time_ms);
    }
    out_str(out, "}");
}

static void write_marks(const struct report *r, struct out *out)
{
    uint64_t total = r->marks.total, first = RING_FIRST(r->marks.ring, total);
    out_printf(out, ",\"marks\":{\"total\":%llu,\"recent\":[", U(total));
    for (uint64_t n = first; n <= total; n++) {
        const struct report_mark *m = RING_ENTRY(r->marks.ring, n);
        out_str(out, n > first ? ",{\"label\":" : "{\"label\":");
        out_json_string(out, m->label);
        const char *before = ",";
        PUT_FIELDS(REPORT_MARK_FIELDS, m);
        if (r->self_time_ns >= 0)
            out_printf(out, ",\"self_time_ns\":%llu", U(m->self_time_ns));
        out_str(out, "}");
    }
    out_str(out, "]}");
}

/* The fields growing and released entries share, the object left open:
 * its rates, per second (or per mark) and per call, over `calls`. */
static void write_growth_entry(const struct report *r, struct out *out, uint32_t id, double rate,
                               uint64_t calls, double call_rate)
{
    const struct stack *s = &r->stacks[id - 1];
    const struct stack_growth *g = &s->growth;
    out_printf(out,
               "{\"stack\":%u,\"live_bytes\":%llu,\"first_bytes\":%llu,\"first_ms\":%u,"
               "\"last_bytes\":%llu,\"last_ms\":%u,\"rises\":%u,\"falls\":%u,"
               "\"samples_since_first\":%u,\"rate\":%.0f,\"calls\":%llu,\"rate_per_call\":%.0f",
               id, U(report_growth_bytes(r, s)), U(g->first_bytes), g->first_ms, U(g->last_bytes),
               g->last_ms, g->rises, g->falls, r->growth.samples - g->first_sample, rate, U(calls),
               call_rate);
}

/* The findings (findings.c), as the text report opens with them: the HTML
 * page shows them at its top. */
static void write_findings(const struct report *r, struct out *out)
{
    struct report_finding findings[REPORT_FINDINGS_MAX];
    int count = report_findings(r, findings, REPORT_FINDINGS_MAX);
    out_str(out, ",\"findings\":[");
    for (int i = 0; i < count; i++) {
        const struct report_finding *f = &findings[i];
        char site[OUTPUT_PATH_MAX + 1024];
        frames_site_text(r, f->stack_id, site, sizeof(site));
        out_str(out, i ? ",{\"verdict\":" : "{\"verdict\":");
        out_json_string(out, f->verdict);
        out_str(out, ",\"label\":");
        out_json_string(out, f->label);
        if (site[0]) {
            out_printf(out, ",\"stack\":%u,\"site\":", f->stack_id);
            out_json_string(out, site);
        } else {
            out_str(out, ",\"stack\":null,\"site\":null");
        }
        out_printf(out, ",\"detail\":%s,\"bytes\":%llu,\"text\":", f->detail ? "true" : "false",
                   U(f->bytes));
        out_json_string(out, f->text);
        out_str(out, "}");
    }
    out_str(out, "]");
}

static void write_growth(const struct report *r, struct out *out)
{
    if (!r->has_growth) {
        out_str(out, ",\"growth\":null");
        return;
    }
    out_printf(out, ",\"growth\":{\"mode\":\"%s\",\"every\":%llu,\"samples\":%u,\"growing\":[",
               r->growth.mode == GROWTH_MARKS ? "marks" : "work", U(r->growth.every),
               r->growth.samples);
    for (uint32_t i = 0; i < r->growing_count; i++) {
        out_str(out, i ? "," : "");
        const struct stack_growth *g = &r->stacks[r->growing[i] - 1].growth;
        write_growth_entry(r, out, r->growing[i], growth_rate(g, &r->growth), g->calls,
                           growth_call_rate(g));
        out_str(out, "}");
    }
    out_str(out, "],\"released\":[");
    for (uint32_t i = 0; i < r->released_count; i++) {
        const struct stack_growth *g = &r->stacks[r->released[i] - 1].growth;
        out_str(out, i ? "," : "");
        write_growth_entry(r, out, r->released[i], growth_peak_rate(g, &r->growth), g->peak_calls,
                           growth_peak_call_rate(g));
        out_printf(out,
                   ",\"peak_bytes\":%llu,\"peak_ms\":%u,\"peak_rises\":%u,\"peak_falls\":%u,"
                   "\"samples_since_peak\":%u}",
                   U(g->peak_bytes), g->peak_ms, g->peak_rises, g->peak_falls,
                   r->growth.samples - g->peak_sample);
    }
    out_str(out, "]}");
}

static void write_fragmentation(const struct report *r, struct out *out)
{
    struct report_fragmentation f;
    report_fragmentation(r, &f);
    out_printf(out, ",\"fragmentation\":{\"verdict\":\"%s\",\"reason\":", f.verdict);
    out_json_string(out, f.reason);
    out_printf(out,
               ",\"pool_reserved_bytes\":%llu,"
               "\"pool_used_bytes\":%llu,\"pool_idle_bytes\":%llu,\"vmm_reserved_bytes\":%llu,"
               "\"vmm_mapped_bytes\":%llu,\"vmm_unmapped_bytes\":%llu",
               U(f.pool_reserved), U(f.pool_used), U(f.pool_idle), U(f.vmm_reserved),
               U(f.vmm_mapped), U(f.vmm_unmapped));
    if (f.has_torch)
        out_printf(out,
                   ",\"torch_reserved_bytes\":%llu,\"torch_cached_bytes\":%llu,"
                   "\"torch_inactive_split_bytes\":%llu,\"torch_inactive_split_blocks\":%llu}",
                   U(f.torch_reserved), U(f.torch_cached), U(f.torch_inactive_split),
                   U(f.torch_holes));
    else
        out_str(out, ",\"torch_reserved_bytes\":null,\"torch_cached_bytes\":null,"
                     "\"torch_inactive_split_bytes\":null,\"torch_inactive_split_blocks\":null}");
}

/* Stream-ordered pools the program created, with what they reserve and use. */
static void write_pools(const struct report *r, struct out *out)
{
    out_str(out, ",\"pools\":[");
    for (int i = 0; i < r->pool_count; i++) {
        const struct report_pool *p = &r->pools[i];
        out_printf(out, "%s{\"handle\":\"0x%llx\"", i ? "," : "", U(p->handle));
        write_device_field(out, p->device);
        write_pool_figures(out, &p->figures, 1);
        out_str(out, "}");
    }
    out_str(out, "]");
}

/* torch.cuda.memory_stats() per device as PyTorch reported it, or null. */
static void write_torch(const struct report *r, struct out *out)
{
    if (!r->torch.valid) {
        out_str(out, ",\"torch\":null");
        return;
    }
    out_printf(out, ",\"torch\":{\"read\":\"%s\",\"age_ms\":%u,\"now\":%s,\"why_not\":",
               torch_read_name(r->torch.read), report_torch_age_ms(r),
               r->torch.now ? "true" : "false");
    if (r->torch.now || !r->torch.why_not)
        out_str(out, "null");
    else
        out_json_string(out, r->torch.why_not);
    out_str(out, ",\"devices\":[");
    for (int d = 0; d < r->torch.device_count; d++) {
        out_printf(out, "%s{\"device\":%d", d ? "," : "", d);
        for (int i = 0; i < TORCH_FIGURE_COUNT; i++) {
            uint64_t v = r->torch.figures[d][i];
            if (v == TORCH_MISSING)
                out_printf(out, ",\"%s\":null", torch_figure_name(i));
            else
                out_printf(out, ",\"%s\":%llu", torch_figure_name(i), U(v));
        }
        out_str(out, "}");
    }
    out_str(out, "]}");
}

/* What PyTorch's tensors are (report.h's report_classes). */
static void write_classes(const struct report *r, struct out *out)
{
    const struct report_classes *k = &r->classes;
    out_printf(out, ",\"classes\":{\"known\":%s,\"why\":", k->known ? "true" : "false");
    if (k->known)
        out_str(out, "null");
    else
        out_json_string(out, k->why);
    out_printf(out, ",\"read\":\"%s\",\"modules\":%u,\"optimizers\":%u", torch_read_name(k->read),
               k->modules, k->optimizers);
    for (int c = 0; c < REPORT_CLASSES; c++)
        out_printf(out, ",\"%s\":{\"bytes\":%llu,\"blocks\":%llu}", report_class_name(c),
                   U(k->bytes[c]), U(k->blocks[c]));
    out_str(out, ",\"holders\":[");
    for (int i = 0; i < k->holder_count; i++) {
        const struct report_class_holder *h = &k->holders[i];
        out_str(out, i ? ",{\"name\":" : "{\"name\":");
        out_json_string(out, h->name);
        for (int c = 0; c < CLASS_REST; c++)
            out_printf(out, ",\"%s\":%llu", report_class_name(c), U(h->bytes[c]));
        out_str(out, "}");
    }
    out_str(out, "],\"rest_sites\":[");
    for (int i = 0; i < k->site_count; i++)
        out_printf(out, "%s{\"stack\":%u,\"bytes\":%llu,\"blocks\":%llu}", i ? "," : "",
                   k->sites[i].stack_id, U(k->sites[i].bytes), U(k->sites[i].blocks));
    out_str(out, "]}");
}

/* Who holds the tensors (report.h's report_holders). */
static void write_holders(const struct report *r, struct out *out)
{
    const struct report_holders *k = &r->classes.held_by;
    out_printf(out, ",\"holders\":{\"known\":%s,\"why\":", k->known ? "true" : "false");
    if (k->known)
        out_str(out, "null");
    else
        out_json_string(out, k->why);
    out_printf(out, ",\"objects\":%llu,\"ms\":%u,\"cut_short\":", U(k->objects), k->ms);
    if (k->cut[0])
        out_json_string(out, k->cut);
    else
        out_str(out, "null");
    out_str(out, ",\"paths\":[");
    for (int i = 0; i < k->count; i++) {
        const struct report_holder_path *p = &k->paths[i];
        out_printf(out, "%s{\"stack\":%u,\"path\":", i ? "," : "", p->stack_id);
        out_json_string(out, p->path);
        out_str(out, ",\"container\":");
        out_json_string(out, p->container);
        char text[REPORT_CLASS_TEXT + 64];
        report_holder_text(p, text, sizeof(text));
        out_str(out, ",\"text\":");
        out_json_string(out, text);
        out_printf(out, ",\"kind\":\"%s\"", kind_name(p->kind));
        out_printf(out, ",\"tensors\":%llu,\"blocks\":%llu,\"bytes\":%llu}", U(p->tensors),
                   U(p->blocks), U(p->bytes));
    }
    out_str(out, "]}");
}

static void write_event(const struct report *r, struct out *out)
{
    const struct report_event *e = &r->event;
    switch (e->type) {
    case EVENT_SIGNAL:
        out_printf(out, ",\"event\":{\"type\":\"signal\",\"signal\":%d}", e->signal);
        return;
    case EVENT_CRASH:
        out_printf(out, ",\"event\":{\"type\":\"crash\",\"signal\":%d,\"lock\":\"%s\"}", e->signal,
                   e->lock ? e->lock : "unknown");
        return;
    case EVENT_OOM: {
        const char *before = ",";
        out_str(out, ",\"event\":{\"type\":\"oom\"");
        PUT_FIELDS(REPORT_FAILURE_CALL_FIELDS, e);
        out_str(out, ",\"error\":");
        out_json_string(out, cuda_error_name(report_api_name(r, e->api), e->code));
        out_printf(out, ",\"stack\":%u", e->stack_id);
        if (e->has_memory_info)
            out_printf(out, ",\"driver_free\":%llu,\"driver_total\":%llu", U(e->free), U(e->total));
        else
            out_str(out, ",\"driver_free\":null,\"driver_total\":null");
        out_printf(out, ",\"verdict\":\"%s\",\"retry\":\"%s\"", report_verdict(r),
                   retry_names[e->retry]);
        if (kind_in_cache(e->kind)) {
            struct report_cache_oom why;
            report_cache_oom(r, &why);
            const struct report_cache *c = why.cache;
            out_printf(out,
                       ",\"cache\":{\"reserved_bytes\":%llu,\"block_bytes\":%llu,"
                       "\"unused_bytes\":%llu,\"hole_bytes\":%llu,\"holes\":%llu,"
                       "\"largest_hole_bytes\":%llu,\"releasable_bytes\":%llu,"
                       "\"others_bytes\":%llu",
                       U(c->reserved), U(c->block_bytes), U(c->unused), U(c->hole_bytes),
                       U(c->holes), U(c->largest_hole), U(c->releasable), U(why.others));
            if (e->kind == KIND_TORCH_TENSOR)
                out_printf(out,
                           ",\"small_pool_largest_hole_bytes\":%llu,"
                           "\"large_pool_largest_hole_bytes\":%llu",
                           U(c->largest_small_hole), U(c->largest_large_hole));
            if (strcmp(report_verdict(r), "cache_fragmented") == 0) {
                char hole_why[320];
                out_str(out, ",\"hole_why\":");
                out_json_string(out, report_hole_why(r, c, hole_why, sizeof(hole_why)));
            }
            out_str(out, "}");
        }
        out_str(out, "}");
        return;
    }
    default: out_str(out, ",\"event\":null");
    }
}

/* Live bytes per device (0-7) and kind at growth samples, for the kinds
 * each device used: [time_ms, bytes] pairs. */
static void write_series(const struct report *r, struct out *out)
{
    const struct series_state *s = r->series;
    if (!s)
        return;
    out_printf(out, ",\"series\":{\"kept_every\":%u,\"samples\":%u,\"tracks\":[", s->every,
               s->count);
    int first = 1;
    for (int device = 0; device < SERIES_DEVICES; device++) {
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            if (!report_counters(r, device, kind)->blocks_allocated)
                continue;
            out_printf(out, "%s{\"device\":%d,\"kind\":\"%s\",\"points\":[", first ? "" : ",",
                       device, kind_name(kind));
            first = 0;
            for (uint32_t i = 0; i < s->count; i++)
                out_printf(out, "%s[%u,%llu]", i ? "," : "", s->samples[i].time_ms,
                           U(s->samples[i].bytes[device][kind]));
            out_str(out, "]}");
        }
    }
    out_str(out, "]}");
}

/* The event timeline, only when it was on: one array per event, oldest
 * first, [time_us, event, address, size, device, kind, stack] and for marks
 * a label as well (null when the mark ring no longer holds it). */
static void write_timeline(const struct report *r, struct out *out)
{
    if (!r->has_timeline)
        return;
    out_printf(out,
               ",\"timeline\":{\"capacity\":%llu,\"recorded\":%llu,\"dropped\":%llu,"
               "\"columns\":[\"time_us\",\"event\",\"address\",\"size\",\"device\","
               "\"kind\",\"stack\",\"label\"],\"events\":[",
               U(r->timeline_capacity), U(r->timeline_total),
               U(r->timeline_total - r->timeline_count));
    for (size_t i = 0; i < r->timeline_count; i++) {
        const struct timeline_event *e = &r->timeline[i];
        out_printf(out, "%s[%llu,\"%s\",", i ? "," : "", U(e->time_us),
                   timeline_type_name(e->type));
        if (e->type == TIMELINE_MARK) {
            out_printf(out, "null,%llu,null,null,0,", U(e->size));
            out_json_string(out, report_mark_label(r, e->size));
            out_str(out, "]");
            continue;
        }
        out_printf(out, "\"0x%llx\",%llu,", U(e->value), U(e->size));
        if (e->device >= 0)
            out_printf(out, "%d,", e->device);
        else
            out_str(out, "null,");
        out_printf(out, "\"%s\",%u]", kind_name(e->kind), e->stack_id);
    }
    out_str(out, "]}");
}

static const char *const view_names[] =
    {[CACHE_UNSEEN] = "unseen", [CACHE_BLOCKS] = "blocks", [CACHE_SEGMENTS] = "segments"};

/* Each framework seen: whether its blocks are recorded, and its cache per
 * device (report.h, struct report_cache). */
static void write_caches(const struct report *r, struct out *out)
{
    out_str(out, ",\"caches\":[");
    int first = 1;
    for (int i = 0; i < CACHE_KINDS; i++) {
        const struct report_cache_view *seen = &r->cache_views[i];
        int kind = KIND_TORCH_TENSOR + i, devices = 0;
        for (int c = 0; c < r->cache_count; c++)
            devices += r->caches[c].kind == kind;
        if (seen->view == CACHE_UNSEEN && !devices)
            continue;
        out_printf(out, "%s{\"kind\":\"%s\",\"view\":\"%s\",\"why\":", first ? "" : ",",
                   kind_name(kind), view_names[seen->view]);
        first = 0;
        out_json_string(out, seen->why);
        if (seen->view == CACHE_BLOCKS)
            out_printf(out, ",\"since_ms\":%u,\"devices\":[", seen->since_ms);
        else
            out_str(out, ",\"since_ms\":null,\"devices\":[");
        for (int c = 0, n = 0; c < r->cache_count; c++) {
            const struct report_cache *x = &r->caches[c];
            if (x->kind != kind)
                continue;
            out_str(out, n++ ? ",{" : "{");
            out_printf(out, x->device >= 0 ? "\"device\":%d" : "\"device\":null", x->device);
            out_printf(out,
                       ",\"reserved_bytes\":%llu,\"segments\":%llu,\"block_bytes\":%llu,"
                       "\"blocks\":%llu,\"unused_bytes\":%llu,\"hole_bytes\":%llu,"
                       "\"holes\":%llu,\"largest_hole_bytes\":%llu,"
                       "\"releasable_bytes\":%llu",
                       U(x->reserved), U(x->segments), U(x->block_bytes), U(x->blocks),
                       U(x->unused), U(x->hole_bytes), U(x->holes), U(x->largest_hole),
                       U(x->releasable));
            if (kind == KIND_TORCH_TENSOR)
                out_printf(out,
                           ",\"small_pool_largest_hole_bytes\":%llu,"
                           "\"large_pool_largest_hole_bytes\":%llu",
                           U(x->largest_small_hole), U(x->largest_large_hole));
            out_str(out, "}");
        }
        out_str(out, "]}");
    }
    out_str(out, "]");
}

/* The end of a Python program, before its interpreter's teardown: device
 * memory live then, where the timeline's events after it begin, and what was
 * held then and freed by the teardown (held.c). */
static void write_program_end(const struct report *r, struct out *out)
{
    if (!r->end.ended) {
        out_str(out, ",\"program_end\":null,\"held_at_end\":[]");
        return;
    }
    out_printf(out, ",\"program_end\":{\"time_ms\":%u", r->end.time_ms);
    if (r->end.has_device_bytes) { /* not known in a report read back from an older one */
        out_str(out, ",\"devices\":[");
        for (int d = 0; d < r->device_count; d++) {
            int slot = r->devices[d].slot;
            out_str(out, d ? "," : "");
            out_printf(out, slot == COUNTER_NO_DEVICE ? "{\"device\":null" : "{\"device\":%d",
                       slot);
            out_printf(out, ",\"live_bytes\":%llu}", U(r->end.device_bytes[slot]));
        }
        out_str(out, "]");
    }
    if (r->has_timeline)
        out_printf(out, ",\"timeline_index\":%zu},\"held_at_end\":[", r->timeline_end);
    else
        out_str(out, ",\"timeline_index\":null},\"held_at_end\":[");
    for (size_t i = 0; i < r->held_count; i++)
        PUT_RECORD(REPORT_HELD_GROUP_FIELDS, &r->held[i], i == 0);
    out_str(out, "]");
}

static void write_threads(const struct report *r, struct out *out)
{
    out_str(out, ",\"threads\":[");
    for (uint32_t i = 0; i < r->threads.count; i++) {
        out_printf(out, "%s{\"number\":%u,\"tid\":%d,\"name\":", i ? "," : "", i + 1,
                   r->threads.list[i].tid);
        out_json_string(out, r->threads.list[i].name);
        out_str(out, "}");
    }
    out_str(out, "]");
}

void report_json(const struct report *r, struct out *out)
{
    out_printf(out, "{\"format\":\"cumemtrace-report\",\"version\":%d,\"reason\":",
               REPORT_FORMAT_VERSION);
    out_json_string(out, r->reason);
    out_str(out, ",");
    write_process(r, out);
    write_event(r, out);
    write_findings(r, out);
    write_tracer(r, out);
    write_entry_points(r, out);
    write_devices(r, out);
    write_torch(r, out);
    write_classes(r, out);
    write_holders(r, out);
    write_pools(r, out);
    write_caches(r, out);
    write_live(r, out);
    write_program_end(r, out);
    write_stacks(r, out);
    write_frames(r, out);
    write_failures(r, out);
    write_marks(r, out);
    write_growth(r, out);
    write_fragmentation(r, out);
    write_threads(r, out);
    write_series(r, out);
    write_timeline(r, out);
    out_str(out, "}\n");
}
