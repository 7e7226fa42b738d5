/* cli_live.c - `cumemtrace live PID`: a running process's memory, every second.
 *
 * Each refresh connects to the process's socket (src/report/live_format.h), reads
 * one JSON document to its end and closes. The process names its Python
 * frames; native frames are symbolized here, against /proc/PID/maps, once
 * each (a cache keeps their names for the next refreshes). The stacks become
 * a small report model, so the site of each is chosen by the same rule as in
 * every report (frames.h).
 *
 * On a terminal the view takes the whole screen (the alternate one, given
 * back at the end); `q` quits, `p` pauses, `+` and `-` list more or fewer
 * sites, `w` asks who holds the memory, `h` shows the keys; the terminal's
 * settings are restored however the command ends (q, Ctrl-C, the process
 * ending). --once prints one view as plain text; --holders asks who holds
 * the memory, waits for the answer and prints one view with it.
 *
 * Who holds the memory only the process's Python knows: a refresh that
 * asks (LIVE_ASK_HOLDERS) gets a request number back; the process walks
 * later, at its next reading with the GIL, and a later refresh shows the
 * answer once its number has come. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "frames.h"
#include "json.h"
#include "live_format.h"
#include "python.h"
#include "report.h"

const char live_usage[] =
    "usage: cumemtrace live PID [--once] [--holders] [--top N]\n"
    "\n"
    "Shows what a process traced by cumemtrace holds, refreshed every second: live\n"
    "memory per device and kind, the sites holding most (with what they gained in\n"
    "the last 10 s) and the growing ones. Keys: q quits, p pauses, + and - list more\n"
    "or fewer sites, w asks who holds the memory (the paths from Python's objects to\n"
    "the tensors and arrays), h shows them. Only the process's own user can\n"
    "watch it; nothing is written anywhere, and the process's results do not change.\n"
    "  --once               print one view as plain text and exit\n"
    "  --holders            ask who holds the memory, wait for the answer (a few\n"
    "                       seconds at most), print one view with it and exit\n"
    "  --top N              sites listed (default 10, at most 20)\n" CLI_EXIT_STATUS;

#define HISTORY 11 /* refreshes kept: the change over 10 s */

/* A native frame's names, kept across refreshes (the strings are ours). */
struct cached_symbol {
    uintptr_t address;
    struct symbol symbol;
};

struct cache {
    struct cached_symbol *items;
    size_t count, size;
};

/* The top sites' live bytes at one refresh, by the process's stack ids. */
struct past {
    uint32_t count;
    uint32_t ids[LIVE_TOP];
    uint64_t bytes[LIVE_TOP];
};

struct live {
    int pid, top, once, tty;
    int help, paused; /* the keys h and p */
    int ask;          /* the next refresh asks who holds the memory (w) */
    uint64_t wanted;  /* the number of the request made, 0: none */
    int redraw;       /* showing the last answer again, after a key */
    char *last;       /* the last answer, kept for a redraw */
    size_t last_length;
    FILE *errors; /* where an answer that is not one is said */
    struct cache cache;
    struct past history[HISTORY];
    int history_count;
    char command[256];
};

static volatile sig_atomic_t stop, resized;

static void on_signal(int signal)
{
    if (signal == SIGWINCH)
        resized = 1;
    else
        stop = 1;
}

/* ---- reading from the process ------------------------------------------ */

/* Who answered at the name, when it was not the process (fetch_error). */
static struct ucred impostor;

/* The peer is the process itself, as the kernel tells (SO_PEERCRED): any
 * user can bind the abstract name first, and would then be shown as the
 * process. Its pid must be PID, its user the owner of /proc/PID. */
static int peer_is(int fd, int pid)
{
    struct ucred peer;
    socklen_t length = sizeof(peer);
    struct stat process;
    char proc[32];
    snprintf(proc, sizeof(proc), "/proc/%d", pid);
    memset(&peer, 0, sizeof(peer));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) < 0 || length != sizeof(peer) ||
        stat(proc, &process) < 0 || peer.pid != pid || peer.uid != process.st_uid) {
        impostor = peer;
        return 0;
    }
    return 1;
}

/* The whole answer, NUL-terminated, in *text (freed by the caller); 0, or -1
 * with errno: ECONNREFUSED or ENOENT when nobody listens, EACCES when the
 * process would not answer (another user's), EPERM when another process
 * holds its name (impostor), ETIMEDOUT. `ask`: it asks who holds the
 * memory (LIVE_ASK_HOLDERS). */
