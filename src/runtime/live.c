/* live.c - the traced process's side of `cumemtrace live` (see live_format.h).
 *
 * One listening socket and one thread per process, both this process's
 * only: after fork the child closes the socket it inherited (the parent's
 * name), and opens its own and starts its thread at its first CUDA call,
 * as the snapshot thread does (signals.c): a thread made in the fork
 * handler can wait for ever on a lock of the allocator that another thread
 * of the parent held at the fork (ASan's allocator has no fork handler),
 * and a child that never uses CUDA (a worker, a shell) needs neither.
 * Everything a request needs is allocated for it
 * and released before the next, so an idle listener holds one socket, one
 * sleeping thread and nothing else. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "counters.h"
#include "growth.h"
#include "holders_live.h"
#include "host.h"
#include "kinds.h"
#include "live.h"
#include "log.h"
#include "output.h"
#include "python.h"
#include "registry.h"
#include "stacks.h"
#include "threads.h"
#include "torch_stats.h"
#include "tracker.h"

#define LIVE_STACKS (LIVE_TOP + LIVE_GROWING)

static int listener = -1;

/* What one answer is made of, copied under the tracker's lock. */
struct live_copy {
    struct counter_table counters;
    struct growth_state growth;
    uint32_t now_ms;
    uint32_t top[LIVE_TOP], top_count;
    uint32_t growing[LIVE_GROWING], growing_count;
    double rates[LIVE_GROWING];
    uint32_t ids[LIVE_STACKS], count; /* the stacks below, once each */
    struct cache_state caches[CACHE_KINDS];
    uint64_t reserved[CACHE_KINDS]; /* live in each cache's segments */
    int ended;                      /* the program ended: figures of its end */
    uint32_t end_ms;
    struct stack stacks[LIVE_STACKS];
    uint64_t end_bytes[LIVE_STACKS], end_blocks[LIVE_STACKS]; /* held at the program's end */
    uintptr_t frames[LIVE_STACKS][CONFIG_MAX_DEPTH];
    int python;                                 /* torch_stats_python() */
    uint64_t mine;                              /* the request this peer made, 0: none */
    struct holders_live holders;                /* the requests, the latest answer */
    uint32_t holder_stacks[HOLDERS_LIVE_LINES]; /* each line's largest block's stack */
    int holder_kinds[HOLDERS_LIVE_LINES];       /* and kind; -1 if not recorded */
    struct out out;
};

/* Keep `id` in a list of at most `size`, sorted by `value` (highest first). */
static void keep_best(uint32_t *list, double *values, uint32_t *count, uint32_t size, uint32_t id,
                      double value)
{
    uint32_t at = *count;
    while (at > 0 && values[at - 1] < value)
        at--;
    if (at == size)
        return;
    uint32_t last = *count < size ? (*count)++ : size - 1;
    memmove(list + at + 1, list + at, (last - at) * sizeof(*list));
    memmove(values + at + 1, values + at, (last - at) * sizeof(*values));
    list[at] = id;
    values[at] = value;
}

/* What a stack held when the program ended (0 for one made after). */
static uint64_t end_bytes(uint32_t id)
{
    return id <= tracker.end_stacks ? tracker.end_totals[id - 1].bytes : 0;
}

static uint64_t end_blocks(uint32_t id)
{
    return id <= tracker.end_stacks ? tracker.end_totals[id - 1].blocks : 0;
}

static void remember(struct live_copy *c, uint32_t id)
{
    for (uint32_t i = 0; i < c->count; i++)
        if (c->ids[i] == id)
            return;
    const struct stack_record *s = stack_get(id);
    uint32_t depth = s->depth < CONFIG_MAX_DEPTH ? s->depth : CONFIG_MAX_DEPTH;
    c->end_bytes[c->count] = c->ended ? end_bytes(id) : 0;
    c->end_blocks[c->count] = c->ended ? end_blocks(id) : 0;
    c->ids[c->count] = id;
    stack_view(id, &c->stacks[c->count]);
    growth_of(id, &c->growth, &c->stacks[c->count].growth);
    c->stacks[c->count].depth = depth;
    memcpy(c->frames[c->count], stack_frames(s), depth * sizeof(uintptr_t));
    c->count++;
}

