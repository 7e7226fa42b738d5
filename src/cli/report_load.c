/* report_load.c - a JSON report or a crash dump read back into a report.
 *
 * A crash dump goes to dump_read(), which symbolizes it against the files
 * its maps name. A JSON report is parsed whole (json.c) and its sections are
 * copied into the arrays a collected report has, through report_alloc, so
 * report_release frees them as it does for a live report. Strings (reason,
 * entry points, symbols) point into the parsed document, which the
 * loaded report owns until report_unload.
 *
 * What the text writer needs comes back exactly: counters per device and
 * kind, driver free/total, pools (default and created), PyTorch's own
 * counters, live groups, stacks with their statistics
 * and growth summaries, frames with their symbols (addresses sorted, so
 * report_frame_index finds them), failures, marks, the event and the lost
 * counts, and the event timeline and coarse series when the file has them
 * (the HTML report and the exports draw them). The report is never
 * "finished" (report_finish): groups come from the file's "live" section,
 * not from the listed blocks, which may be fewer than all
 * (CUMEMTRACE_MAX_BLOCKS), and no symbolizer is opened. C++ names the
 * traced program could not demangle (it had no C++ runtime loaded) are
 * demangled here, with the C++ runtime loaded on the first such name, so
 * that every writer and every comparison of reports sees one form. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "dump_read.h"
#include "frames.h"
#include "kinds.h"
#include "report_load.h"

/* The loader's cursor: the report, and the first error. */
struct loader {
    struct report *r;
    const char **api_names; /* r->api_names, writable */
    char *error;
    size_t error_size;
    int failed;
    int unmarked;       /* live groups without held_at_end: an older report */
    demangler demangle; /* looked for at the first mangled name */
    int demangler_sought;
    int blocks_unmarked; /* listed blocks without it: an older report */
};

static void fail(struct loader *l, const char *what)
{
    if (!l->failed)
        snprintf(l->error, l->error_size, "not a cumemtrace report: %s", what);
    l->failed = 1;
}

static uint64_t get_u64(const struct json_value *object, const char *key)
{
    uint64_t value = 0;
    const struct json_value *v = json_get(object, key);
    if (json_uint(v, &value) == 0)
        return value;
    double d;
    if (json_number(v, &d) == 0 && d > 0) /* 1e3, or beyond 2^64 */
        return d < 18446744073709551616.0 ? (uint64_t)d : UINT64_MAX;
    return 0;
}

/* A small signed integer; `missing` for null or absent. */
static long get_long(const struct json_value *object, const char *key, long missing)
{
    double d;
    if (json_number(json_get(object, key), &d) < 0)
        return missing;
    if (d < -2147483648.0 || d > 2147483647.0) /* pids, ranks, lines, codes: all int */
        return missing;
    return (long)d;
}

static uint64_t get_hex(const struct json_value *object, const char *key)
{
    const char *text = json_string(json_get(object, key));
    return text ? strtoull(text, NULL, 16) : 0;
}

static const struct json_value *get_array(struct loader *l, const struct json_value *object,
                                          const char *key)
{
    const struct json_value *v = json_get(object, key);
    if (!v || v->type != JSON_ARRAY) {
        char what[96];
        snprintf(what, sizeof(what), "no \"%s\" list", key);
        fail(l, what);
        return NULL;
    }
    return v;
}

/* The index of an entry point's name, added if new; -1 if the table is full. */
static int api_index(struct loader *l, const char *name)
{
    struct report *r = l->r;
    if (!name)
        return -1;
    for (int i = 0; i < r->api_count; i++)
        if (strcmp(l->api_names[i], name) == 0)
            return i;
    if (r->api_count == MAX_APIS)
        return -1;
    l->api_names[r->api_count] = name;
    return r->api_count++;
}

/* The fields of a record in the forms records.h names (hex, u64, kind, ...):
 * the value at `key` of `object`, or a failure for one that cannot be. */
static uint64_t read_hex(struct loader *l, const struct json_value *object, const char *key)
{
    (void)l;
    return get_hex(object, key);
}

static uint64_t read_u64(struct loader *l, const struct json_value *object, const char *key)
{
    (void)l;
    return get_u64(object, key);
}

static int read_kind(struct loader *l, const struct json_value *object, const char *key)
{
    const char *name = json_string(json_get(object, key));
    for (int kind = 0; name && kind < KIND_COUNT; kind++)
        if (strcmp(kind_name(kind), name) == 0)
            return kind;
    char what[96];
    snprintf(what, sizeof(what), "an unknown \"%s\"", key);
    fail(l, what);
    return 0;
}

static int read_api(struct loader *l, const struct json_value *object, const char *key)
{
    return api_index(l, json_string(json_get(object, key)));
}

/* A device number; -1 for null (not known). */
static int read_device(struct loader *l, const struct json_value *object, const char *key)
{
    (void)l;
    long device = get_long(object, key, -1);
    return device >= 0 && device < MAX_DEVICES ? (int)device : -1;
}

/* A stack id, checked against the table (0: none). */
static uint32_t read_stack(struct loader *l, const struct json_value *object, const char *key)
{
    uint64_t id = get_u64(object, key);
    if (id > l->r->stack_count) {
        fail(l, "a stack id that is not in \"stacks\"");
        return 0;
    }
    return (uint32_t)id;
}

/* A stream or pool: its number in the report's table of handles, the
 * handle added to it (0: null, or the table full). */
static uint16_t read_handle(struct loader *l, const struct json_value *object, const char *key)
{
    struct report_handles *handles = &l->r->handles;
    if (!json_string(json_get(object, key)) || handles->count == UINT16_MAX)
        return 0;
    handles->list[handles->count++] = get_hex(object, key);
    return (uint16_t)handles->count;
}

static int read_flag(struct loader *l, const struct json_value *object, const char *key)
{
    (void)l;
    const struct json_value *v = json_get(object, key);
    return v && v->type == JSON_TRUE;
}

