/* dump_read.c - read a crash dump back into a report, for `cumemtrace symbolize`.
 *
 * The dump (crashdump.c) is read whole (input_read: at most INPUT_MAX_BYTES,
 * from a file or a pipe) and copied into private, writable pages; lines are
 * cut in place, names point into those pages, which the report keeps until it
 * is released. Two passes: the first counts records to size the arrays, the
 * second fills them. A dump without its final "end" line (the process died
 * while writing it) is read as far as it goes and flagged. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "dump_read.h"
#include "frames.h"
#include "kinds.h"

/* A cursor over one line's space-separated fields. */
struct fields {
    char *at;
};

static char *next_field(struct fields *f)
{
    while (*f->at == ' ')
        f->at++;
    if (!*f->at)
        return NULL;
    char *start = f->at;
    while (*f->at && *f->at != ' ')
        f->at++;
    if (*f->at)
        *f->at++ = '\0';
    return start;
}

static uint64_t number(struct fields *f)
{
    char *text = next_field(f);
    return text ? strtoull(text, NULL, 10) : 0;
}

static int64_t signed_number(struct fields *f)
{
    char *text = next_field(f);
    return text ? strtoll(text, NULL, 10) : 0;
}

static uint64_t hex_number(struct fields *f)
{
    char *text = next_field(f);
    return text ? strtoull(text, NULL, 16) : 0;
}

/* Decode a hex field in place; returns its length in bytes. */
static size_t hex_bytes(struct fields *f, char *out, size_t size)
{
    char *text = next_field(f);
    size_t n = 0;
    if (!text || strcmp(text, "-") == 0)
        return 0;
    for (; text[0] && text[1] && n + 1 < size; text += 2) {
        char pair[3] = {text[0], text[1], 0};
        out[n++] = (char)strtoul(pair, NULL, 16);
    }
    out[n] = '\0';
    return n;
}

struct counts {
    size_t stacks, frames, blocks, apis, threads, handles, python;
};

static void count_records(char *text, size_t length, struct counts *c)
{
    char *p = text, *end = text + length;
    while (p < end) {
        char *eol = memchr(p, '\n', end - p);
        if (!eol)
            eol = end;
        int record = dump_record_of(p);
        if (record == DUMP_MAPS)
            break;
        if (record == DUMP_STACK)
            for (char *q = p; q < eol; q++)
                c->frames += *q == ' ';
        c->stacks += record == DUMP_STACK;
        c->blocks += record == DUMP_BLOCK;
        c->apis += record == DUMP_API;
        c->threads += record == DUMP_THREAD;
        c->handles += record == DUMP_HANDLE;
        c->python += record == DUMP_PYLOC;
        p = eol + 1;
    }
}

static void read_stack(struct report *r, struct fields *f, uint64_t *frames_used)
{
    uint32_t id = (uint32_t)number(f);
    if (id == 0 || id > r->stack_count)
        return;
    struct stack *s = &r->stacks[id - 1];
#define X(key, member) s->stats.member = number(f);
    STACK_STATS_FIELDS(X)
#undef X
    s->depth = (uint32_t)number(f);
    s->first_frame = *frames_used;
    uint32_t depth = 0;
    for (; depth < s->depth; depth++) {
        char *text = next_field(f);
        if (!text)
            break;
        r->frames[(*frames_used)++] = strtoull(text, NULL, 16);
    }
    s->depth = depth;
}

/* A field as DUMP_BLOCK_FIELDS writes it (crashdump.c's put_hex, ...). */
#define read_hex hex_number
#define read_u64 number
#define read_i64 signed_number

static void read_block(struct report *r, struct fields *f)
{
    struct report_block *b = &r->blocks[r->block_count++];
#define X(member, encoding) b->member = (__typeof__(b->member))read_##encoding(f);
    DUMP_BLOCK_FIELDS(X)
#undef X
    if (b->kind >= KIND_COUNT || (b->stack_id > r->stack_count))
        r->block_count--; /* a torn record from a busy table: leave it out */
}

/* program_end TIME_MS [SLOT BYTES]...: the end of a Python program seen
 * before the crash, and device memory then. */
