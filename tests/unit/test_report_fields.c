/* test_report_fields.c - the JSON report's writer and its loader agree on a
 * block's fields.
 *
 * records.h's REPORT_BLOCK_FIELDS lists them once. A report is loaded (the
 * file named on the command line), one of its blocks gets a new value in
 * every listed field, and the report is written (report_json), loaded back
 * (report_load_text) and compared field by field: a field one side writes
 * or reads in another place, or not at all, comes back different. The
 * written block must also have exactly the listed keys, in their order: a
 * field the writer adds by hand, beside the list, fails here. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "kinds.h"
#include "report_load.h"

static const char *const block_keys[] = {
#define X(key, member, form) key,
    REPORT_BLOCK_FIELDS(X)
#undef X
};
#define BLOCK_KEYS (sizeof(block_keys) / sizeof(block_keys[0]))

/* Whether a field of block `a` in report `ra` says what one of `b` in `rb`
 * says: entry points by name and handles by value, as the file has them. */
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
    return handle && handle <= r->state.handles_used ? r->state.handles[handle - 1] : 0;
}

#define same_hex(ra, a, rb, b) same_value(a, b)
#define same_u64(ra, a, rb, b) same_value(a, b)
#define same_kind(ra, a, rb, b) same_value(a, b)
#define same_device(ra, a, rb, b) same_value((uint64_t)(int64_t)(a), (uint64_t)(int64_t)(b))
#define same_stack(ra, a, rb, b) same_value(a, b)
#define same_flag(ra, a, rb, b) same_value(a, b)
#define same_handle(ra, a, rb, b) same_value(handle_value(ra, a), handle_value(rb, b))

/* Every listed field of the first block a new value, each unlike the
 * block's own and unlike the others where the field allows. */
static void change_block(struct report *r)
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
    r->state.handles[r->state.handles_used++] = 0x7f00beef0000ull;
    b->handle = (uint16_t)r->state.handles_used;
    b->held_at_end = !b->held_at_end;
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

/* The written block's keys are the list's, in its order. */
static void check_keys(const char *text, size_t length)
{
    struct json_document doc;
    char error[256];
    memset(&doc, 0, sizeof(doc));
    CHECK(json_parse(text, length, &doc, error, sizeof(error)) == 0);
    const struct json_value *items = json_get(json_get(doc.root, "blocks"), "items");
    const struct json_value *block = items ? items->first : NULL;
    CHECK(block != NULL);
    size_t n = 0;
    for (const struct json_value *v = block ? block->first : NULL; v; v = v->next, n++) {
        if (n >= BLOCK_KEYS)
            fprintf(stderr, "key %zu: written \"%s\", not listed\n", n, v->key);
        CHECK(n < BLOCK_KEYS);
        if (n >= BLOCK_KEYS)
            break;
        if (strcmp(v->key, block_keys[n]) != 0)
            fprintf(stderr, "key %zu: written \"%s\", listed \"%s\"\n", n, v->key, block_keys[n]);
        CHECK(strcmp(v->key, block_keys[n]) == 0);
    }
    CHECK_EQ(n, BLOCK_KEYS);
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
    CHECK(r->block_count > 0 && r->api_count > 1 && r->stack_count > 1);
    if (!(r->block_count > 0 && r->api_count > 1 && r->stack_count > 1))
        return check_done("report_fields");
    struct report_block original = r->blocks[0];
    change_block(r);
    const struct report_block *set = &r->blocks[0];
    /* Every field changed: each one is tried. */
#define X(key, member, form)                                                                 \
    if (same_##form(r, original.member, r, set->member))                                     \
        fprintf(stderr, "\"%s\" not changed\n", key);                                        \
    CHECK(!same_##form(r, original.member, r, set->member));
    REPORT_BLOCK_FIELDS(X)
#undef X

    size_t length = 0;
    char *text = written(r, &length);
    CHECK(text != NULL);
    if (!text)
        return check_done("report_fields");
    check_keys(text, length);
    int loaded = report_load_text(text, length, &options, &after, error, sizeof(error));
    if (loaded < 0)
        fprintf(stderr, "written report: %s\n", error);
    CHECK(loaded == 0);
    const struct report *back = &after.report;
    CHECK_EQ(back->block_count, r->block_count);
    for (size_t i = 0; loaded == 0 && i < r->block_count && i < back->block_count; i++) {
        const struct report_block *a = &r->blocks[i], *b = &back->blocks[i];
#define X(key, member, form)                                                                 \
    if (!same_##form(r, a->member, back, b->member))                                         \
        fprintf(stderr, "block %zu: \"%s\" written and read back differ\n", i, key);         \
    CHECK(same_##form(r, a->member, back, b->member));
        REPORT_BLOCK_FIELDS(X)
#undef X
    }
    free(text);
    report_unload(&after);
    report_unload(&before);
    return check_done("report_fields");
}