static int read_int(struct loader *l, const struct json_value *object, const char *key)
{
    (void)l;
    return (int)get_long(object, key, 0);
}

/* The fields `list` (records.h) names, from `object_` into *item_; `l` is
 * the loader's. */
#define READ_FIELD(key, member, form)                                                              \
    item->member = (__typeof__(item->member))read_##form(l, object, key);
#define READ_RECORD(list, item_, object_)                                                          \
    do {                                                                                           \
        __typeof__(item_) item = (item_);                                                          \
        const struct json_value *object = (object_);                                               \
        list(READ_FIELD)                                                                           \
    } while (0)

static void *alloc_array(struct loader *l, size_t count, size_t size)
{
    if (count >= SIZE_MAX / size - 1) {
        fail(l, "a count too large");
        return NULL;
    }
    void *p = report_alloc(l->r, (count + 1) * size);
    if (!p && !l->failed) {
        snprintf(l->error, l->error_size, "out of memory");
        l->failed = 1;
    }
    return p;
}

static void load_process(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *process = json_get(root, "process");
    if (!process || process->type != JSON_OBJECT) {
        fail(l, "no \"process\" object");
        return;
    }
    r->pid = (int)get_long(process, "pid", 0);
    r->ppid = (int)get_long(process, "ppid", 0);
    const char *host = json_string(json_get(process, "host"));
    snprintf(r->hostname, sizeof(r->hostname), "%s", host ? host : "");
    const char *cwd = json_string(json_get(process, "cwd"));
    snprintf(r->start_dir, sizeof(r->start_dir), "%s", cwd ? cwd : "");
    r->rank = (int)get_long(process, "rank", -1);
    r->local_rank = (int)get_long(process, "local_rank", -1);
    r->world_size = (int)get_long(process, "world_size", -1);
    double d = 0;
    if (json_number(json_get(process, "start_time"), &d) == 0)
        r->start_unix = d;
    if (json_number(json_get(process, "time"), &d) == 0)
        r->now_unix = d;
    if (json_number(json_get(process, "duration_s"), &d) == 0 && d > 0 && d < 4294967.0)
        r->now_ms = (uint32_t)(d * 1000.0 + 0.5);
    const struct json_value *argv = json_get(process, "argv");
    for (const struct json_value *a = argv ? argv->first : NULL; a; a = a->next) {
        const char *text = json_string(a);
        size_t n = text ? strlen(text) + 1 : 0;
        if (!n || r->argv_bytes + n > sizeof(r->argv))
            break;
        memcpy(r->argv + r->argv_bytes, text, n);
        r->argv_bytes += n;
    }
}

static void load_event(struct loader *l, const struct json_value *root)
{
    struct report_event *e = &l->r->event;
    const struct json_value *event = json_get(root, "event");
    const char *type = json_string(json_get(event, "type"));
    if (!type)
        return; /* null: the end of the process, or a snapshot */
    e->signal = (int)get_long(event, "signal", 0);
    if (strcmp(type, "signal") == 0) {
        e->type = EVENT_SIGNAL;
    } else if (strcmp(type, "crash") == 0) {
        e->type = EVENT_CRASH;
        e->lock = dump_lock_name(json_string(json_get(event, "lock")));
    } else if (strcmp(type, "oom") == 0) {
        e->type = EVENT_OOM;
        READ_RECORD(REPORT_FAILURE_CALL_FIELDS, e, event); /* "error": the code's name */
        e->stack_id = (uint32_t)get_u64(event, "stack");
        const struct json_value *free_bytes = json_get(event, "driver_free");
        if (free_bytes && free_bytes->type == JSON_NUMBER) {
            e->has_memory_info = 1;
            e->free = get_u64(event, "driver_free");
            e->total = get_u64(event, "driver_total");
        }
        const char *retry = json_string(json_get(event, "retry"));
        for (int i = 0; retry && i < RETRY_COUNT; i++)
            if (strcmp(retry, retry_names[i]) == 0)
                e->retry = i;
    } else {
        fail(l, "an unknown event type");
    }
}

static void load_tracer(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *tracer = json_get(root, "tracer");
    r->registry_bytes = (size_t)get_u64(tracer, "registry_bytes");
    r->stacks_bytes = (size_t)get_u64(tracer, "stack_table_bytes");
    /* The run's own stack settings, not the reading command's: a report
     * written again says what the run recorded. */
    if (json_get(tracer, "depth"))
        r->options.depth = (int)get_u64(tracer, "depth");
    if (json_get(tracer, "min_size"))
        r->options.min_size = get_u64(tracer, "min_size");
    const struct json_value *self_time = json_get(tracer, "self_time_ns");
    r->self_time_ns =
        self_time && self_time->type == JSON_NUMBER ? (int64_t)get_u64(tracer, "self_time_ns") : -1;
    /* The packages the process took for the user's own: its frames get the
     * origins it gave them, unless the command names its own. */
    r->user_packages = json_string(json_get(tracer, "user_packages"));
    const struct json_value *all_frames = json_get(tracer, "all_frames");
    r->all_frames = r->options.all_frames || (all_frames && all_frames->type == JSON_TRUE);
    const struct json_value *lost = json_get(tracer, "lost");
    for (int i = 0; i < LOST_COUNT; i++)
        r->lost[i] = get_u64(lost, lost_names[i]);
    const struct json_value *entries = json_get(root, "entry_points");
    for (const struct json_value *e = entries ? entries->first : NULL; e; e = e->next) {
        int api = api_index(l, json_string(json_get(e, "name")));
        if (api < 0)
            continue;
        r->api_calls[api] = get_u64(e, "calls");
        r->api_allocations[api] = get_u64(e, "allocations");
        r->api_failures[api] = get_u64(e, "failures");
    }
}

static void load_counters(const struct json_value *from, struct counters *c)
{
    for (int i = 0; i < COUNTER_KEY_COUNT; i++) {
        const struct counter_key *k = &counter_keys[i];
        *counter_figure(c, i) = get_u64(k->group ? json_get(from, k->group) : from, k->key);
    }
}

