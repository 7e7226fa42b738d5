/* test_report_fields.c - the JSON report's writer and its loader agree on
 * the fields of its records.
 *
 * records.h lists them once: a block (REPORT_BLOCK_FIELDS), a live group
 * and a group held at the end (REPORT_LIVE_GROUP_FIELDS,
 * REPORT_HELD_GROUP_FIELDS), a stack's figures (STACK_STATS_FIELDS), a
 * failure (REPORT_FAILURE_CALL_FIELDS, REPORT_FAILURE_CONTEXT_FIELDS), the
 * OOM event's call (REPORT_FAILURE_CALL_FIELDS) and a mark
 * (REPORT_MARK_FIELDS). A report is loaded (the file named on the command
 * line; a failure, an OOM event and a mark are made where it has none), the
 * first record of each list gets a new value in every listed field, and
 * the report is written (report_json), loaded back (report_load_text) and
 * compared field by field: a field one side writes or reads in another
 * place, or not at all, comes back different. Each written record must also
 * have exactly the listed keys, in their order, and those written by hand
 * where records.h says: a field the writer adds beside the list fails here.
 *
 * The fields written by hand are compared too: a mark's label and self
 * time, and a frame's, which has no list (its strings and optional keys
 * outnumber its scalars); and the run's sections (run.h) that no list
 * covers: the lost events, the failures per entry point, the failures'
 * retries and the last OOM's verdict, the threads, the caches' views and
 * the program's end. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "kinds.h"
#include "report_load.h"

#define KEY(key, member, form) key,
static const char *const block_keys[] = {REPORT_BLOCK_FIELDS(KEY)};
static const char *const live_keys[] = {REPORT_LIVE_GROUP_FIELDS(KEY)};
static const char *const held_keys[] = {REPORT_HELD_GROUP_FIELDS(KEY)};
static const char *const failure_keys[] = {REPORT_FAILURE_CALL_FIELDS(KEY) "error",
                                           REPORT_FAILURE_CONTEXT_FIELDS(KEY)};
static const char *const mark_keys[] = {"label", REPORT_MARK_FIELDS(KEY) "self_time_ns"};
static const char *const event_keys[] = {"type", REPORT_FAILURE_CALL_FIELDS(KEY) "error"};
#undef KEY
#define COUNT(keys) (sizeof(keys) / sizeof(keys[0]))

/* Whether a field of a record in report `ra` says what one in `rb` says:
 * entry points by name and handles by value, as the file has them. */
static int same_value(uint64_t a, uint64_t b)
{
    return a == b;
}

static int same_api(const struct report *ra, int a, const struct report *rb, int b)
{
    return strcmp(report_api_name(ra, a), report_api_name(rb, b)) == 0;
}

static uint64_t handle_value(const struct report *r, uint32_t handle)
{
    return handle && handle <= r->handles.count ? r->handles.list[handle - 1] : 0;
}

#define same_hex(ra, a, rb, b) same_value(a, b)
#define same_u64(ra, a, rb, b) same_value(a, b)
#define same_kind(ra, a, rb, b) same_value(a, b)
#define same_device(ra, a, rb, b) same_value((uint64_t)(int64_t)(a), (uint64_t)(int64_t)(b))
#define same_stack(ra, a, rb, b) same_value(a, b)
#define same_flag(ra, a, rb, b) same_value(a, b)
#define same_handle(ra, a, rb, b) same_value(handle_value(ra, a), handle_value(rb, b))
#define same_int(ra, a, rb, b) same_value((uint64_t)(int64_t)(a), (uint64_t)(int64_t)(b))

/* Each field `list` names alike in *a of report `ra` and *b of `rb`
 * (`alike` 1), or each different (0); says which are not. */