static void read_program_end(struct report *r, struct fields *f)
{
    r->end.ended = 1;
    r->end.time_ms = (uint32_t)number(f);
    r->end.has_device_bytes = 1;
    for (char *slot; (slot = next_field(f));) {
        uint64_t n = strtoull(slot, NULL, 10);
        uint64_t bytes = number(f);
        if (n <= COUNTER_NO_DEVICE)
            r->end.device_bytes[n] = bytes;
    }
}

/* end_stack ID BYTES BLOCKS DEVICE KIND API: what a stack held at that end. */
static void read_end_stack(struct report *r, struct fields *f)
{
    uint32_t id = (uint32_t)number(f);
    if (id == 0 || id > r->end.stack_count)
        return;
    struct report_end_stack *e = &r->end.stacks[id - 1];
    e->bytes = number(f);
    e->blocks = number(f);
    e->device = (int8_t)signed_number(f);
    e->kind = (uint8_t)number(f);
    e->api = (uint8_t)number(f);
    if (e->kind >= KIND_COUNT)
        *e = (struct report_end_stack){0};
}

/* The next of the failures kept, oldest first: entry *next of the ring. */
static void read_failure(struct report *r, struct fields *f, uint64_t *next)
{
    if (*next == 0 || *next > r->failures.total)
        return; /* none kept, or more lines than failures */
    struct report_failure *x = RING_ENTRY(r->failures.ring, *next);
    ++*next;
    x->size = number(f);
    x->device = (int32_t)signed_number(f);
    x->kind = (int32_t)number(f);
    x->api = (int32_t)number(f);
    x->code = (int32_t)signed_number(f);
    x->oom = (int32_t)number(f);
    x->stack_id = (uint32_t)number(f);
    x->time_ms = (uint32_t)number(f);
    x->thread = (uint16_t)number(f);
    x->oom_number = (uint32_t)number(f);
}

static void read_counters(struct report *r, struct fields *f)
{
    uint64_t slot = number(f), set = number(f);
    if (slot > MAX_DEVICES || set > KIND_COUNT)
        return;
    for (int i = 0; i < COUNTER_KEY_COUNT; i++)
        *counter_figure(&r->counters->sets[slot][set], i) = number(f);
    r->counters->device_seen[slot] = 1;
}

static void read_api(struct report *r, struct fields *f)
{
    uint64_t index = number(f);
    char *name = next_field(f);
    if (index < MAX_APIS && name && (int)index < r->api_count)
        ((const char **)r->api_names)[index] = name;
}

static void read_lost(struct report *r, struct fields *f)
{
    uint64_t index = number(f);
    if (index < LOST_COUNT)
        r->lost[index] = number(f);
}

static void read_thread(struct report *r, struct fields *f)
{
    uint64_t n = number(f);
    if (n >= 1 && n <= r->threads.count) {
        r->threads.list[n - 1].tid = (int)signed_number(f);
        hex_bytes(f, r->threads.list[n - 1].name, sizeof(r->threads.list[0].name));
    }
}

static void read_python_location(struct report *r, struct fields *f)
{
    uint64_t id = number(f);
    if (id < 1 || id > r->python_count)
        return;
    struct python_location *l = &r->python[id - 1];
    l->line = (int)signed_number(f);
    /* Decoded in place: the hex text is twice as long as the bytes. */
    char *file = f->at, *function;
    hex_bytes(f, file, strlen(file) + 1);
    function = f->at;
    hex_bytes(f, function, strlen(function) + 1);
    l->file = file;
    l->function = function;
}

static void read_handle(struct report *r, struct fields *f)
{
    uint64_t n = number(f);
    if (n >= 1 && n <= r->handles.count)
        r->handles.list[n - 1] = hex_number(f);
}

/* From the line after "maps": the process's maps, up to "end-maps"; the
 * dump is complete when "end" follows. */