/* A figure that may be null: `missing` then. */
static uint64_t get_figure(const struct json_value *object, const char *key, uint64_t missing)
{
    const struct json_value *v = json_get(object, key);
    return v && v->type == JSON_NUMBER ? get_u64(object, key) : missing;
}

static void load_pool_figures(const struct json_value *from, struct pool_figures *figures)
{
#define X(field, key) figures->field = get_figure(from, key, POOL_FIGURE_UNKNOWN);
    POOL_FIGURE_KEYS(X)
#undef X
}

static void load_devices(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *devices = get_array(l, root, "devices");
    r->counters = alloc_array(l, 1, sizeof(*r->counters));
    if (!devices || !r->counters)
        return;
    for (const struct json_value *d = devices->first; d; d = d->next) {
        if (r->device_count == MAX_DEVICES + 1) {
            fail(l, "more devices than a report can hold");
            return;
        }
        int device = read_device(l, d, "device");
        int slot = device >= 0 ? device : COUNTER_NO_DEVICE;
        struct report_device *dev = &r->devices[r->device_count++];
        dev->slot = slot;
        const struct json_value *free_bytes = json_get(d, "driver_free");
        if (free_bytes && free_bytes->type == JSON_NUMBER) {
            dev->has_memory_info = 1;
            dev->free = get_u64(d, "driver_free");
            dev->total = get_u64(d, "driver_total");
        }
        const struct json_value *pool = json_get(d, "default_pool");
        if (pool && pool->type == JSON_OBJECT) {
            dev->has_pool = 1;
            load_pool_figures(pool, &dev->pool);
        }
        const struct json_value *counters = json_get(d, "counters");
        r->counters->device_seen[slot] = 1;
        load_counters(json_get(counters, "device_memory"),
                      &r->counters->sets[slot][COUNTER_DEVICE_MEMORY]);
        for (int kind = 0; kind < KIND_COUNT; kind++)
            load_counters(json_get(counters, kind_name(kind)), &r->counters->sets[slot][kind]);
    }
}

/* Stream-ordered pools the program created; PyTorch's own counters. */
static void load_pools_and_torch(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *pools = json_get(root, "pools");
    for (const struct json_value *p = pools ? pools->first : NULL; p; p = p->next) {
        if (r->pool_count == REPORT_MAX_POOLS) {
            fail(l, "more pools than a report can hold");
            return;
        }
        struct report_pool *pool = &r->pools[r->pool_count++];
        pool->handle = get_hex(p, "handle");
        pool->device = read_device(l, p, "device");
        load_pool_figures(p, &pool->figures);
    }
    const struct json_value *torch = json_get(root, "torch");
    if (!torch || torch->type != JSON_OBJECT)
        return;
    int read = torch_read_of(json_string(json_get(torch, "read")));
    r->torch.valid = 1;
    r->torch.read = read < 0 ? TORCH_READ_SAMPLE : read;
    const struct json_value *now = json_get(torch, "now");
    r->torch.now = now && now->type == JSON_TRUE;
    r->torch.why_not = json_string(json_get(torch, "why_not"));
    uint64_t age = get_u64(torch, "age_ms");
    r->torch.time_ms = age <= r->now_ms ? r->now_ms - (uint32_t)age : 0;
    const struct json_value *devices = json_get(torch, "devices");
    for (const struct json_value *d = devices ? devices->first : NULL; d; d = d->next) {
        int device = read_device(l, d, "device");
        if (device < 0) {
            fail(l, "a PyTorch device without a number");
            return;
        }
        if (device >= r->torch.device_count)
            r->torch.device_count = device + 1;
        for (int i = 0; i < TORCH_FIGURE_COUNT; i++)
            r->torch.figures[device][i] = get_figure(d, torch_figure_name(i), TORCH_MISSING);
    }
}

/* A frame's function demangled, where the report has it as linked only:
 * `mangled` keeps that form, as the writer would have. */
static void demangle_function(struct loader *l, struct symbol *s)
{
    if (s->mangled || !s->function || strncmp(s->function, "_Z", 2) != 0)
        return;
    if (!l->demangler_sought) {
        l->demangle = symbol_demangler(dlsym, 1);
        l->demangler_sought = 1;
    }
    char *plain = symbol_demangle(l->demangle, s->function);
    if (!plain)
        return;
    size_t n = strlen(plain) + 1;
    char *kept = alloc_array(l, n, 1);
    if (kept) {
        memcpy(kept, plain, n);
        s->mangled = s->function;
        s->function = kept;
    }
    free(plain); /* __cxa_demangle's own malloc */
}

/* What PyTorch's tensors were (report.h's report_classes). A report from
 * before the split was written says it was not known. */
static void load_classes(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    struct report_classes *k = &r->classes;
    const struct json_value *classes = json_get(root, "classes");
    if (!classes || classes->type != JSON_OBJECT) {
        report_classes_unknown(k, "this report was written before tensors were classed");
        return;
    }
    const struct json_value *known = json_get(classes, "known");
    k->known = known && known->type == JSON_TRUE;
    const char *why = json_string(json_get(classes, "why"));
    snprintf(k->why, sizeof(k->why), "%s", why ? why : "");
    int read = torch_read_of(json_string(json_get(classes, "read")));
    k->read = read < 0 ? TORCH_READ_SAMPLE : read;
    k->modules = (uint32_t)get_u64(classes, "modules");
    k->optimizers = (uint32_t)get_u64(classes, "optimizers");
    for (int c = 0; c < REPORT_CLASSES; c++) {
        const struct json_value *figure = json_get(classes, report_class_name(c));
        k->bytes[c] = get_u64(figure, "bytes");
        k->blocks[c] = get_u64(figure, "blocks");
    }
    const struct json_value *holders = json_get(classes, "holders");
    for (const struct json_value *h = holders ? holders->first : NULL;
         h && k->holder_count < REPORT_CLASS_HOLDERS; h = h->next) {
        struct report_class_holder *holder = &k->holders[k->holder_count++];
        const char *name = json_string(json_get(h, "name"));
        snprintf(holder->name, sizeof(holder->name), "%s", name ? name : "?");
        for (int c = 0; c < CLASS_REST; c++)
            holder->bytes[c] = get_u64(h, report_class_name(c));
    }
    const struct json_value *sites = json_get(classes, "rest_sites");
    for (const struct json_value *s = sites ? sites->first : NULL;
         s && k->site_count < REPORT_CLASS_SITES; s = s->next) {
        uint64_t stack = get_u64(s, "stack");
        if (stack < 1 || stack > r->stack_count) {
            fail(l, "a class's site names no stack");
            return;
        }
        k->sites[k->site_count++] =
            (struct report_class_site){(uint32_t)stack, get_u64(s, "bytes"), get_u64(s, "blocks")};
    }
}