#define COMPARE(key, member, form)                                                                 \
    if (same_##form(ra, a->member, rb, b->member) != alike)                                        \
        fprintf(stderr, "%s: \"%s\" %s\n", what, key, alike ? "differs" : "not changed");          \
    CHECK(same_##form(ra, a->member, rb, b->member) == alike);
#define CHECK_FIELDS(list, what_, ra_, a_, rb_, b_, alike_)                                        \
    do {                                                                                           \
        const char *what = (what_);                                                                \
        const struct report *ra = (ra_), *rb = (rb_);                                              \
        const __typeof__(*(a_)) *a = (a_), *b = (b_);                                              \
        int alike = (alike_);                                                                      \
        (void)ra; /* for the forms that need their report */                                       \
        (void)rb;                                                                                  \
        list(COMPARE)                                                                              \
    } while (0)

/* Each of a stack's figures alike in *a and *b (`alike` 1), or each
 * different (0); says which are not. */
static void check_stats(const char *what, const struct stack_stats *a, const struct stack_stats *b,
                        int alike)
{
#define X(key, member)                                                                             \
    if ((a->member == b->member) != alike)                                                         \
        fprintf(stderr, "%s: \"%s\" %s\n", what, key, alike ? "differs" : "not changed");          \
    CHECK((a->member == b->member) == alike);
    STACK_STATS_FIELDS(X)
#undef X
}

/* Two strings alike, NULL being alike only to NULL. */
static int same_text(const char *a, const char *b)
{
    return a && b ? strcmp(a, b) == 0 : a == b;
}

/* A mark's fields written by hand (records.h, REPORT_MARK_FIELDS) alike in
 * *a and *b, or each different; says which are not. */
static void check_mark_by_hand(const char *what, const struct report_mark *a,
                               const struct report_mark *b, int alike)
{
    if (same_text(a->label, b->label) != alike)
        fprintf(stderr, "%s: \"label\" %s\n", what, alike ? "differs" : "not changed");
    CHECK(same_text(a->label, b->label) == alike);
    if ((a->self_time_ns == b->self_time_ns) != alike)
        fprintf(stderr, "%s: \"self_time_ns\" %s\n", what, alike ? "differs" : "not changed");
    CHECK((a->self_time_ns == b->self_time_ns) == alike);
}

/* A frame's fields (report_json.c's write_frames, report_load.c's
 * load_frames) alike in *a and *b, or each different; says which are not.
 * Its origin is not read back: the loader works it out again. */
static void check_frame(const char *what, const struct symbol *a, const struct symbol *b, int alike)
{
#define SAME(key, same)                                                                            \
    if ((same) != alike)                                                                           \
        fprintf(stderr, "%s: \"%s\" %s\n", what, key, alike ? "differs" : "not changed");          \
    CHECK((same) == alike);
    SAME("address", a->address == b->address)
    SAME("module", same_text(a->module, b->module))
    SAME("module_offset", a->module_offset == b->module_offset)
    SAME("function", same_text(a->function, b->function))
    SAME("mangled", same_text(a->mangled, b->mangled))
    SAME("function_offset", a->function_offset == b->function_offset)
    SAME("file", same_text(a->file, b->file))
    SAME("line", a->line == b->line)
    SAME("python", a->python == b->python)
#undef SAME
}

/* The first entry of each list a new value in every listed field, each
 * unlike the entry's own and unlike the others where the field allows. */
static void change_group(const struct report *r, struct report_group *g)
{
    g->stack_id = g->stack_id % r->stack_count + 1;
    g->kind = (uint8_t)((g->kind + 1) % KIND_COUNT);
    g->api = (uint8_t)((g->api + 1) % r->api_count);
    g->device = 5;
    g->blocks = 31;
    g->bytes = 123456789;
    g->largest = 23456789;
    g->oldest_ms = 4242;
    g->held_at_end = !g->held_at_end;
    g->freed_at_teardown = 3456789;
}

static void change(struct report *r)
{
    struct report_block *b = &r->blocks[0];
    b->value = 0x7f00dead0000ull;
    b->size = 123456789;
    b->kind = (uint8_t)((b->kind + 1) % KIND_COUNT);
    b->api = (uint8_t)((b->api + 1) % r->api_count);
    b->device = 5;
    b->stack_id = b->stack_id % r->stack_count + 1;
    b->thread = 7;
    b->sequence = 987654321;
    b->time_ms = 4242;
    r->handles.list[r->handles.count++] = 0x7f00beef0000ull;
    b->handle = (uint16_t)r->handles.count;
    b->held_at_end = !b->held_at_end;
    change_group(r, &r->groups[0]);
    change_group(r, &r->held[0]);
    struct stack_stats *stats = &r->stacks[r->shown[0] - 1].stats;
    uint64_t figure = 1000003;
#define X(key, member) stats->member = figure++ * 7919;
    STACK_STATS_FIELDS(X)
#undef X
    struct report_failure *f =
        RING_ENTRY(r->failures.ring, RING_FIRST(r->failures.ring, r->failures.total));
    f->size = 234567891;
    f->kind = (f->kind + 1) % KIND_COUNT;
    f->api = (f->api + 1) % r->api_count;
    f->device = 6;
    f->code = -217; /* no CUDA code, but the form is signed */
    f->oom = !f->oom;
    f->oom_number = 4242;
    r->failures.ooms = 4243;
    f->stack_id = f->stack_id % r->stack_count + 1;
    f->thread = 9;
    f->time_ms = 4343;
    struct report_mark *m = RING_ENTRY(r->marks.ring, RING_FIRST(r->marks.ring, r->marks.total));
    snprintf(m->label, sizeof(m->label), "%s", "a \"changed\" mark\\"); /* to escape */
    m->time_ms = 4444;
    m->sequence = 876543219;
    m->device_bytes = 345678912;
    m->self_time_ns = 5555;
    struct report_event *e = &r->event;
    e->size = 345678912;
    e->kind = (e->kind + 1) % KIND_COUNT;
    e->api = (e->api + 1) % r->api_count;
    e->device = 4;
    e->code = -219;
    r->self_time_ns = 6666; /* so that marks have theirs */
    struct symbol *s = &r->symbols[0];
    s->address -= 1; /* still below the next: ids follow addresses */
    s->module = "changed/module.so";
    s->module_offset += 11;
    s->function = "changed_function";
    s->mangled = "_Z16changed_functionv";
    s->function_offset += 13;
    s->file = "changed/file.c";
    s->line += 17;
    s->python = !s->python;
}

/* The run's sections no list covers (run.h): how many of their fields are
 * alike in `a` and `b`, out of *fields. */
#define RUN_FIELD(same) (++*fields, (same) ? 1 : 0)
static int run_fields_alike(const struct report *a, const struct report *b, int *fields)
{
    int alike = 0;
    *fields = 0;
    for (int i = 0; i < LOST_COUNT; i++)
        alike += RUN_FIELD(a->lost[i] == b->lost[i]);
    for (int api = 0; api < a->api_count; api++)
        if (a->api_calls[api] || a->api_allocations[api]) { /* the entry points written */
            int other = -1;
            for (int k = 0; k < b->api_count && other < 0; k++)
                if (same_api(a, api, b, k))
                    other = k;
            alike += RUN_FIELD(other >= 0 && a->api_failures[api] == b->api_failures[other]);
        }
    alike += RUN_FIELD(a->failures.retries_succeeded == b->failures.retries_succeeded);
    alike += RUN_FIELD(a->failures.retries_failed == b->failures.retries_failed);
    alike += RUN_FIELD(strcmp(a->last_oom.verdict, b->last_oom.verdict) == 0);
    alike += RUN_FIELD(strcmp(a->last_oom.text, b->last_oom.text) == 0);
    alike += RUN_FIELD(a->last_oom.size == b->last_oom.size);
    alike += RUN_FIELD(a->last_oom.stack_id == b->last_oom.stack_id);
    alike += RUN_FIELD(a->last_oom.time_ms == b->last_oom.time_ms);
    alike += RUN_FIELD(a->threads.count == b->threads.count);
    for (uint32_t i = 0; i < a->threads.count && i < b->threads.count; i++) {
        alike += RUN_FIELD(a->threads.list[i].tid == b->threads.list[i].tid);
        alike += RUN_FIELD(strcmp(a->threads.list[i].name, b->threads.list[i].name) == 0);
    }
    for (int k = 0; k < CACHE_KINDS; k++) {
        alike += RUN_FIELD(a->cache_views[k].view == b->cache_views[k].view);
        alike += RUN_FIELD(strcmp(a->cache_views[k].why, b->cache_views[k].why) == 0);
        if (a->cache_views[k].view == CACHE_BLOCKS) /* else written null */
            alike += RUN_FIELD(a->cache_views[k].since_ms == b->cache_views[k].since_ms);
    }
    alike += RUN_FIELD(a->end.ended == b->end.ended);
    alike += RUN_FIELD(a->end.time_ms == b->end.time_ms);
    alike += RUN_FIELD(a->end.has_device_bytes == b->end.has_device_bytes);
    for (int d = 0; d < a->device_count; d++) {
        int slot = a->devices[d].slot;
        alike += RUN_FIELD(a->end.device_bytes[slot] == b->end.device_bytes[slot]);
    }
    return alike;
}
#undef RUN_FIELD

/* Every field run_fields_alike compares a new value. */
static void change_run(struct report *r)
{
    for (int i = 0; i < LOST_COUNT; i++)
        r->lost[i] += 1000 + (uint64_t)i;
    for (int api = 0; api < r->api_count; api++)
        r->api_failures[api] += 2000 + (uint64_t)api;
    r->failures.retries_succeeded += 31;
    r->failures.retries_failed += 37;
    snprintf(r->last_oom.verdict, sizeof(r->last_oom.verdict), "%s", "a \"changed\" verdict");
    snprintf(r->last_oom.text, sizeof(r->last_oom.text), "%s", "changed text\n");
    r->last_oom.size += 4567;
    r->last_oom.stack_id = r->last_oom.stack_id % r->stack_count + 1;
    r->last_oom.time_ms += 4646;
    r->threads.list[0].tid += 10;
    snprintf(r->threads.list[0].name, sizeof(r->threads.list[0].name), "%s", "changed");
    for (int k = 0; k < CACHE_KINDS; k++) {
        struct report_cache_view *v = &r->cache_views[k];
        v->view = v->view == CACHE_BLOCKS ? CACHE_BLOCKS : CACHE_SEGMENTS;
        snprintf(v->why, sizeof(v->why), "changed why %d", k);
        v->since_ms += 4747;
    }
    r->end.time_ms += 4848;
    r->end.has_device_bytes = 1;
    for (int d = 0; d < r->device_count; d++)
        r->end.device_bytes[r->devices[d].slot] += 4949 + (uint64_t)d;
}

/* The report as report_json writes it, NUL-terminated; NULL on failure. */
static char *written(const struct report *r, size_t *length)
{
    FILE *file = tmpfile();
    if (!file)
        return NULL;
    struct out *out = calloc(1, sizeof(*out));
    char *text = NULL;
    if (out) {
        out_fd(out, fileno(file));
        report_json(r, out);
        out_flush(out);
        long size = out->failed ? -1 : lseek(fileno(file), 0, SEEK_END);
        text = size > 0 ? malloc((size_t)size + 1) : NULL;
        if (text && pread(fileno(file), text, (size_t)size, 0) == size) {
            text[size] = '\0';
            *length = (size_t)size;
        } else {
            free(text);
            text = NULL;
        }
    }
    free(out);
    fclose(file);
    return text;
}

/* The written object `entry` has the keys `keys` lists, in order: those
 * and no others if `all`, those first if not. */
static void check_entry_keys(const char *what, const struct json_value *entry,
                             const char *const *keys, size_t count, int all)
{
    CHECK(entry && entry->type == JSON_OBJECT);
    size_t n = 0;
    for (const struct json_value *v = entry ? entry->first : NULL; v && (all || n < count);
         v = v->next, n++) {
        const char *listed = n < count ? keys[n] : "(none)";
        if (strcmp(v->key, listed) != 0)
            fprintf(stderr, "%s: key %zu written \"%s\", listed \"%s\"\n", what, n, v->key, listed);
        CHECK(strcmp(v->key, listed) == 0);
    }
    CHECK_EQ(n, count);
}

/* Every entry of the written `list` has the keys `keys` lists, in order. */
static void check_keys(const char *what, const struct json_value *list, const char *const *keys,
                       size_t count)
{
    CHECK(list && list->type == JSON_ARRAY && list->length > 0);
    for (const struct json_value *entry = list ? list->first : NULL; entry; entry = entry->next)
        check_entry_keys(what, entry, keys, count, 1);
}

static void check_written_keys(const char *text, size_t length)
{
    struct json_document doc;
    char error[256];
    memset(&doc, 0, sizeof(doc));
    CHECK(json_parse(text, length, &doc, error, sizeof(error)) == 0);
    check_keys("blocks", json_get(json_get(doc.root, "blocks"), "items"), block_keys,
               COUNT(block_keys));
    check_keys("live", json_get(doc.root, "live"), live_keys, COUNT(live_keys));
    check_keys("held_at_end", json_get(doc.root, "held_at_end"), held_keys, COUNT(held_keys));
    check_keys("failures", json_get(json_get(doc.root, "failures"), "recent"), failure_keys,
               COUNT(failure_keys));
    check_keys("marks", json_get(json_get(doc.root, "marks"), "recent"), mark_keys,
               COUNT(mark_keys));
    check_entry_keys("event", json_get(doc.root, "event"), event_keys, COUNT(event_keys), 0);
    json_free(&doc);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_report_fields REPORT.json\n");
        return 2;
    }
    struct report_options options;
    report_options_of(&config, &options);
    static struct loaded_report before, after;
    char error[512];
    if (report_load(argv[1], &options, &before, error, sizeof(error)) < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], error);
        return 1;
    }
    struct report *r = &before.report;
    int usable = r->block_count > 0 && r->group_count > 0 && r->held_count > 0 &&
                 r->shown_count > 0 && r->api_count > 1 && r->stack_count > 1 &&
                 r->address_count > 1 && r->symbols[0].address > 0;
    CHECK(usable); /* a report with each record, two entry points, two stacks */
    if (!usable)
        return check_done("report_fields");
    if (!r->failures.total)
        r->failures.total = 1; /* a failure of zeros, for change() to fill */
    if (!r->marks.total)
        r->marks.total = 1;
    if (r->event.type != EVENT_OOM)
        r->event = (struct report_event){.type = EVENT_OOM};
    const struct report_failure *failure =
        RING_ENTRY(r->failures.ring, RING_FIRST(r->failures.ring, r->failures.total));
    const struct report_mark *mark =
        RING_ENTRY(r->marks.ring, RING_FIRST(r->marks.ring, r->marks.total));
    struct report_block block = r->blocks[0];
    struct report_group live = r->groups[0], held = r->held[0];
    uint32_t shown = r->shown[0];
    struct stack_stats stats = r->stacks[shown - 1].stats;
    struct report_failure failure_was = *failure;
    struct report_mark mark_was = *mark;
    struct report_event event_was = r->event;
    struct symbol frame_was = r->symbols[0];
    /* The run's sections, their lists copied: change_run changes them. */
    static struct report run_was;
    run_was = *r;
    struct report_thread threads_was[1] = {r->threads.list[0]};
    run_was.threads.list = threads_was;
    run_was.threads.count = 1;
    CHECK(r->threads.count == 1 && r->end.ended && r->cache_views[0].view == CACHE_BLOCKS);
    change(r);
    change_run(r);
    int run_fields = 0;
    /* All changed but three, kept so that what depends on them is written:
     * the count of threads, the end seen, PyTorch's view (its since_ms). */
    CHECK_EQ(run_fields_alike(&run_was, r, &run_fields), 3);
    check_stats("stack", &stats, &r->stacks[shown - 1].stats, 0);
    CHECK_FIELDS(REPORT_BLOCK_FIELDS, "block", r, &block, r, &r->blocks[0], 0);
    CHECK_FIELDS(REPORT_LIVE_GROUP_FIELDS, "live", r, &live, r, &r->groups[0], 0);
    CHECK_FIELDS(REPORT_HELD_GROUP_FIELDS, "held_at_end", r, &held, r, &r->held[0], 0);
    CHECK_FIELDS(REPORT_FAILURE_CALL_FIELDS, "failure", r, &failure_was, r, failure, 0);
    CHECK_FIELDS(REPORT_FAILURE_CONTEXT_FIELDS, "failure", r, &failure_was, r, failure, 0);
    CHECK_FIELDS(REPORT_FAILURE_CALL_FIELDS, "event", r, &event_was, r, &r->event, 0);
    CHECK_FIELDS(REPORT_MARK_FIELDS, "mark", r, &mark_was, r, mark, 0);
    check_mark_by_hand("mark", &mark_was, mark, 0);
    check_frame("frame", &frame_was, &r->symbols[0], 0);

    size_t length = 0;
    char *text = written(r, &length);
    CHECK(text != NULL);
    if (!text)
        return check_done("report_fields");
    check_written_keys(text, length);
    int loaded = report_load_text(text, length, &options, &after, error, sizeof(error));
    if (loaded < 0)
        fprintf(stderr, "written report: %s\n", error);
    CHECK(loaded == 0);
    const struct report *back = &after.report;
    CHECK_EQ(back->block_count, r->block_count);
    CHECK_EQ(back->group_count, r->group_count);
    CHECK_EQ(back->held_count, r->held_count);
    for (size_t i = 0; loaded == 0 && i < r->block_count && i < back->block_count; i++)
        CHECK_FIELDS(REPORT_BLOCK_FIELDS, "block read back", r, &r->blocks[i], back,
                     &back->blocks[i], 1);
    for (size_t i = 0; loaded == 0 && i < r->group_count && i < back->group_count; i++)
        CHECK_FIELDS(REPORT_LIVE_GROUP_FIELDS, "live group read back", r, &r->groups[i], back,
                     &back->groups[i], 1);
    for (size_t i = 0; loaded == 0 && i < r->held_count && i < back->held_count; i++)
        CHECK_FIELDS(REPORT_HELD_GROUP_FIELDS, "held group read back", r, &r->held[i], back,
                     &back->held[i], 1);
    for (uint32_t i = 0; loaded == 0 && i < r->shown_count; i++) {
        uint32_t id = r->shown[i];
        CHECK(id <= back->stack_count);
        if (id <= back->stack_count)
            check_stats("stack read back", &r->stacks[id - 1].stats, &back->stacks[id - 1].stats,
                        1);
    }
    CHECK_EQ(back->failures.total, r->failures.total);
    CHECK_EQ(back->failures.ooms, r->failures.ooms);
    CHECK_EQ(back->marks.total, r->marks.total);
    const struct report_failures *was = &r->failures, *now = &back->failures;
    for (uint64_t n = RING_FIRST(was->ring, was->total); loaded == 0 && n <= was->total; n++) {
        CHECK_FIELDS(REPORT_FAILURE_CALL_FIELDS, "failure read back", r, RING_ENTRY(was->ring, n),
                     back, RING_ENTRY(now->ring, n), 1);
        CHECK_FIELDS(REPORT_FAILURE_CONTEXT_FIELDS, "failure read back", r,
                     RING_ENTRY(was->ring, n), back, RING_ENTRY(now->ring, n), 1);
    }
    const struct report_marks *marks_was = &r->marks, *marks_now = &back->marks;
    for (uint64_t n = RING_FIRST(marks_was->ring, marks_was->total);
         loaded == 0 && n <= marks_was->total; n++) {
        CHECK_FIELDS(REPORT_MARK_FIELDS, "mark read back", r, RING_ENTRY(marks_was->ring, n), back,
                     RING_ENTRY(marks_now->ring, n), 1);
        check_mark_by_hand("mark read back", RING_ENTRY(marks_was->ring, n),
                           RING_ENTRY(marks_now->ring, n), 1);
    }
    CHECK_EQ(back->event.type, EVENT_OOM);
    if (loaded == 0)
        CHECK_FIELDS(REPORT_FAILURE_CALL_FIELDS, "event read back", r, &r->event, back,
                     &back->event, 1);
    int run_alike = run_fields_alike(r, back, &run_fields);
    CHECK_EQ(run_alike, run_fields);
    CHECK(run_fields > 20);
    CHECK_EQ(back->address_count, r->address_count);
    for (size_t i = 0; loaded == 0 && i < r->address_count && i < back->address_count; i++)
        check_frame("frame read back", &r->symbols[i], &back->symbols[i], 1);
    free(text);
    report_unload(&after);
    report_unload(&before);
    return check_done("report_fields");
}