/* Under the lock: read only. No growth sample is taken, so the reports the
 * process writes are the ones it would have written unwatched. Once a
 * Python program has ended, its interpreter's teardown frees what globals
 * held: the stacks are then ranked by what they held at the end. */
static void copy(struct live_copy *c)
{
    double top_bytes[LIVE_TOP];
    tracker_lock();
    c->now_ms = tracker_now_ms();
    counters_snapshot(&c->counters);
    growth_view(&c->growth, c->now_ms);
    c->ended = tracker.program_ended;
    c->end_ms = tracker.program_end_ms;
    /* A cache whose blocks are recorded: its blocks' stacks say who holds
     * the memory; its segments' stacks, holding the same, are summed apart
     * (as report_cache_segment leaves them out of every report). */
    uint32_t known = 0;
    memcpy(c->caches, tracker.caches, sizeof(c->caches));
    for (int k = 0; k < CACHE_KINDS; k++)
        if (c->caches[k].view == CACHE_BLOCKS)
            known |= STACK_CACHE_SEGMENT(KIND_TORCH_TENSOR + k);
    for (uint32_t id = 1; id <= stack_count(); id++) {
        const struct stack_record *s = stack_get(id);
        struct stack_growth view;
        growth_of(id, &c->growth, &view);
        const struct stack_growth *g = &view;
        uint64_t live = c->ended ? end_bytes(id) : s->live_bytes;
        uint32_t segment = __atomic_load_n(&s->flags, __ATOMIC_RELAXED) & STACK_CACHE_ANY;
        if (segment) {
            for (int k = 0; k < CACHE_KINDS; k++)
                if (segment & STACK_CACHE_SEGMENT(KIND_TORCH_TENSOR + k)) {
                    c->reserved[k] += s->live_bytes;
                    break;
                }
            if (segment & known)
                continue;
        }
        if (live)
            keep_best(c->top, top_bytes, &c->top_count, LIVE_TOP, id, (double)live);
        if (growth_suspect(g, live, &c->growth))
            keep_best(c->growing, c->rates, &c->growing_count, LIVE_GROWING, id,
                      growth_rate(g, &c->growth));
    }
    for (uint32_t i = 0; i < c->top_count; i++)
        remember(c, c->top[i]);
    for (uint32_t i = 0; i < c->growing_count; i++)
        remember(c, c->growing[i]);
    tracker_unlock();
}

static void write_pair(struct out *out, const struct counters *counters)
{
    out_printf(out, "[%llu,%llu]", (unsigned long long)counters->bytes_current,
               (unsigned long long)counters->bytes_peak);
}

static void write_devices(struct live_copy *c)
{
    struct out *out = &c->out;
    out_str(out, ",\"devices\":[");
    for (int slot = 0, first = 1; slot <= MAX_DEVICES; slot++) {
        if (!c->counters.device_seen[slot])
            continue;
        if (slot == COUNTER_NO_DEVICE)
            out_str(out, first ? "{\"device\":null" : ",{\"device\":null");
        else
            out_printf(out, "%s{\"device\":%d", first ? "" : ",", slot);
        first = 0;
        out_str(out, ",\"kinds\":{");
        for (int kind = 0, any = 0; kind < KIND_COUNT; kind++) {
            const struct counters *k = &c->counters.sets[slot][kind];
            if (!k->blocks_allocated)
                continue;
            out_printf(out, "%s\"%s\":", any++ ? "," : "", kind_name(kind));
            write_pair(out, k);
        }
        out_str(out, "},\"all\":");
        write_pair(out, &c->counters.sets[slot][COUNTER_DEVICE_MEMORY]);
        out_str(out, "}");
    }
    out_str(out, "]");
}

static void write_frame(struct out *out, uintptr_t address)
{
    if (!is_python_frame(address)) {
        out_printf(out, "\"0x%lx\"", (unsigned long)address);
        return;
    }
    const struct python_location *l = python_location(address);
    out_str(out, "{\"function\":");
    out_json_string(out, l ? l->function : NULL);
    out_str(out, ",\"file\":");
    out_json_string(out, l ? l->file : NULL);
    out_printf(out, ",\"line\":%d}", l ? l->line : 0);
}