/* Who held the tensors (report.h's report_holders); a report from before
 * the walk says it was not walked. */
static void load_holders(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    struct report_holders *k = &r->classes.held_by;
    memset(k, 0, sizeof(*k));
    const struct json_value *holders = json_get(root, "holders");
    if (!holders || holders->type != JSON_OBJECT) {
        snprintf(k->why, sizeof(k->why), "this report was written before holders were named");
        return;
    }
    const struct json_value *known = json_get(holders, "known");
    k->known = known && known->type == JSON_TRUE;
    const char *why = json_string(json_get(holders, "why"));
    snprintf(k->why, sizeof(k->why), "%s", why ? why : "");
    const char *cut = json_string(json_get(holders, "cut_short"));
    snprintf(k->cut, sizeof(k->cut), "%s", cut ? cut : "");
    k->objects = get_u64(holders, "objects");
    k->ms = (uint32_t)get_u64(holders, "ms");
    const struct json_value *paths = json_get(holders, "paths");
    for (const struct json_value *p = paths ? paths->first : NULL;
         p && k->count < REPORT_HOLDER_PATHS; p = p->next) {
        uint64_t stack = get_u64(p, "stack");
        if (stack < 1 || stack > r->stack_count) {
            fail(l, "a holder's path names no stack");
            return;
        }
        struct report_holder_path *h = &k->paths[k->count++];
        const char *path = json_string(json_get(p, "path"));
        const char *container = json_string(json_get(p, "container"));
        h->stack_id = (uint32_t)stack;
        snprintf(h->path, sizeof(h->path), "%s", path ? path : "?");
        snprintf(h->container, sizeof(h->container), "%s", container ? container : "");
        h->kind = read_kind(l, p, "kind");
        h->tensors = get_u64(p, "tensors");
        h->blocks = get_u64(p, "blocks");
        h->bytes = get_u64(p, "bytes");
    }
}

/* Frames: the symbols as written, addresses in the order of their ids,
 * which the writer makes ascending (report_frame_index searches them). */
static void load_frames(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *frames = get_array(l, root, "frames");
    if (!frames)
        return;
    r->addresses = alloc_array(l, frames->length, sizeof(uintptr_t));
    r->symbols = alloc_array(l, frames->length, sizeof(struct symbol));
    if (!r->addresses || !r->symbols)
        return;
    for (const struct json_value *f = frames->first; f; f = f->next) {
        size_t id = r->address_count++;
        if (get_u64(f, "id") != id) {
            fail(l, "frame ids out of order");
            return;
        }
        struct symbol *s = &r->symbols[id];
        s->address = (uintptr_t)get_hex(f, "address");
        s->module = json_string(json_get(f, "module"));
        s->module_offset = (uintptr_t)get_u64(f, "module_offset");
        s->function = json_string(json_get(f, "function"));
        s->mangled = json_string(json_get(f, "mangled"));
        demangle_function(l, s);
        s->function_offset = (uintptr_t)get_u64(f, "function_offset");
        s->file = json_string(json_get(f, "file"));
        s->line = (int)get_long(f, "line", 0);
        const struct json_value *python = json_get(f, "python");
        s->python = python && python->type == JSON_TRUE;
        r->addresses[id] = s->address;
        if (id > 0 && r->addresses[id] <= r->addresses[id - 1]) {
            fail(l, "frame addresses not in ascending order");
            return;
        }
    }
}

/* Stacks: the ones the writer showed, in its order (by live bytes). Ids
 * keep their numbers; the stacks not shown stay empty. */
/* A kind named at `key`, if it is a cache's; 0 if not (or null). */
static int cache_kind_at(const struct json_value *object, const char *key)
{
    const char *name = json_string(json_get(object, key));
    for (int kind = KIND_TORCH_TENSOR; name && kind < KIND_TORCH_TENSOR + CACHE_KINDS; kind++)
        if (strcmp(kind_name(kind), name) == 0)
            return kind;
    return 0;
}