static void read_maps(struct report *r, char *first, char *end, const char **maps,
                      size_t *maps_length)
{
    char end_maps[32], end_line[32];
    snprintf(end_maps, sizeof(end_maps), "\n%s", dump_record_names[DUMP_END_MAPS]);
    snprintf(end_line, sizeof(end_line), "\n%s\n", dump_record_names[DUMP_END]);
    char *close = strstr(first, end_maps);
    *maps = first;
    *maps_length = close ? (size_t)(close - first + 1) : (size_t)(end - first);
    if (close && strstr(close, end_line))
        r->dump_complete = 1;
}

static int parse(struct report *r, char *text, size_t length, const char **maps,
                 size_t *maps_length)
{
    uint64_t frames_used = 0, failure_number = 0;
    uint64_t start_ms = 0;
    char *p = text, *end = text + length;
    while (p < end) {
        char *eol = memchr(p, '\n', end - p);
        if (!eol)
            eol = end;
        int record = dump_record_of(p);
        if (record == DUMP_MAPS) {
            /* "maps" may be the last bytes of a dump cut short */
            read_maps(r, eol < end ? eol + 1 : end, end, maps, maps_length);
            break;
        }
        *eol = '\0';
        struct fields f = {p};
        next_field(&f); /* the record's name */
        switch (record) {
        case DUMP_PID: r->pid = (int)number(&f); break;
        case DUMP_PPID: r->ppid = (int)number(&f); break;
        case DUMP_SIGNAL: r->event.signal = (int)number(&f); break;
        case DUMP_LOCK: r->event.lock = dump_lock_name(next_field(&f)); break;
        case DUMP_TIME_MS: r->now_ms = (uint32_t)number(&f); break;
        case DUMP_START_UNIX_MS: start_ms = number(&f); break;
        case DUMP_CMDLINE: r->argv_bytes = hex_bytes(&f, r->argv, sizeof(r->argv)); break;
        case DUMP_CWD: hex_bytes(&f, r->start_dir, sizeof(r->start_dir)); break;
        case DUMP_API: read_api(r, &f); break;
        case DUMP_COUNTERS: read_counters(r, &f); break;
        case DUMP_STACK: read_stack(r, &f, &frames_used); break;
        case DUMP_BLOCK: read_block(r, &f); break;
        case DUMP_FAILURES_TOTAL:
            r->failures.total = number(&f);
            if (r->failures.total > INPUT_MAX_COUNT)
                r->failures.total = INPUT_MAX_COUNT;
            failure_number = RING_FIRST(r->failures.ring, r->failures.total);
            r->failures.ooms = (uint32_t)number(&f);
            break;
        case DUMP_FAILURE: read_failure(r, &f, &failure_number); break;
        case DUMP_LOST: read_lost(r, &f); break;
        case DUMP_THREAD: read_thread(r, &f); break;
        case DUMP_PYLOC: read_python_location(r, &f); break;
        case DUMP_HANDLE: read_handle(r, &f); break;
        case DUMP_PROGRAM_END: read_program_end(r, &f); break;
        case DUMP_END_STACK: read_end_stack(r, &f); break;
        }
        p = eol + 1;
    }
    r->start_unix = start_ms / 1000.0;
    r->now_unix = r->start_unix + r->now_ms / 1000.0;
    return 0;
}