static int fetch(int pid, int ask, char **text, size_t *length)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un address;
    if (connect(fd, (struct sockaddr *)&address, live_socket_address(pid, &address)) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (!peer_is(fd, pid)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    /* The request, then our side shut: the process answers at once. One
     * that went wrong (it closed first) is told by the answer. */
    if (ask)
        send(fd, LIVE_ASK_HOLDERS, strlen(LIVE_ASK_HOLDERS), MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    size_t size = 1 << 16, used = 0;
    char *buffer = malloc(size);
    int status = buffer ? 0 : -1;
    while (status == 0) {
        struct pollfd wait = {fd, POLLIN, 0};
        int ready = poll(&wait, 1, 5000);
        if (ready == 0) {
            errno = ETIMEDOUT;
            status = -1;
            break;
        }
        if (ready < 0 && errno == EINTR && !stop)
            continue;
        if (ready < 0) {
            status = -1;
            break;
        }
        if (used + 1 == size) {
            char *bigger = size < (64u << 20) ? realloc(buffer, size * 2) : NULL;
            if (!bigger) {
                errno = ENOMEM;
                status = -1;
                break;
            }
            buffer = bigger;
            size *= 2;
        }
        ssize_t n = read(fd, buffer + used, size - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            status = -1;
        else if (n == 0)
            break;
        else
            used += (size_t)n;
    }
    int saved = errno;
    close(fd);
    if (status == 0 && used == 0) {
        saved = EACCES; /* closed without a word: not ours to watch */
        status = -1;
    }
    if (status < 0) {
        free(buffer);
        errno = saved;
        return -1;
    }
    buffer[used] = '\0';
    *text = buffer;
    *length = used;
    return 0;
}

/* /proc/PID/maps, NUL-terminated (freed by the caller); NULL on failure. */
static char *read_maps(int pid, size_t *length)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t size = 1 << 16, used = 0;
    char *text = malloc(size);
    for (;;) {
        if (!text)
            break;
        if (used + 1 == size) {
            char *bigger = realloc(text, size * 2);
            if (!bigger) {
                free(text);
                text = NULL;
                break;
            }
            text = bigger;
            size *= 2;
        }
        ssize_t n = read(fd, text + used, size - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    if (text) {
        text[used] = '\0';
        *length = used;
    }
    return text;
}

static void command_line(struct live *l)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", l->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, l->command, sizeof(l->command) - 1) : -1;
    if (fd >= 0)
        close(fd);
    l->command[n > 0 ? n : 0] = '\0';
    for (ssize_t i = 0; i + 1 < n; i++)
        if (l->command[i] == '\0')
            l->command[i] = ' ';
}

/* ---- native frames' names ---------------------------------------------- */

static struct cached_symbol *cache_find(struct cache *c, uintptr_t address)
{
    for (size_t i = 0; i < c->count; i++)
        if (c->items[i].address == address)
            return &c->items[i];
    return NULL;
}

static char *copy_string(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Names for every address of `wanted` the cache lacks, from the maps of now
 * (a library loaded since the last refresh is in them). */
static void cache_fill(struct live *l, const uintptr_t *wanted, size_t count)
{
    struct cache *c = &l->cache;
    size_t missing = 0;
    for (size_t i = 0; i < count; i++)
        if (!cache_find(c, wanted[i]))
            missing++;
    if (!missing)
        return;
    if (c->count + missing > c->size) {
        size_t size = c->size ? c->size : 256;
        while (size < c->count + missing)
            size *= 2;
        struct cached_symbol *bigger = realloc(c->items, size * sizeof(*bigger));
        if (!bigger)
            return;
        c->items = bigger;
        c->size = size;
    }
    size_t length = 0;
    char *maps = read_maps(l->pid, &length);
    struct symbolizer *symbolizer = maps ? symbolizer_open_maps(maps, length, dlsym) : NULL;
    for (size_t i = 0; i < count; i++) {
        if (cache_find(c, wanted[i]))
            continue;
        struct cached_symbol *item = &c->items[c->count++];
        memset(item, 0, sizeof(*item));
        item->address = wanted[i];
        struct symbol found;
        memset(&found, 0, sizeof(found));
        if (symbolizer) {
            symbolize(symbolizer, wanted[i], 1, &found);
            symbolize_line(symbolizer, 1, &found);
        }
        item->symbol = found;
        item->symbol.address = wanted[i];
        item->symbol.function = copy_string(found.function);
        item->symbol.module = copy_string(found.module);
        item->symbol.file = copy_string(found.file);
    }
    symbolizer_close(symbolizer);
    free(maps);
}

static void cache_free(struct cache *c)
{
    for (size_t i = 0; i < c->count; i++) {
        free((char *)c->items[i].symbol.function);
        free((char *)c->items[i].symbol.module);
        free((char *)c->items[i].symbol.file);
    }
    free(c->items);
}

/* ---- the answer as a report model ---------------------------------------- */

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* What one refresh shows, read from the answer. */
struct view {
    struct report r; /* stacks numbered 1.. in the answer's order */
    const struct json_value *root;
    uint32_t *ids; /* ids[k - 1]: the process's id of stack k */
    const struct json_value **stacks;
    uint32_t time_ms;
};

/* The frames of the answer's stacks into v->r: native ones named from the
 * cache, Python ones given tagged addresses of their own. 0 or -1. */
static int build(struct live *l, struct view *v)
{
    struct report *r = &v->r;
    const struct json_value *stacks = json_get(v->root, "stacks");
    if (!stacks || stacks->type != JSON_ARRAY)
        return -1;
    size_t frame_count = 0;
    for (const struct json_value *s = stacks->first; s; s = s->next) {
        const struct json_value *frames = json_get(s, "frames");
        if (!frames || frames->type != JSON_ARRAY)
            return -1;
        frame_count += frames->length;
    }
    r->stack_count = (uint32_t)stacks->length;
    r->stacks = report_alloc(r, (r->stack_count + 1) * sizeof(struct stack));
    r->frames = report_alloc(r, (frame_count + 1) * sizeof(uintptr_t));
    r->addresses = report_alloc(r, (frame_count + 1) * sizeof(uintptr_t));
    r->symbols = report_alloc(r, (frame_count + 1) * sizeof(struct symbol));
    v->ids = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    v->stacks = report_alloc(r, (r->stack_count + 1) * sizeof(*v->stacks));
    if (!r->stacks || !r->frames || !r->addresses || !r->symbols || !v->ids || !v->stacks)
        return -1;
    /* Addresses of every frame, Python ones tagged by their place. */
    size_t at = 0;
    uint32_t k = 0;
    for (const struct json_value *s = stacks->first; s; s = s->next, k++) {
        uint64_t id = 0;
        json_uint(json_get(s, "id"), &id);
        v->ids[k] = (uint32_t)id;
        v->stacks[k] = s;
        r->stacks[k].first_frame = at;
        for (const struct json_value *f = json_get(s, "frames")->first; f; f = f->next) {
            const char *hex = json_string(f);
            r->frames[at] =
                hex ? (uintptr_t)strtoull(hex, NULL, 16) : (uintptr_t)(PYTHON_FRAME_TAG | at);
            at++;
            r->stacks[k].depth++;
        }
        const char *kind = json_string(json_get(s, "kind"));
        for (int n = 0; kind && n < KIND_COUNT; n++)
            if (strcmp(kind, kind_name(n)) == 0)
                stack_note_use(&r->stacks[k], n, 0);
    }
    /* Native addresses named, once each. */
    memcpy(r->addresses, r->frames, at * sizeof(uintptr_t));
    qsort(r->addresses, at, sizeof(uintptr_t), by_address);
    size_t unique = 0;
    for (size_t i = 0; i < at; i++)
        if (i == 0 || r->addresses[i] != r->addresses[unique - 1])
            r->addresses[unique++] = r->addresses[i];
    r->address_count = unique;
    size_t native = 0;
    while (native < unique && !is_python_frame(r->addresses[native]))
        native++;
    cache_fill(l, r->addresses, native);
    for (size_t i = 0; i < native; i++) {
        const struct cached_symbol *c = cache_find(&l->cache, r->addresses[i]);
        if (c)
            r->symbols[i] = c->symbol;
        r->symbols[i].address = r->addresses[i];
    }
    /* Python frames: what the process said of them. */
    k = 0;
    for (const struct json_value *s = stacks->first; s; s = s->next, k++) {
        size_t first = r->stacks[k].first_frame, i = 0;
        for (const struct json_value *f = json_get(s, "frames")->first; f; f = f->next, i++) {
            if (f->type != JSON_OBJECT)
                continue;
            long index = report_frame_index(r, r->frames[first + i]);
            struct symbol *symbol = &r->symbols[index];
            uint64_t line = 0;
            json_uint(json_get(f, "line"), &line);
            symbol->address = r->frames[first + i];
            symbol->python = 1;
            symbol->function = json_string(json_get(f, "function"));
            symbol->file = json_string(json_get(f, "file"));
            symbol->line = (int)line;
        }
    }
    const char *cwd = json_string(json_get(v->root, "cwd"));
    snprintf(r->start_dir, sizeof(r->start_dir), "%s", cwd ? cwd : "");
    if (report_real_paths(r) < 0)
        return -1;
    uint64_t time_ms = 0;
    json_uint(json_get(v->root, "time_ms"), &time_ms);
    v->time_ms = (uint32_t)time_ms;
    /* Every stack of the answer is shown: its site told apart from theirs. */
    r->shown = report_alloc(r, (r->stack_count + 1) * sizeof(uint32_t));
    if (!r->shown || report_classify_frames(r) < 0)
        return -1;
    for (uint32_t id = 1; id <= r->stack_count; id++)
        r->shown[r->shown_count++] = id;
    return frames_tell_apart(r);
}

/* ---- the view ----------------------------------------------------------- */

/* A growable text of the view's lines, each cut to the terminal's width,
 * control characters written as \xNN (output_text): names come from the
 * watched process (its command line, its Python files and functions). */
struct screen {
    char *text;
    size_t used, size;
    int width;
};

static void line(struct screen *s, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void line(struct screen *s, const char *format, ...)
{
    char raw[1024], text[4 * sizeof(raw)];
    va_list args;
    va_start(args, format);
    vsnprintf(raw, sizeof(raw), format, args);
    va_end(args);
    output_text(raw, text, sizeof(text));
    size_t n = strlen(text);
    if (s->width > 0 && n > (size_t)s->width)
        n = (size_t)s->width;
    if (s->used + n + 2 > s->size) {
        size_t size = s->size ? s->size * 2 : 8192;
        while (size < s->used + n + 2)
            size *= 2;
        char *bigger = realloc(s->text, size);
        if (!bigger)
            return;
        s->text = bigger;
        s->size = size;
    }
    memcpy(s->text + s->used, text, n);
    s->used += n;
    s->text[s->used++] = '\n';
    s->text[s->used] = '\0';
}

static void blank(struct screen *s)
{
    line(s, "%s", "");
}

/* The site of stack k as every report names it (frames_site_line), with
 * its two callers at least ("< train_step:35 < main:45"), its file by its
 * base name: a terminal's line is short. */
static void site_text(const struct view *v, uint32_t k, char *text, size_t size)
{
    const struct report *r = &v->r;
    const struct stack *s = &r->stacks[k];
    struct frame_view view;
    frames_view(r, s, &view);
    if (view.site < 0) {
        snprintf(text, size, "(no stack recorded)");
        return;
    }
    frames_site_line(r, k + 1, 2, text, size);
    long index = report_frame_index(r, r->frames[s->first_frame + view.site]);
    const char *file = index >= 0 ? r->symbols[index].file : NULL;
    size_t length = file ? strlen(file) : 0;
    if (file && strncmp(text, file, length) == 0 && text[length] == ':') {
        size_t cut = (size_t)(output_base_name(file) - file);
        memmove(text, text + cut, strlen(text + cut) + 1);
    }
}

/* Stack k of the view by the process's id; -1 if absent. */
static long stack_index(const struct view *v, uint64_t id)
{
    for (uint32_t k = 0; k < v->r.stack_count; k++)
        if (v->ids[k] == id)
            return k;
    return -1;
}

static uint64_t number(const struct json_value *object, const char *key)
{
    uint64_t value = 0;
    json_uint(json_get(object, key), &value);
    return value;
}

/* The program ended (its exit hooks ran): the stacks' figures are what they
 * held then, while its interpreter's teardown frees what globals held. */
static int ended(const struct view *v)
{
    const struct json_value *end = json_get(v->root, "program_end");
    return end && end->type == JSON_OBJECT;
}

/* A stack's bytes as shown: live, or held at the program's end. */
static uint64_t stack_bytes(const struct view *v, const struct json_value *stack)
{
    return number(stack, ended(v) ? "end_bytes" : "live_bytes");
}

static void write_devices(const struct view *v, struct screen *s)
{
    const struct json_value *devices = json_get(v->root, "devices");
    line(s, "%-14s %10s %10s   %s", "Memory", "live", "peak", "by kind (live)");
    for (const struct json_value *d = devices ? devices->first : NULL; d; d = d->next) {
        char name[32], live[24], peak[24], kinds[512] = "";
        const struct json_value *device = json_get(d, "device");
        uint64_t slot = 0;
        if (json_uint(device, &slot) == 0)
            snprintf(name, sizeof(name), "device %llu", (unsigned long long)slot);
        else
            snprintf(name, sizeof(name), "no device");
        const struct json_value *all = json_get(d, "all");
        uint64_t pair[2] = {0, 0};
        json_uint(all && all->first ? all->first : NULL, &pair[0]);
        json_uint(all && all->first ? all->first->next : NULL, &pair[1]);
        size_t used = 0;
        const struct json_value *by_kind = json_get(d, "kinds");
        for (const struct json_value *k = by_kind ? by_kind->first : NULL; k; k = k->next) {
            uint64_t current = 0;
            char bytes[24];
            json_uint(k->first, &current);
            format_bytes(current, bytes, sizeof(bytes));
            int n = snprintf(kinds + used, sizeof(kinds) - used, "%s%s %s", used ? ", " : "",
                             k->key, bytes);
            if (n < 0 || (size_t)n >= sizeof(kinds) - used)
                break;
            used += (size_t)n;
        }
        format_bytes(pair[0], live, sizeof(live));
        format_bytes(pair[1], peak, sizeof(peak));
        line(s, "%-14s %10s %10s   %s", name, live, peak, kinds);
    }
}

/* A framework's blocks of `kind` live now, over every device. */
static uint64_t blocks_live(const struct view *v, const char *kind)
{
    const struct json_value *devices = json_get(v->root, "devices");
    uint64_t total = 0;
    for (const struct json_value *d = devices ? devices->first : NULL; d; d = d->next) {
        const struct json_value *pair = json_get(json_get(d, "kinds"), kind);
        uint64_t current = 0;
        if (pair && json_uint(pair->first, &current) == 0)
            total += current;
    }
    return total;
}

/* One line per framework's cache: where its blocks are recorded, what its
 * segments reserve and its blocks use (the sites below are its blocks');
 * else why the sites below are its segments. */
static void write_caches(const struct view *v, struct screen *s)
{
    static const struct {
        const char *kind, *framework, *blocks;
    } names[] = {{"torch_tensor", "PyTorch", "tensors"},
                 {"cupy_block", "CuPy", "blocks"},
                 {"jax_array", "JAX", "arrays"}};
    const struct json_value *caches = json_get(v->root, "caches");
    for (const struct json_value *c = caches ? caches->first : NULL; c; c = c->next) {
        const char *kind = json_string(json_get(c, "kind"));
        const char *view = json_string(json_get(c, "view"));
        const char *why = json_string(json_get(c, "why"));
        size_t n = 0;
        while (n < sizeof(names) / sizeof(names[0]) && (!kind || strcmp(kind, names[n].kind)))
            n++;
        if (n == sizeof(names) / sizeof(names[0]) || !view)
            continue;
        char reserved[24], used[24], unused[24];
        uint64_t segments = number(c, "reserved_bytes"), blocks = blocks_live(v, kind);
        format_bytes(segments, reserved, sizeof(reserved));
        format_bytes(blocks, used, sizeof(used));
        format_bytes(segments > blocks ? segments - blocks : 0, unused, sizeof(unused));
        if (strcmp(view, "blocks") == 0)
            line(s,
                 "%s's cache: %s reserved, %s in %s, %s unused (the sites below are its "
                 "%s', not its segments')",
                 names[n].framework, reserved, used, names[n].blocks, unused, names[n].blocks);
        else if (strcmp(view, "segments") == 0)
            line(s,
                 "%s's %s are not traced one by one%s%s%s: the sites below hold its cache's "
                 "segments",
                 names[n].framework, names[n].blocks, why && *why ? " (" : "", why ? why : "",
                 why && *why ? ")" : "");
    }
}

/* What stack `id` held HISTORY - 1 refreshes ago (or at the oldest kept);
 * 0 and *known 0 when it was not among the top then. */
static uint64_t past_bytes(const struct live *l, uint32_t id, int *known)
{
    const struct past *p = &l->history[0];
    *known = 0;
    for (uint32_t i = 0; i < p->count; i++)
        if (p->ids[i] == id) {
            *known = 1;
            return p->bytes[i];
        }
    return 0;
}

static void write_top(struct live *l, const struct view *v, struct screen *s)
{
    const struct json_value *top = json_get(v->root, "top");
    blank(s);
    if (ended(v)) {
        line(s,
             "The program ended %.1f s after its start; its interpreter's teardown is freeing "
             "what globals held",
             number(json_get(v->root, "program_end"), "time_ms") / 1000.0);
        line(s, "Top sites by bytes held at the program's end");
    } else {
        line(s, "Top sites by live bytes");
    }
    line(s, "  %3s %10s %8s %11s   %s", "#", ended(v) ? "at end" : "live", "blocks", "in 10 s",
         "site");
    int shown = 0;
    for (const struct json_value *t = top ? top->first : NULL; t && shown < l->top; t = t->next) {
        uint64_t id = 0;
        json_uint(t, &id);
        long k = stack_index(v, id);
        if (k < 0)
            continue;
        const struct json_value *stack = v->stacks[k];
        char live[24], change[24], site[512], tag[160] = "";
        uint64_t bytes = stack_bytes(v, stack);
        format_bytes(bytes, live, sizeof(live));
        int known;
        uint64_t before = past_bytes(l, (uint32_t)id, &known);
        if (!known || l->history_count < 2)
            snprintf(change, sizeof(change), "-");
        else
            cli_format_change((long long)bytes - (long long)before, change, sizeof(change));
        site_text(v, (uint32_t)k, site, sizeof(site));
        const char *kind = json_string(json_get(stack, "kind"));
        const char *api = json_string(json_get(stack, "api"));
        if (kind)
            snprintf(tag, sizeof(tag), "  [%s%s%s]", kind, api ? " via " : "", api ? api : "");
        line(s, "  %3d %10s %8llu %11s   %s%s", ++shown, live,
             (unsigned long long)number(stack, ended(v) ? "end_blocks" : "live_blocks"), change,
             site, tag);
    }
    if (!shown)
        line(s, "  (no memory held)");
}

static void write_growing(const struct view *v, struct screen *s)
{
    const struct json_value *growing = json_get(v->root, "growing");
    const struct json_value *growth = json_get(v->root, "growth");
    const char *mode = json_string(json_get(growth, "mode"));
    int marks = mode && strcmp(mode, "marks") == 0;
    blank(s);
    line(s, "Growing (leak suspects: what the site kept rose all along, over %llu observations)",
         (unsigned long long)number(growth, "samples"));
    if (marks)
        line(s, "  %3s %11s %10s   %s", "#", "per mark", ended(v) ? "at end" : "live", "site");
    else /* per call of the site first: the rate its own work defines */
        line(s, "  %3s %11s %11s %10s   %s", "#", "a call", "per second",
             ended(v) ? "at end" : "live", "site");
    int shown = 0;
    for (const struct json_value *g = growing ? growing->first : NULL; g; g = g->next) {
        uint64_t id = 0;
        json_uint(g, &id);
        long k = stack_index(v, id);
        if (k < 0)
            continue;
        char rate[24], call[24] = "-", live[24], site[512];
        double per = 0, per_call = 0;
        json_number(json_get(v->stacks[k], "rate"), &per);
        rate[0] = '+';
        format_bytes(growth_rate_bytes(per), rate + 1, sizeof(rate) - 1); /* a peer's number */
        /* absent from a process of an earlier version: "-" */
        if (json_number(json_get(v->stacks[k], "rate_per_call"), &per_call) == 0 &&
            growth_rate_bytes(per_call)) {
            call[0] = '+';
            format_bytes(growth_rate_bytes(per_call), call + 1, sizeof(call) - 1);
        }
        format_bytes(stack_bytes(v, v->stacks[k]), live, sizeof(live));
        site_text(v, (uint32_t)k, site, sizeof(site));
        if (marks)
            line(s, "  %3d %11s %10s   %s", ++shown, rate, live, site);
        else
            line(s, "  %3d %11s %11s %10s   %s", ++shown, call, rate, live, site);
    }
    if (!shown)
        line(s, "  (none)");
}

/* The kind named `name` (kinds.h); -1 if none is. */
static int kind_of(const char *name)
{
    for (int n = 0; name && n < KIND_COUNT; n++)
        if (strcmp(name, kind_name(n)) == 0)
            return n;
    return -1;
}

/* Whether the answer to request `wanted` is in `holders` (or none will
 * come: not asked, off, no Python, Python ended, a process that cannot be
 * asked): the --holders wait ends. */
static int holders_settled(const struct json_value *holders, uint64_t wanted)
{
    const char *python = json_string(json_get(holders, "python"));
    const struct json_value *setting = json_get(holders, "setting");
    return !wanted || !holders || !setting || setting->type != JSON_TRUE || !python ||
           strcmp(python, "running") != 0 || number(holders, "answered") >= wanted;
}

/* Who holds the memory, once asked (w, --holders): the process's answer,
 * its paths most bytes first, each with the site of its largest block when
 * that is among the sites shown; else why there is none (yet). */
static void write_holders(const struct live *l, const struct view *v, struct screen *s)
{
    if (!l->wanted)
        return;
    const struct json_value *holders = json_get(v->root, "holders");
    const char *python = json_string(json_get(holders, "python"));
    const struct json_value *setting = json_get(holders, "setting");
    uint64_t answered = number(holders, "answered");
    blank(s);
    if (!holders || !setting || !python) {
        line(s, "Held by: this process's cumemtrace cannot be asked (an older version)");
        return;
    }
    if (setting->type != JSON_TRUE) {
        line(s, "Held by: holders off (CUMEMTRACE_HOLDERS=0): the process walks nothing");
        return;
    }
    if (strcmp(python, "none") == 0) {
        line(s, "Held by: no Python in this process: only Python's objects hold tensors and "
                "arrays");
        return;
    }
    if (answered < l->wanted) {
        line(s, "Held by: %s (request %llu)%s",
             strcmp(python, "running") == 0
                 ? "waiting for the process: it walks at its next reading with the GIL"
                 : "Python has ended: no walk after its exit hooks",
             (unsigned long long)l->wanted, answered ? "; an older answer:" : "");
        if (!answered)
            return;
    } else {
        line(s, "Held by (request %llu: %llu objects walked in %llu ms; w asks again)",
             (unsigned long long)answered, (unsigned long long)number(holders, "objects"),
             (unsigned long long)number(holders, "ms"));
    }
    const char *why = json_string(json_get(holders, "why"));
    const char *cut = json_string(json_get(holders, "cut_short"));
    if (why) {
        line(s, "  the walk named no holder: %s", why);
        return;
    }
    if (cut)
        line(s, "  walk cut short %s (CUMEMTRACE_HOLDERS_MS): the paths it reached", cut);
    const struct json_value *paths = json_get(holders, "paths");
    int shown = 0;
    for (const struct json_value *p = paths ? paths->first : NULL; p; p = p->next) {
        struct report_holder_path holder;
        memset(&holder, 0, sizeof(holder));
        const char *path = json_string(json_get(p, "path"));
        const char *container = json_string(json_get(p, "container"));
        snprintf(holder.path, sizeof(holder.path), "%s", path ? path : "?");
        snprintf(holder.container, sizeof(holder.container), "%s", container ? container : "");
        holder.kind = kind_of(json_string(json_get(p, "kind")));
        holder.tensors = number(p, "tensors");
        char text[REPORT_CLASS_TEXT + 96], bytes[24], site[512] = "";
        report_holder_text(&holder, text, sizeof(text));
        format_bytes(number(p, "bytes"), bytes, sizeof(bytes));
        uint64_t id = 0;
        long k = json_uint(json_get(p, "stack"), &id) == 0 ? stack_index(v, id) : -1;
        if (k >= 0) {
            memcpy(site, "   ", 4);
            site_text(v, (uint32_t)k, site + 3, sizeof(site) - 3);
        }
        line(s, "  %10s   held by %s%s", bytes, text, site);
        shown++;
    }
    uint64_t more = number(holders, "path_count");
    if (more > (uint64_t)shown && shown)
        line(s, "  ... %llu more paths", (unsigned long long)(more - (uint64_t)shown));
    if (!shown)
        line(s, "  (no tensor or array is held)");
}

/* Keep this refresh's top bytes; the oldest kept is HISTORY - 1 back. */
static void remember(struct live *l, const struct view *v)
{
    if (l->history_count == HISTORY) {
        memmove(&l->history[0], &l->history[1], (HISTORY - 1) * sizeof(l->history[0]));
        l->history_count--;
    }
    struct past *p = &l->history[l->history_count++];
    memset(p, 0, sizeof(*p));
    const struct json_value *top = json_get(v->root, "top");
    for (const struct json_value *t = top ? top->first : NULL; t && p->count < LIVE_TOP;
         t = t->next) {
        uint64_t id = 0;
        json_uint(t, &id);
        long k = stack_index(v, id);
        if (k < 0)
            continue;
        p->ids[p->count] = (uint32_t)id;
        p->bytes[p->count++] = stack_bytes(v, v->stacks[k]);
    }
}

static int terminal_width(void)
{
    struct winsize size;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 20)
        return size.ws_col;
    return 0; /* not a terminal: lines as long as they are */
}

/* One refresh: fetch, read, show. 0; -1 with errno when the process could
 * not be asked; 1 when its answer was not one (a message printed). */
static int show(struct live *l, char *text, size_t length, FILE *to);

/* l->last, parsed from a copy into `document` (json_free'd by the caller,
 * with the copy in *copy, freed by it); its "holders", or NULL. */
static const struct json_value *last_holders(struct live *l, struct json_document *document,
                                             char **copy)
{
    char error[64];
    memset(document, 0, sizeof(*document));
    *copy = malloc(l->last_length + 1);
    if (!*copy)
        return NULL;
    memcpy(*copy, l->last, l->last_length + 1);
    if (json_parse(*copy, l->last_length, document, error, sizeof(error)) < 0)
        return NULL;
    return json_get(document->root, "holders");
}

/* The last answer was to a refresh that asked: the request's number kept,
 * to tell its answer when it comes (a process that gave none: the first,
 * so that the view says why no answer will come). */
static void asked(struct live *l)
{
    struct json_document document;
    char *copy = NULL;
    const struct json_value *holders = last_holders(l, &document, &copy);
    uint64_t mine = 0;
    l->wanted = json_uint(json_get(holders, "mine"), &mine) == 0 && mine ? mine : 1;
    json_free(&document);
    free(copy);
}

/* The process's answer, asking for holders if l->ask says so, kept as
 * l->last in place of the one before. 0, or -1 with errno as fetch. */
static int fetch_answer(struct live *l)
{
    char *text = NULL;
    size_t length = 0;
    if (fetch(l->pid, l->ask, &text, &length) < 0)
        return -1;
    free(l->last);
    l->last = text;
    l->last_length = length;
    if (l->ask)
        asked(l);
    l->ask = 0;
    return 0;
}

/* --holders: ask, then fetch again every HOLDERS_POLL_MS until the answer
 * came (or none will), for HOLDERS_WAIT_MS at most; the last answer kept.
 * 0, or -1 with errno as fetch. */
#define HOLDERS_POLL_MS 200
#define HOLDERS_WAIT_MS 15000

static int wait_for_holders(struct live *l)
{
    l->ask = 1;
    for (int waited = 0;; waited += HOLDERS_POLL_MS) {
        if (fetch_answer(l) < 0)
            return -1;
        struct json_document document;
        char *copy = NULL;
        const struct json_value *holders = last_holders(l, &document, &copy);
        int settled = holders_settled(holders, l->wanted);
        json_free(&document);
        free(copy);
        if (settled || stop || waited >= HOLDERS_WAIT_MS)
            return 0;
        poll(NULL, 0, HOLDERS_POLL_MS);
    }
}

/* A new answer shown (`fresh`), or the last one again after a key changed
 * the view (what the sites gained is not remembered twice then). */
static int refresh(struct live *l, int fresh)
{
    if ((fresh || !l->last) && fetch_answer(l) < 0)
        return -1;
    l->redraw = !fresh;
    /* show() parses in place: a copy, so that the answer can be shown again */
    char *copy = malloc(l->last_length + 1);
    if (!copy) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(copy, l->last, l->last_length + 1);
    int status = show(l, copy, l->last_length, stdout);
    free(copy);
    return status;
}

/* One answer (`text`, NUL-terminated, from a peer that may say anything)
 * read and shown on `to`; 0, or 1 when it was not one (a message printed). */
static int show(struct live *l, char *text, size_t length, FILE *to)
{
    struct view *v = calloc(1, sizeof(*v));
    struct json_document document;
    memset(&document, 0, sizeof(document));
    char error[256] = "";
    int status = 1;
    if (v && json_parse(text, length, &document, error, sizeof(error)) == 0) {
        v->root = document.root;
        const char *format = json_string(json_get(v->root, "format"));
        if (!format || strcmp(format, "cumemtrace-live") != 0 ||
            number(v->root, "version") != LIVE_FORMAT_VERSION)
            snprintf(error, sizeof(error), "an answer of another version of cumemtrace");
        else if (build(l, v) < 0)
            snprintf(error, sizeof(error), "an answer that does not hold together");
        else
            status = 0;
    }
    if (status == 0) {
        struct screen s = {NULL, 0, 0, l->once ? 0 : terminal_width()};
        line(&s, "cumemtrace live: pid %d, %.1f s after its start%s   %s", l->pid,
             v->time_ms / 1000.0,
             l->once     ? ""
             : l->paused ? ", paused (p resumes); q quits"
                         : ", every second; q quits, h keys",
             l->command);
        if (l->help && !l->once)
            line(&s, "keys: q quit   p pause/resume   + more sites   - fewer sites   w who "
                     "holds it   h hide this line");
        blank(&s);
        write_devices(v, &s);
        write_caches(v, &s);
        if (!l->redraw)
            remember(l, v);
        write_top(l, v, &s);
        write_growing(v, &s);
        write_holders(l, v, &s);
        if (l->tty)
            fputs("\033[H\033[2J", to);
        fputs(s.text ? s.text : "", to);
        if (!l->tty && !l->once)
            fputs("\n", to);
        fflush(to);
        free(s.text);
    } else {
        fprintf(l->errors, "cumemtrace: pid %d: %s\n", l->pid, error[0] ? error : "out of memory");
    }
    json_free(&document);
    if (v)
        report_release(&v->r);
    free(v);
    return status;
}

int live_show_answer(char *text, size_t length, FILE *to)
{
    struct live *l = calloc(1, sizeof(*l));
    if (!l)
        return 1;
    l->pid = (int)getpid();
    l->top = LIVE_TOP;
    l->once = 1;
    l->wanted = 1;
    l->errors = to;
    int status = show(l, text, length, to);
    cache_free(&l->cache);
    free(l);
    return status;
}

/* ---- the terminal ---------------------------------------------------------- */

static struct termios saved_terminal;
static int terminal_changed;

static void terminal_begin(struct live *l)
{
    l->tty = !l->once && isatty(STDOUT_FILENO);
    if (isatty(STDIN_FILENO) && !l->once && tcgetattr(STDIN_FILENO, &saved_terminal) == 0) {
        struct termios raw = saved_terminal;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
            terminal_changed = 1;
    }
    if (l->tty)
        fputs("\033[?1049h\033[?25l", stdout); /* the alternate screen, no cursor */
}

static void terminal_end(const struct live *l)
{
    if (l->tty)
        fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    if (terminal_changed)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_terminal);
    terminal_changed = 0;
}

/* What wait_for_key saw. */
enum { KEY_REFRESH, KEY_QUIT, KEY_REDRAW, KEY_ASK };

/* Wait until the next refresh is due (KEY_REFRESH); KEY_QUIT if `q` was
 * pressed or a signal asked to stop; KEY_REDRAW at once when a key changed
 * the view: h (the keys), p (pause), + and - (sites listed); KEY_ASK at
 * once for w (who holds the memory: asked at a refresh made now). */
static int wait_for_key(struct live *l, int milliseconds)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (stop)
            return KEY_QUIT;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (spent >= milliseconds || resized) {
            resized = 0;
            return KEY_REFRESH;
        }
        struct pollfd input = {STDIN_FILENO, POLLIN, 0};
        int ready = poll(&input, 1, (int)(milliseconds - spent));
        if (ready < 0 && errno != EINTR)
            return KEY_REFRESH;
        if (ready > 0) {
            char keys[64];
            ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
            if (n <= 0) {
                poll(NULL, 0, (int)(milliseconds - spent)); /* input closed: keys no more */
                return KEY_REFRESH;
            }
            if (memchr(keys, 'q', (size_t)n) || memchr(keys, 'Q', (size_t)n))
                return KEY_QUIT;
            if (memchr(keys, 'w', (size_t)n)) {
                l->ask = 1;
                return KEY_ASK;
            }
            int changed = 0;
            for (ssize_t i = 0; i < n; i++) {
                switch (keys[i]) {
                case 'h':
                case '?':
                    l->help = !l->help;
                    changed = 1;
                    break;
                case 'p':
                case ' ':
                    l->paused = !l->paused;
                    changed = 1;
                    break;
                case '+':
                case '=':
                    l->top += l->top < LIVE_TOP;
                    changed = 1;
                    break;
                case '-':
                    l->top -= l->top > 1;
                    changed = 1;
                    break;
                }
            }
            if (changed)
                return KEY_REDRAW;
        }
    }
}

static const char *fetch_error(int error)
{
    if (error == ECONNREFUSED || error == ENOENT)
        return "no cumemtrace listens in it (not traced, no CUDA call yet, CUMEMTRACE_LIVE=0, "
               "or not a process of this machine)";
    if (error == EACCES)
        return "it does not answer this user (only the user it runs as can watch it)";
    if (error == EPERM) {
        static char text[160];
        snprintf(text, sizeof(text),
                 "its live view's name is held by another process (pid %d, "
                 "uid %u), not shown",
                 (int)impostor.pid, (unsigned)impostor.uid);
        return text;
    }
    return strerror(error);
}

int command_live(int argc, char **argv)
{
    static const struct option longs[] = {{"once", no_argument, NULL, '1'},
                                          {"top", required_argument, NULL, 't'},
                                          {"holders", no_argument, NULL, 'w'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    struct cli_args args = {"live", argc, argv, ":h", longs, 0};
    struct live *l = calloc(1, sizeof(*l));
    if (!l) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    l->top = 10;
    l->errors = stderr;
    int status = CLI_OK;
    for (int c; status == CLI_OK && (c = cli_getopt(&args)) != -1;) {
        long top = 0;
        switch (c) {
        case '1': l->once = 1; break;
        case 'w': l->once = l->ask = 1; break;
        case 't':
            status = cli_parse_count("live", optarg, &top);
            l->top = top > 0 && top <= LIVE_TOP ? (int)top : LIVE_TOP;
            break;
        case 'h':
            fputs(live_usage, stdout);
            free(l);
            return CLI_OK;
        default: status = CLI_USAGE;
        }
    }
    char *end = NULL;
    long pid = status == CLI_OK && optind < argc ? strtol(argv[optind], &end, 10) : 0;
    if (status == CLI_OK && (optind >= argc || *end || pid <= 0 || pid > 4194304))
        status = cli_usage_error("live", optind >= argc ? "no process given" : "not a process id",
                                 optind < argc ? argv[optind] : NULL);
    else if (status == CLI_OK && optind + 1 < argc)
        status = cli_usage_error("live", "one process at a time", argv[optind + 1]);
    if (status != CLI_OK) {
        free(l);
        return status;
    }
    l->pid = (int)pid;
    command_line(l);

    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = on_signal; /* no SA_RESTART: poll returns, the loop sees stop */
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    sigaction(SIGWINCH, &action, NULL);

    /* A process that is not there: said as such, not as one without us. */
    if (kill(l->pid, 0) < 0 && errno == ESRCH) {
        fprintf(stderr, "cumemtrace: cannot watch pid %d: no such process\n", l->pid);
        free(l);
        return CLI_UNREADABLE;
    }
    int shown = 0, fresh = 1;
    if (l->ask && wait_for_holders(l) == 0)
        fresh = 0; /* --holders: the answer waited for is the view */
    terminal_begin(l);
    for (;;) {
        int result = refresh(l, fresh);
        if (result < 0 && stop) { /* Ctrl-C while asking: quit as q does */
            terminal_end(l);
            break;
        }
        if (result < 0) {
            int error = errno;
            terminal_end(l);
            if (shown && (error == ECONNREFUSED || error == ENOENT))
                fprintf(stderr, "cumemtrace: pid %d has ended\n", l->pid);
            else
                fprintf(stderr, "cumemtrace: cannot watch pid %d: %s\n", l->pid,
                        fetch_error(error));
            status = shown && (error == ECONNREFUSED || error == ENOENT) ? CLI_OK : CLI_UNREADABLE;
            break;
        }
        if (result > 0) {
            terminal_end(l);
            status = CLI_UNREADABLE;
            break;
        }
        shown++;
        int key = l->once ? KEY_QUIT : wait_for_key(l, 1000);
        if (key == KEY_QUIT) {
            terminal_end(l);
            break;
        }
        fresh = key == KEY_ASK || (key == KEY_REFRESH && !l->paused);
    }
    free(l->last);
    cache_free(&l->cache);
    free(l);
    return status;
}