static void load_stacks(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *stacks = get_array(l, root, "stacks");
    if (!stacks || l->failed)
        return;
    uint64_t count = get_u64(json_get(root, "tracer"), "stacks");
    if (count > UINT32_MAX / 2) {
        fail(l, "more stacks than a report can hold");
        return;
    }
    size_t frame_count = 0;
    for (const struct json_value *s = stacks->first; s; s = s->next) {
        uint64_t id = get_u64(s, "id");
        const struct json_value *frames = json_get(s, "frames");
        if (id == 0 || id > UINT32_MAX / 2 || !frames || frames->type != JSON_ARRAY) {
            fail(l, "a stack without an id or frames");
            return;
        }
        if (id > count)
            count = id;
        frame_count += frames->length;
    }
    r->stack_count = (uint32_t)count;
    r->stacks = alloc_array(l, count, sizeof(struct stack));
    r->frames = alloc_array(l, frame_count, sizeof(uintptr_t));
    r->shown = alloc_array(l, stacks->length, sizeof(uint32_t));
    r->by_peak = alloc_array(l, stacks->length, sizeof(uint32_t));
    if (!r->stacks || !r->frames || !r->shown || !r->by_peak)
        return;
    uint64_t at = 0;
    for (const struct json_value *s = stacks->first; s; s = s->next) {
        uint32_t id = (uint32_t)get_u64(s, "id");
        struct stack *stack = &r->stacks[id - 1];
        stack->first_frame = at;
        for (const struct json_value *f = json_get(s, "frames")->first; f; f = f->next) {
            uint64_t index = 0;
            if (json_uint(f, &index) < 0 || index >= r->address_count) {
                fail(l, "a stack names a frame that is not in \"frames\"");
                return;
            }
            r->frames[at++] = r->addresses[index];
            stack->depth++;
        }
#define X(key, member) stack->stats.member = get_u64(s, key);
        STACK_STATS_FIELDS(X)
#undef X
        int cache = cache_kind_at(s, "cache_segment");
        if (cache)
            stack->flags |= STACK_CACHE_SEGMENT(cache);
        if (json_string(json_get(s, "kind")))
            stack_note_use(stack, read_kind(l, s, "kind"), read_api(l, s, "api"));
        r->shown[r->shown_count++] = id;
    }
    memcpy(r->by_peak, r->shown, r->shown_count * sizeof(uint32_t));
    report_order_by_peak(r, r->by_peak, r->shown_count);
}

static void load_live(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *live = get_array(l, root, "live");
    if (!live || l->failed)
        return;
    r->groups = alloc_array(l, live->length, sizeof(*r->groups));
    if (!r->groups)
        return;
    for (const struct json_value *g = live->first; g; g = g->next) {
        READ_RECORD(REPORT_LIVE_GROUP_FIELDS, &r->groups[r->group_count++], g);
        l->unmarked |= !json_get(g, "held_at_end");
    }
    /* The blocks listed one by one (all of them, or the largest). */
    const struct json_value *items = json_get(json_get(root, "blocks"), "items");
    size_t count = items && items->type == JSON_ARRAY ? items->length : 0;
    r->blocks = alloc_array(l, count, sizeof(*r->blocks));
    r->handles.list = alloc_array(l, count, sizeof(uint64_t));
    if (!r->blocks || !r->handles.list)
        return;
    for (const struct json_value *b = count ? items->first : NULL; b; b = b->next) {
        READ_RECORD(REPORT_BLOCK_FIELDS, &r->blocks[r->block_count++], b);
        l->blocks_unmarked |= !json_get(b, "held_at_end");
    }
}

/* The failures section (run.h, struct report_failures) and the last OOM's
 * verdict. */
static void load_failures(struct loader *l, const struct json_value *root)
{
    struct report_failures *failures = &l->r->failures;
    const struct json_value *section = json_get(root, "failures");
    failures->total = get_u64(section, "total");
    if (failures->total > INPUT_MAX_COUNT)
        failures->total = INPUT_MAX_COUNT;
    failures->retries_succeeded = get_u64(section, "oom_retries_succeeded");
    failures->retries_failed = get_u64(section, "oom_retries_failed");
    failures->ooms = (uint32_t)get_u64(section, "ooms");
    /* An older report does not number its OOMs: each failed call is one. */
    int numbered = json_get(section, "ooms") != NULL;
    const struct json_value *recent = json_get(section, "recent");
    uint64_t n = RING_FIRST(failures->ring, failures->total);
    for (const struct json_value *f = recent ? recent->first : NULL; f && n <= failures->total;
         f = f->next, n++) {
        struct report_failure *x = RING_ENTRY(failures->ring, n);
        READ_RECORD(REPORT_FAILURE_CALL_FIELDS, x, f); /* "error": the code's name */
        READ_RECORD(REPORT_FAILURE_CONTEXT_FIELDS, x, f);
        if (!numbered && x->oom)
            x->oom_number = ++failures->ooms;
    }
    struct report_last_oom *last = &l->r->last_oom;
    const struct json_value *oom = json_get(section, "last_oom");
    const char *verdict = json_string(json_get(oom, "verdict"));
    const char *text = json_string(json_get(oom, "text"));
    if (verdict && text) {
        snprintf(last->verdict, sizeof(last->verdict), "%s", verdict);
        snprintf(last->text, sizeof(last->text), "%s", text);
        last->size = get_u64(oom, "size");
        last->stack_id = read_stack(l, oom, "stack");
        last->time_ms = (uint32_t)get_u64(oom, "time_ms");
    }
}

/* The marks section (run.h, struct report_marks). */
static void load_marks(struct loader *l, const struct json_value *root)
{
    struct report_marks *marks = &l->r->marks;
    const struct json_value *section = json_get(root, "marks");
    marks->total = get_u64(section, "total");
    if (marks->total > INPUT_MAX_COUNT)
        marks->total = INPUT_MAX_COUNT;
    const struct json_value *recent = json_get(section, "recent");
    uint64_t n = RING_FIRST(marks->ring, marks->total);
    for (const struct json_value *m = recent ? recent->first : NULL; m && n <= marks->total;
         m = m->next, n++) {
        struct report_mark *x = RING_ENTRY(marks->ring, n);
        const char *label = json_string(json_get(m, "label"));
        snprintf(x->label, sizeof(x->label), "%s", label ? label : "");
        READ_RECORD(REPORT_MARK_FIELDS, x, m);
        x->self_time_ns = get_u64(m, "self_time_ns");
    }
}

/* One entry of growth.growing or growth.released (a report older than the
 * released list has none) into its stack, and its id onto `ids`. Its
 * "calls" span its growth: to the end, or to the peak where `released`;
 * a report older than them has none (0: no rate per call). */