char *input_read(const char *path, size_t *length)
{
    int fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
        int error = S_ISDIR(st.st_mode) ? EISDIR : errno;
        close(fd);
        errno = error;
        return NULL;
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > INPUT_MAX_BYTES) {
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    /* A regular file: its size and a byte (it may grow meanwhile); a pipe
     * or a FIFO: a buffer that doubles, read to its end. */
    size_t size = S_ISREG(st.st_mode) ? (size_t)st.st_size + 2 : 1 << 20;
    char *text = malloc(size);
    size_t done = 0;
    int error = text ? 0 : ENOMEM;
    while (!error) {
        if (done + 1 == size) {
            size_t bigger = size * 2 < INPUT_MAX_BYTES + 2 ? size * 2 : INPUT_MAX_BYTES + 2;
            char *grown = bigger > size ? realloc(text, bigger) : NULL;
            if (!grown) {
                error = bigger > size ? ENOMEM : EFBIG;
                break;
            }
            text = grown;
            size = bigger;
        }
        ssize_t n = read(fd, text + done, size - 1 - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            error = errno;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    if (error) {
        free(text);
        errno = error;
        return NULL;
    }
    text[done] = '\0';
    *length = done;
    return text;
}

int dump_parse(struct report *r, const struct report_options *options, const char *input,
               size_t length)
{
    memset(r, 0, sizeof(*r));
    r->options = *options;
    r->rank = r->local_rank = r->world_size = -1; /* not in a dump */
    r->self_time_ns = -1;
    char header[32];
    int header_length = snprintf(header, sizeof(header), "%s %d\n", dump_record_names[DUMP_HEADER],
                                 DUMP_FORMAT_VERSION);
    if (length < (size_t)header_length || strncmp(input, header, (size_t)header_length) != 0) {
        errno = EPROTO;
        return -1;
    }
    /* A copy of our own: lines are cut in place, and names point into it. */
    char *text = report_alloc(r, length + 1);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(text, input, length);
    text[length] = '\0';

    struct counts c = {0};
    count_records(text, length, &c);
    r->counters = report_alloc(r, sizeof(*r->counters));
    r->stack_count = (uint32_t)c.stacks;
    r->stacks = report_alloc(r, (c.stacks + 1) * sizeof(struct stack));
    r->frames = report_alloc(r, (c.frames + 1) * sizeof(uintptr_t));
    r->blocks = report_alloc(r, (c.blocks + 1) * sizeof(struct report_block));
    r->api_names = report_alloc(r, (c.apis + 1) * sizeof(char *));
    r->api_count = (int)(c.apis < MAX_APIS ? c.apis : MAX_APIS);
    r->threads.list = report_alloc(r, (c.threads + 1) * sizeof(struct report_thread));
    r->threads.count = (uint32_t)c.threads;
    r->handles.list = report_alloc(r, (c.handles + 1) * sizeof(uint64_t));
    r->handles.count = (uint32_t)c.handles;
    r->python_count = (uint32_t)c.python;
    r->python = report_alloc(r, (c.python + 1) * sizeof(struct python_location));
    r->end.stack_count = (uint32_t)c.stacks;
    r->end.stacks = report_alloc(r, (c.stacks + 1) * sizeof(struct report_end_stack));
    if (!r->counters || !r->stacks || !r->frames || !r->blocks || !r->api_names ||
        !r->threads.list || !r->handles.list || !r->python || !r->end.stacks) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < r->api_count; i++)
        ((const char **)r->api_names)[i] = "unknown";

    const char *maps = "";
    size_t maps_length = 0;
    parse(r, text, length, &maps, &maps_length);
    /* Signal 0: exit() called during a CUDA call (crashdump.h). */
    r->event.type = r->event.signal ? EVENT_CRASH : EVENT_NONE;
    r->reason = r->event.signal == 0                                      ? "exit"
                : r->event.signal == SIGTERM || r->event.signal == SIGINT ? "terminated"
                                                                          : "crash";
    report_classes_unknown(&r->classes, "a crash dump: Python could not be asked what the "
                                        "tensors are");
    for (int slot = 0; slot <= MAX_DEVICES; slot++)
        if (r->counters->device_seen[slot])
            r->devices[r->device_count++].slot = slot;
    /* A framework whose blocks are in the dump had them recorded: its
     * cache's segments are the ones holding them (report_caches). */
    for (size_t i = 0; i < r->block_count; i++)
        if (kind_in_cache(r->blocks[i].kind))
            r->cache_views[r->blocks[i].kind - KIND_TORCH_TENSOR].view = CACHE_BLOCKS;
    if (report_caches(r) < 0 || report_held_at_end(r) < 0 ||
        report_finish(r, symbolizer_open_maps(maps, maps_length, dlsym)) < 0 ||
        frames_read_lines(r) < 0 || frames_tell_apart(r) < 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int dump_read(const char *path, const struct report_options *options, struct report *r)
{
    size_t length;
    char *text = input_read(path, &length);
    memset(r, 0, sizeof(*r));
    if (!text)
        return -1;
    int result = dump_parse(r, options, text, length);
    int error = errno;
    free(text);
    errno = error;
    return result;
}