static void write_stacks(struct live_copy *c)
{
    struct out *out = &c->out;
    out_str(out, ",\"stacks\":[");
    for (uint32_t i = 0; i < c->count; i++) {
        const struct stack *s = &c->stacks[i];
        int kind, api, growing = 0;
        double rate = 0;
        for (uint32_t g = 0; g < c->growing_count; g++)
            if (c->growing[g] == c->ids[i]) {
                growing = 1;
                rate = c->rates[g];
            }
        out_printf(out,
                   "%s{\"id\":%u,\"live_bytes\":%llu,\"live_blocks\":%llu,"
                   "\"peak_live_bytes\":%llu,\"allocations\":%llu,",
                   i ? "," : "", c->ids[i], (unsigned long long)s->stats.live_bytes,
                   (unsigned long long)s->stats.live_blocks,
                   (unsigned long long)s->stats.peak_live_bytes,
                   (unsigned long long)s->stats.allocations);
        if (stack_first_use(s, &kind, &api)) {
            out_printf(out, "\"kind\":\"%s\",\"api\":", kind_name(kind));
            out_json_string(out, api < host.api_count ? host.api_names[api] : NULL);
        } else {
            out_str(out, "\"kind\":null,\"api\":null");
        }
        if (c->ended)
            out_printf(out, ",\"end_bytes\":%llu,\"end_blocks\":%llu",
                       (unsigned long long)c->end_bytes[i], (unsigned long long)c->end_blocks[i]);
        else
            out_str(out, ",\"end_bytes\":null,\"end_blocks\":null");
        out_printf(out,
                   ",\"growing\":%s,\"rate\":%.0f,\"calls\":%llu,\"rate_per_call\":%.0f,"
                   "\"frames\":[",
                   growing ? "true" : "false", rate,
                   (unsigned long long)(growing ? s->growth.calls : 0),
                   growing ? growth_call_rate(&s->growth) : 0.0);
        for (uint32_t f = 0; f < s->depth; f++) {
            if (f)
                out_str(out, ",");
            write_frame(out, c->frames[i][f]);
        }
        out_str(out, "]}");
    }
    out_str(out, "]");
}

/* Each framework's cache that showed up: whether its blocks are recorded
 * (then its segments are left out of the stacks), else why not; and what
 * its segments hold. */
static void write_caches(struct live_copy *c)
{
    static const char *const views[] =
        {[CACHE_UNSEEN] = "unseen", [CACHE_BLOCKS] = "blocks", [CACHE_SEGMENTS] = "segments"};
    struct out *out = &c->out;
    out_str(out, ",\"caches\":[");
    for (int k = 0, first = 1; k < CACHE_KINDS; k++) {
        const struct cache_state *state = &c->caches[k];
        if (state->view == CACHE_UNSEEN && !c->reserved[k])
            continue;
        out_printf(out, "%s{\"kind\":\"%s\",\"view\":\"%s\",\"why\":", first ? "" : ",",
                   kind_name(KIND_TORCH_TENSOR + k), views[state->view]);
        out_json_string(out, state->why);
        out_printf(out, ",\"reserved_bytes\":%llu}", (unsigned long long)c->reserved[k]);
        first = 0;
    }
    out_str(out, "]");
}

static void write_ids(struct out *out, const char *name, const uint32_t *ids, uint32_t count)
{
    out_printf(out, ",\"%s\":[", name);
    for (uint32_t i = 0; i < count; i++)
        out_printf(out, "%s%u", i ? "," : "", ids[i]);
    out_str(out, "]");
}

/* The recorded block at `address` (a framework's, else the driver's):
 * its stack and kind into the line's slots; 0 and -1 if none is. */