static void load_growth_list(struct loader *l, const struct json_value *list, uint32_t *ids,
                             uint32_t *count, int released)
{
    struct report *r = l->r;
    for (const struct json_value *g = list ? list->first : NULL; g; g = g->next) {
        uint32_t id = read_stack(l, g, "stack");
        if (id == 0 || *count == r->stack_count)
            continue;
        struct stack_growth *s = &r->stacks[id - 1].growth;
        s->first_bytes = get_u64(g, "first_bytes");
        s->first_ms = (uint32_t)get_u64(g, "first_ms");
        s->last_bytes = get_u64(g, "last_bytes");
        s->last_ms = (uint32_t)get_u64(g, "last_ms");
        s->rises = (uint32_t)get_u64(g, "rises");
        s->falls = (uint32_t)get_u64(g, "falls");
        s->first_sample = r->growth.samples - (uint32_t)get_u64(g, "samples_since_first");
        s->peak_bytes = get_u64(g, "peak_bytes");
        s->peak_ms = (uint32_t)get_u64(g, "peak_ms");
        s->peak_rises = (uint32_t)get_u64(g, "peak_rises");
        s->peak_falls = (uint32_t)get_u64(g, "peak_falls");
        s->peak_sample = r->growth.samples - (uint32_t)get_u64(g, "samples_since_peak");
        *(released ? &s->peak_calls : &s->calls) = get_u64(g, "calls");
        ids[(*count)++] = id;
    }
}

static void load_growth(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *growth = json_get(root, "growth");
    r->growing = alloc_array(l, r->stack_count, sizeof(uint32_t));
    r->released = alloc_array(l, r->stack_count, sizeof(uint32_t));
    if (!growth || growth->type != JSON_OBJECT || !r->growing || !r->released)
        return;
    r->has_growth = 1;
    const char *mode = json_string(json_get(growth, "mode"));
    r->growth.mode = mode && strcmp(mode, "marks") == 0 ? GROWTH_MARKS : GROWTH_WORK;
    r->growth.samples = (uint32_t)get_u64(growth, "samples");
    r->growth.every = get_u64(growth, "every");
    load_growth_list(l, json_get(growth, "growing"), r->growing, &r->growing_count, 0);
    load_growth_list(l, json_get(growth, "released"), r->released, &r->released_count, 1);
}