static void holder_block(struct live_copy *c, uint32_t line, uint64_t address)
{
    static const int spaces[] = {SPACE_FRAMEWORK, SPACE_MEMORY};
    c->holder_stacks[line] = 0;
    c->holder_kinds[line] = -1;
    for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]) && address; i++) {
        uint64_t key = block_key(address, spaces[i]);
        registry_lock(key);
        const struct block *b = registry_find(key);
        if (b) {
            c->holder_stacks[line] = b->stack_id;
            c->holder_kinds[line] = block_kind(b);
        }
        registry_unlock(key);
        if (b)
            return;
    }
}

/* Who holds the arrays (holders_live.h): whether it can be asked, the
 * requests' numbers, and the latest answer's top paths with the stack of
 * each one's largest block. */
static void write_holders(struct live_copy *c)
{
    struct out *out = &c->out;
    const struct holders_live *h = &c->holders;
    out_printf(out, ",\"holders\":{\"setting\":%s,\"python\":\"%s\",\"mine\":",
               config.holders ? "true" : "false",
               c->python > 0    ? "running"
               : c->python == 0 ? "ended"
                                : "none");
    if (c->mine)
        out_printf(out, "%llu", (unsigned long long)c->mine);
    else
        out_str(out, "null");
    out_printf(out, ",\"asked\":%llu,\"answered\":%llu,\"walks\":%llu,\"why\":",
               (unsigned long long)h->asked, (unsigned long long)h->answered,
               (unsigned long long)h->walks);
    out_json_string(out, h->answered ? h->why : NULL);
    out_printf(out, ",\"objects\":%llu,\"ms\":%u,\"cut_short\":", (unsigned long long)h->objects,
               h->ms);
    out_json_string(out, h->cut[0] ? h->cut : NULL);
    out_printf(out, ",\"path_count\":%llu,\"paths\":[", (unsigned long long)h->paths);
    for (uint32_t i = 0; i < h->count && i < HOLDERS_LIVE_LINES; i++) {
        const struct holders_live_line *l = &h->lines[i];
        out_str(out, i ? ",{\"path\":" : "{\"path\":");
        out_json_string(out, l->path);
        out_str(out, ",\"container\":");
        out_json_string(out, l->container);
        out_printf(out, ",\"bytes\":%llu,\"storages\":%llu,\"tensors\":%llu,\"kind\":",
                   (unsigned long long)l->bytes, (unsigned long long)l->storages,
                   (unsigned long long)l->tensors);
        out_json_string(out, c->holder_kinds[i] >= 0 ? kind_name(c->holder_kinds[i]) : NULL);
        if (c->holder_stacks[i])
            out_printf(out, ",\"stack\":%u}", c->holder_stacks[i]);
        else
            out_str(out, ",\"stack\":null}");
    }
    out_str(out, "]}");
}

/* Milliseconds since `start` (CLOCK_MONOTONIC). */
static long since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* What the peer asks, read until it shuts its side (the command does at
 * once) or LIVE_REQUEST_MS have passed (a peer that says nothing gets the
 * view), LIVE_REQUEST_BYTES at most: whatever it sends, this thread is
 * held that long at most. 1 when it is LIVE_ASK_HOLDERS, else 0. */
static int asks_holders(int client)
{
    char text[LIVE_REQUEST_BYTES];
    size_t used = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        long left = LIVE_REQUEST_MS - since(&start);
        struct pollfd wait = {client, POLLIN, 0};
        if (left <= 0 || used == sizeof(text))
            break;
        int ready = poll(&wait, 1, (int)left);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        ssize_t n = recv(client, text + used, sizeof(text) - used, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    size_t length = strlen(LIVE_ASK_HOLDERS);
    return used == length && memcmp(text, LIVE_ASK_HOLDERS, length) == 0;
}

/* One answer, to a peer of this user. Its own memory, released after.
 * `mine`: the holders request it made, 0 if none. */
static void answer(int client, uint64_t mine)
{
    struct live_copy *c = pages_alloc(sizeof(*c));
    if (!c)
        return;
    copy(c);
    c->mine = mine;
    c->python = torch_stats_python();
    holders_live_copy(&c->holders);
    for (uint32_t i = 0; i < c->holders.count && i < HOLDERS_LIVE_LINES; i++)
        holder_block(c, i, c->holders.lines[i].largest);
    struct out *out = &c->out;
    out_fd(out, client);
    out->socket = 1;
    out_printf(out,
               "{\"format\":\"cumemtrace-live\",\"version\":%d,\"pid\":%d,\"time_ms\":%u,"
               "\"growth\":{\"mode\":\"%s\",\"samples\":%u}",
               LIVE_FORMAT_VERSION, (int)getpid(), c->now_ms,
               c->growth.mode == GROWTH_MARKS ? "marks" : "work", c->growth.samples);
    out_str(out, ",\"cwd\":");
    out_json_string(out, python_start_dir());
    if (c->ended)
        out_printf(out, ",\"program_end\":{\"time_ms\":%u}", c->end_ms);
    else
        out_str(out, ",\"program_end\":null");
    write_devices(c);
    write_caches(c);
    write_stacks(c);
    write_ids(out, "top", c->top, c->top_count);
    write_ids(out, "growing", c->growing, c->growing_count);
    write_holders(c);
    out_str(out, "}\n");
    out_flush(out);
    pages_free(c, sizeof(*c));
}

static int same_user(int client)
{
    struct ucred peer;
    socklen_t length = sizeof(peer);
    return getsockopt(client, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 &&
           length == sizeof(peer) && peer.uid == geteuid();
}

static void *serve(void *argument)
{
    int fd = (int)(intptr_t)argument;
    struct pollfd wait = {fd, POLLIN, 0};
    for (;;) {
        /* Asleep in poll, not in accept: a thread blocked in accept holds
         * the lowest free descriptor number, which the program's next open
         * would have had. The listener does not block: accept only takes. */
        if (poll(&wait, 1, -1) < 0 || (wait.revents & POLLNVAL)) {
            if (errno == EINTR && !(wait.revents & POLLNVAL))
                continue;
            return NULL; /* closed under us (fork) */
        }
        int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK)
                return NULL; /* closed under us (fork) */
            if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                poll(NULL, 0, 100); /* out of descriptors, memory: try again later */
            continue;
        }
        /* A client that stops reading holds us for two seconds at most. */
        struct timeval timeout = {2, 0};
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
        int ours = same_user(client);
        uint64_t mine = 0;
        /* Asked before entering, as a snapshot's reading: the request
         * starts the bridge's reader the first time (torch_stats_request),
         * which is Python's business, not ours. */
        if (ours && asks_holders(client) && config.holders) {
            mine = holders_live_ask();
            torch_stats_request(); /* the reader woken for it (started the first time) */
        }
        int entered = tracker_enter();
        if (ours)
            answer(client, mine);
        if (entered)
            tracker_leave();
        close(client);
    }
}

/* The listening socket, at a descriptor above the program's (log.h); -1
 * with errno. */
static int open_listener(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    fd = log_move_high(fd);
    struct sockaddr_un address;
    socklen_t size = live_socket_address((int)getpid(), &address);
    if (bind(fd, (struct sockaddr *)&address, size) < 0 || listen(fd, 4) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

void live_start(void)
{
    if (!config.live || log_descriptors_short())
        return;
    listener = open_listener();
    if (listener < 0 && errno == EADDRINUSE) {
        /* Taken first by another process, maybe another user's: said, since
         * `cumemtrace live` will refuse whoever answers at that name. */
        log_line("no live view: another process holds its name cumemtrace-live-%d", (int)getpid());
        return;
    }
    if (listener < 0) {
        log_debug("no live view: cannot listen as cumemtrace-live-%d", (int)getpid());
        return;
    }
    if (thread_start(serve, (void *)(intptr_t)listener, "cumemtrace-live") != 0) {
        close(listener);
        listener = -1;
        log_debug("no live view: cannot start its thread");
    }
}

int live_start_pending;

void live_after_fork(void)
{
    if (listener < 0)
        return;
    close(listener); /* the parent's name: its to answer */
    listener = -1;
    __atomic_store_n(&live_start_pending, 1, __ATOMIC_RELEASE);
}

void live_start_now(void)
{
    if (__atomic_exchange_n(&live_start_pending, 0, __ATOMIC_ACQ_REL))
        live_start();
}