static int by_bytes(const void *a, const void *b)
{
    const struct report_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* Each framework's cache (the view, and per device), and the end of the
 * program with what was held then. */
static void load_caches_and_end(struct loader *l, const struct json_value *root)
{
    static const char *views[] =
        {[CACHE_UNSEEN] = "unseen", [CACHE_BLOCKS] = "blocks", [CACHE_SEGMENTS] = "segments"};
    struct report *r = l->r;
    const struct json_value *caches = json_get(root, "caches");
    r->caches = alloc_array(l, REPORT_MAX_CACHES, sizeof(struct report_cache));
    if (!r->caches)
        return;
    for (const struct json_value *c = caches ? caches->first : NULL; c; c = c->next) {
        int kind = cache_kind_at(c, "kind");
        if (!kind) {
            fail(l, "a cache of a kind that is not a framework's");
            return;
        }
        struct report_cache_view *seen = &r->cache_views[kind - KIND_TORCH_TENSOR];
        const char *view = json_string(json_get(c, "view"));
        for (int i = 0; view && i < 3; i++)
            if (strcmp(view, views[i]) == 0)
                seen->view = i;
        const char *why = json_string(json_get(c, "why"));
        snprintf(seen->why, sizeof(seen->why), "%s", why ? why : "");
        seen->since_ms = (uint32_t)get_u64(c, "since_ms");
        const struct json_value *devices = json_get(c, "devices");
        for (const struct json_value *d = devices ? devices->first : NULL; d; d = d->next) {
            if (r->cache_count == REPORT_MAX_CACHES)
                break;
            struct report_cache *x = &r->caches[r->cache_count++];
            x->kind = kind;
            x->device = read_device(l, d, "device");
            x->reserved = get_u64(d, "reserved_bytes");
            x->segments = get_u64(d, "segments");
            x->block_bytes = get_u64(d, "block_bytes");
            x->blocks = get_u64(d, "blocks");
            x->unused = get_u64(d, "unused_bytes");
            x->hole_bytes = get_u64(d, "hole_bytes");
            x->holes = get_u64(d, "holes");
            x->largest_hole = get_u64(d, "largest_hole_bytes");
            x->releasable = get_u64(d, "releasable_bytes");
            x->largest_small_hole = get_u64(d, "small_pool_largest_hole_bytes");
            x->largest_large_hole = get_u64(d, "large_pool_largest_hole_bytes");
        }
    }
    const struct json_value *end = json_get(root, "program_end");
    if (!end || end->type != JSON_OBJECT)
        return;
    r->end.ended = 1;
    r->end.time_ms = (uint32_t)get_u64(end, "time_ms");
    r->growth.ended = 1;
    /* A report from before blocks said whether they were held at the end:
     * one allocated by then was (it is still live). */
    for (size_t i = 0; l->blocks_unmarked && i < r->block_count; i++)
        r->blocks[i].held_at_end = r->blocks[i].time_ms <= r->end.time_ms;
    const struct json_value *devices = json_get(end, "devices");
    r->end.has_device_bytes = devices && devices->type == JSON_ARRAY;
    for (const struct json_value *d = r->end.has_device_bytes ? devices->first : NULL; d;
         d = d->next)
        r->end.device_bytes[counters_slot(read_device(l, d, "device"))] = get_u64(d, "live_bytes");
    const struct json_value *held = get_array(l, root, "held_at_end");
    size_t older = l->unmarked ? r->group_count : 0;
    r->held = held ? alloc_array(l, held->length + older, sizeof(*r->held)) : NULL;
    for (const struct json_value *g = r->held ? held->first : NULL; g; g = g->next) {
        struct report_group *group = &r->held[r->held_count++];
        READ_RECORD(REPORT_HELD_GROUP_FIELDS, group, g);
        group->held_at_end = 1;
        /* Before freed_at_teardown_bytes, held_at_end listed what the
         * teardown freed, and only that. */
        if (!json_get(g, "freed_at_teardown_bytes"))
            group->freed_at_teardown = group->bytes;
    }
    /* A report from before live groups said whether they were held at the
     * end: a group whose oldest block is older than the end was, and the
     * teardown did not free it; held_at_end gets it too, as now. */
    for (size_t i = 0; r->held && i < older; i++) {
        struct report_group *g = &r->groups[i];
        if (g->oldest_ms > r->end.time_ms || report_cache_segment(r, g->stack_id))
            continue;
        g->held_at_end = 1;
        r->held[r->held_count] = *g;
        r->held[r->held_count++].freed_at_teardown = 0;
    }
    if (older && r->held)
        qsort(r->held, r->held_count, sizeof(*r->held), by_bytes);
}

static uint64_t item_u64(const struct json_value *item)
{
    uint64_t value = 0;
    return item && json_uint(item, &value) == 0 ? value : 0;
}

static void load_timeline_event(struct loader *l, const struct json_value *e,
                                struct timeline_event *out)
{
    const struct json_value *item[8] = {NULL};
    int n = 0;
    for (const struct json_value *v = e->type == JSON_ARRAY ? e->first : NULL; v && n < 8;
         v = v->next)
        item[n++] = v;
    const char *type = n >= 7 ? json_string(item[1]) : NULL;
    for (int t = TIMELINE_ALLOC; type && t <= TIMELINE_MARK; t++)
        if (strcmp(type, timeline_type_name(t)) == 0)
            out->type = (uint8_t)t;
    if (out->type == 0) {
        fail(l, "a timeline event that is not [time_us, event, address, size, ...]");
        return;
    }
    out->time_us = item_u64(item[0]);
    const char *address = json_string(item[2]);
    out->value = address ? strtoull(address, NULL, 16) : 0;
    out->size = item_u64(item[3]);
    uint64_t device = item_u64(item[4]);
    int known = item[4] && item[4]->type == JSON_NUMBER && device < 127;
    out->device = (int8_t)(known ? (int)device : -1);
    const char *kind = json_string(item[5]);
    int found = out->type == TIMELINE_MARK;
    for (int k = 0; kind && k < KIND_COUNT; k++)
        if (strcmp(kind_name(k), kind) == 0) {
            out->kind = (uint8_t)k;
            found = 1;
        }
    if (!found)
        fail(l, "a timeline event of an unknown kind");
    out->stack_id = (uint32_t)item_u64(item[6]);
    if (out->stack_id > l->r->stack_count)
        fail(l, "a timeline event names a stack that is not in \"stacks\"");
}

/* The event timeline and the coarse series, when the file has them: what the
 * HTML report and the exports draw memory over time from. */
static void load_timeline_and_series(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *timeline = json_get(root, "timeline");
    const struct json_value *events = json_get(timeline, "events");
    if (events && events->type == JSON_ARRAY) {
        r->timeline = alloc_array(l, events->length, sizeof(struct timeline_event));
        if (!r->timeline)
            return;
        r->has_timeline = 1;
        r->timeline_capacity = get_u64(timeline, "capacity");
        r->timeline_total = get_u64(timeline, "recorded");
        for (const struct json_value *e = events->first; e && !l->failed; e = e->next)
            load_timeline_event(l, e, &r->timeline[r->timeline_count++]);
        if (r->timeline_total < r->timeline_count)
            r->timeline_total = r->timeline_count;
    }
    const struct json_value *series = json_get(root, "series");
    const struct json_value *tracks = json_get(series, "tracks");
    if (!tracks || tracks->type != JSON_ARRAY)
        return;
    r->series = alloc_array(l, 1, sizeof(struct series_state));
    if (!r->series)
        return;
    r->series->every = (uint32_t)get_u64(series, "kept_every");
    for (const struct json_value *t = tracks->first; t; t = t->next) {
        long device = get_long(t, "device", -1);
        int kind = read_kind(l, t, "kind");
        const struct json_value *points = json_get(t, "points");
        if (device < 0 || device >= SERIES_DEVICES || !points || points->type != JSON_ARRAY ||
            points->length > SERIES_SAMPLES) {
            fail(l, "a series track that is not {device 0-7, kind, points}");
            return;
        }
        uint32_t i = 0;
        for (const struct json_value *p = points->first; p; p = p->next, i++) {
            const struct json_value *time = p->type == JSON_ARRAY ? p->first : NULL;
            r->series->samples[i].time_ms = (uint32_t)item_u64(time);
            r->series->samples[i].bytes[device][kind] = item_u64(time ? time->next : NULL);
        }
        if (i > r->series->count)
            r->series->count = i;
    }
}

static void load_threads(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    const struct json_value *threads = json_get(root, "threads");
    size_t count = threads && threads->type == JSON_ARRAY ? threads->length : 0;
    r->threads.list = alloc_array(l, count, sizeof(struct report_thread));
    if (!r->threads.list)
        return;
    for (const struct json_value *t = count ? threads->first : NULL; t; t = t->next) {
        struct report_thread *info = &r->threads.list[r->threads.count++];
        info->tid = (int)get_long(t, "tid", 0);
        const char *name = json_string(json_get(t, "name"));
        snprintf(info->name, sizeof(info->name), "%s", name ? name : "");
    }
}

/* Where the timeline's events after the program's end begin: as the report
 * says, or, in a report older than timeline_index, the first event later
 * than the millisecond of the end. */
static void load_timeline_end(struct loader *l, const struct json_value *root)
{
    struct report *r = l->r;
    r->timeline_end = r->timeline_count;
    if (!r->end.ended)
        return;
    const struct json_value *index = json_get(json_get(root, "program_end"), "timeline_index");
    uint64_t at;
    if (index && json_uint(index, &at) == 0) {
        if (at < r->timeline_count)
            r->timeline_end = (size_t)at;
        return;
    }
    uint64_t end_us = ((uint64_t)r->end.time_ms + 1) * 1000;
    for (size_t k = 0; !index && k < r->timeline_count; k++)
        if (r->timeline[k].time_us >= end_us) {
            r->timeline_end = k;
            break;
        }
}

/* report_alloc's memory for a loaded report: its document's arena, one
 * malloc'ed chunk for many arrays, reused from report to report by malloc,
 * where a mapping each cost system calls and page faults. */
static void *document_heap(void *document, size_t bytes)
{
    return json_alloc(document, bytes);
}

static int load_json(struct loaded_report *loaded, const char *text, size_t length,
                     const char *const *skip, char *error, size_t error_size)
{
    struct report *r = &loaded->report;
    if (json_parse_skipping(text, length, skip, &loaded->json, error, error_size) < 0)
        return -1;
    r->heap = document_heap; /* the report's arrays live and die with the tree */
    r->heap_owner = &loaded->json;
    const struct json_value *root = loaded->json.root;
    struct loader l = {.r = r, .error = error, .error_size = error_size};
    const char *format = json_string(json_get(root, "format"));
    if (!format || strcmp(format, "cumemtrace-report") != 0) {
        fail(&l, "no \"format\": \"cumemtrace-report\"");
        return -1;
    }
    if (get_u64(root, "version") != REPORT_FORMAT_VERSION) {
        snprintf(error, error_size, "report format version %llu, this cumemtrace reads %d",
                 (unsigned long long)get_u64(root, "version"), REPORT_FORMAT_VERSION);
        return -1;
    }
    r->reason = json_string(json_get(root, "reason"));
    if (!r->reason)
        fail(&l, "no \"reason\"");
    l.api_names = alloc_array(&l, MAX_APIS, sizeof(char *));
    if (l.failed)
        return -1;
    r->api_names = l.api_names;
    load_process(&l, root);
    load_tracer(&l, root);
    load_devices(&l, root);
    load_pools_and_torch(&l, root);
    load_frames(&l, root);
    if (!l.failed && report_classify_frames(r) < 0) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    load_stacks(&l, root);
    if (l.failed)
        return -1;
    load_event(&l, root);
    load_classes(&l, root);
    load_holders(&l, root);
    load_live(&l, root);
    load_failures(&l, root);
    load_marks(&l, root);
    load_growth(&l, root);
    load_caches_and_end(&l, root);
    load_threads(&l, root);
    load_timeline_and_series(&l, root);
    load_timeline_end(&l, root);
    /* Last: which stacks are a cache's segments is known by now. */
    return l.failed || frames_tell_apart(r) < 0 ? -1 : 0;
}

/* What report_load_summary leaves out of a JSON report. */
static const char *const summary_skip[] = {"timeline",      "series",   "blocks",
                                           "fragmentation", "findings", NULL};

static int load_text(const char *text, size_t length, const struct report_options *options,
                     const char *const *skip, struct loaded_report *loaded, char *error,
                     size_t error_size)
{
    memset(loaded, 0, sizeof(*loaded));
    loaded->report.rank = loaded->report.local_rank = loaded->report.world_size = -1;
    loaded->report.options = *options;
    size_t dump = strlen(dump_record_names[DUMP_HEADER]);
    if (length > dump && strncmp(text, dump_record_names[DUMP_HEADER], dump) == 0 &&
        text[dump] == ' ') {
        loaded->from_dump = 1;
        int status = dump_parse(&loaded->report, options, text, length);
        if (status < 0)
            snprintf(error, error_size, "%s",
                     errno == EPROTO ? "a cumemtrace dump of another version" : strerror(errno));
        loaded->report.rank = loaded->report.local_rank = loaded->report.world_size = -1;
        return status;
    }
    /* What people open by mistake: said as what it is, not as bad JSON. */
    static const struct {
        const char *start, *what;
    } others[] = {
        {"==== cumemtrace ", "a text report (.txt), written to be read as it is: give this "
                             "command the JSON report written with it (CUMEMTRACE_FORMAT=json)"},
        {"<!DOCTYPE html", "an HTML report: open it in a browser; this command reads the "
                           "JSON report"},
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        if (length >= strlen(others[i].start) &&
            strncmp(text, others[i].start, strlen(others[i].start)) == 0) {
            snprintf(error, error_size, "%s", others[i].what);
            errno = EPROTO;
            return -1;
        }
    return load_json(loaded, text, length, skip, error, error_size);
}

int report_load_text(const char *text, size_t length, const struct report_options *options,
                     struct loaded_report *loaded, char *error, size_t error_size)
{
    return load_text(text, length, options, NULL, loaded, error, error_size);
}

static int load_file(const char *path, const struct report_options *options,
                     const char *const *skip, struct loaded_report *loaded, char *error,
                     size_t error_size)
{
    size_t length;
    char *text = input_read(path, &length);
    if (!text) {
        int cause = errno;
        memset(loaded, 0, sizeof(*loaded)); /* load_text's work, when there is a text */
        loaded->report.rank = loaded->report.local_rank = loaded->report.world_size = -1;
        errno = cause;
        if (errno == EFBIG)
            snprintf(error, error_size, "larger than %llu GiB, the most this command reads",
                     INPUT_MAX_BYTES >> 30);
        else
            snprintf(error, error_size, "%s", strerror(errno));
        return -1;
    }
    int status = load_text(text, length, options, skip, loaded, error, error_size);
    free(text);
    return status;
}

int report_load(const char *path, const struct report_options *options,
                struct loaded_report *loaded, char *error, size_t error_size)
{
    return load_file(path, options, NULL, loaded, error, error_size);
}

int report_load_summary(const char *path, const struct report_options *options,
                        struct loaded_report *loaded, char *error, size_t error_size)
{
    return load_file(path, options, summary_skip, loaded, error, error_size);
}

void report_unload(struct loaded_report *loaded)
{
    report_release(&loaded->report);
    json_free(&loaded->json);
}
