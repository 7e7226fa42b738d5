/* frameworks.c - the blocks PyTorch carves out of its cache segments.
 *
 * In PyTorch's default mode a cudaMalloc is a whole cache segment: tensors
 * are carved out of it and go back to the cache, never to the driver. So the
 * driver view charges each segment to whichever line first needed one. PyTorch's
 * caching allocator tells its registered trace trackers about every block it
 * hands out and takes back; libcumemtrace_torch.so (torch_tracker.cpp)
 * registers one, and this file turns its events into records: a
 * KIND_TORCH_TENSOR block with its own stack for each tensor, and the mark
 * STACK_CACHE_SEGMENT on the stacks of the segments.
 *
 * When: the tracker can only be registered once the allocator is initialized
 * (before that PyTorch drops it), and that is certain once it allocates. So
 * every allocating wrapper asks frameworks_probe() about its caller until the
 * question is settled: the first caller inside libc10_cuda.so loads the
 * tracker library and attaches it, before the real call, so that even that
 * first segment and its first tensor are seen. Callers in other libraries are
 * remembered by address range, so a program without PyTorch pays a few
 * compares per allocation.
 *
 * The tracker library must be built for this very PyTorch: it is found in
 * the per-user cache python/cumemtrace/torch_tracker.py builds into (by the
 * same key), unless CUMEMTRACE_TORCH_TRACKER names one, or beside us.
 * Anything that stops it (no tracker library, one built for another PyTorch,
 * a cache another user can write, an allocator that refuses trackers,
 * CUMEMTRACE_FRAMEWORKS=0) costs one line and leaves the driver view, which
 * the report then says it shows. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_blocks.h"
#include "cache_segments.h"
#include "config.h"
#include "hot_path.h"
#include "log.h"
#include "modules.h"
#include "output.h"
#include "preload.h"
#include "run_events.h"
#include "threads.h"
#include "torch_stats.h"
#include "torch_tracker.h"
#include "triggers.h"

int frameworks_settled;

#define CHECKED_MODULES 16
static struct {
    uintptr_t low, high;
} checked[CHECKED_MODULES];
static int checked_count;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the tracker's events ------------------------------------------------- */

static uint64_t (*torch_operation)(void); /* torch_tracker_operation, once attached */

/* The operation this thread runs, as torch_operation says, or 0. A tensor's
 * event passes this function, whose address is a constant, not the
 * variable: the variable's line is read only where the tracker asks for
 * the operation (a thread running no Python), not at every tensor. */
HOT_PATH static uint64_t running_operation(void)
{
    return torch_operation ? torch_operation() : 0;
}

/* PyTorch's allocator gave up (its OOM event, its lock held): the report
 * waits for its out-of-memory observer, which follows on this thread with
 * the lock let go, so that PyTorch's own figures and what its tensors are
 * can be read with the GIL at that very moment (torch_stats_at_oom). */
static __thread struct {
    int waiting;
    int device;
    uint64_t size, driver_free;
} given_up;

static __attribute__((noinline)) void torch_oom_observed(int device)
{
    if (!given_up.waiting || given_up.device != device)
        return;
    given_up.waiting = 0;
    torch_stats_at_oom();
    trigger_cache_oom(KIND_TORCH_TENSOR, device, given_up.size, given_up.driver_free);
}

/* A tensor's allocation or free, nearly every event, handed on to the
 * tracker: 1; 0 for any other event. */
static inline __attribute__((always_inline)) int torch_tensor(const struct torch_tracker_event *e)
{
    if (e->action == TORCH_ALLOC) {
        cache_blocks_defer_alloc(KIND_TORCH_TENSOR, e->device, e->address, e->size, e->stream,
                                 running_operation);
        return 1;
    }
    if (e->action == TORCH_FREE_COMPLETED) { /* as memory_stats()'s requested_bytes */
        cache_blocks_defer_free(e->address);
        return 1;
    }
    return 0;
}

/* What event `e` changes: the recording ones are handed on by a jump, so
 * a tensor's event keeps no frame of ours on the way to the tracker. */
static void torch_record(const struct torch_tracker_event *e)
{
    if (torch_tensor(e))
        return;
    switch (e->action) {
    case TORCH_SEGMENT_ALLOC:
    case TORCH_SEGMENT_MAP: segments_taken(KIND_TORCH_TENSOR, e->address, e->size); return;
    case TORCH_OOM:
        given_up.waiting = 1;
        given_up.device = e->device;
        given_up.size = e->size;
        given_up.driver_free = e->address;
        return;
    default: return;
    }
}

/* torch_record within CUMEMTRACE_SELF_TIME's clock reads. */
static __attribute__((noinline)) void torch_record_timed(const struct torch_tracker_event *e)
{
    self_time_start();
    torch_record(e);
    self_time_stop();
}

/* torch_event's events other than a tensor's allocation or free, and
 * every event under CUMEMTRACE_SELF_TIME. */
static __attribute__((noinline)) void torch_other_event(const struct torch_tracker_event *e)
{
    if (e->action == TORCH_OOM_OBSERVED)
        torch_oom_observed(e->device);
    else if (config.self_time)
        torch_record_timed(e);
    else
        torch_record(e);
}

/* The tracker's sink. A tensor's allocation or free, nearly every event,
 * is handed on by a jump from here, a line of code or two: between two
 * tensors PyTorch and the interpreter evict the callback from the
 * first-level instruction cache, and each line an event runs through is
 * fetched again (torch_record's switch took three more). The rest is out
 * of line. */
HOT_PATH static void torch_event(const struct torch_tracker_event *e)
{
    if (__builtin_expect(!config.self_time, 1) && torch_tensor(e))
        return;
    torch_other_event(e);
}

/* The tracer's own thread, which enters the tensors' events in the registry
 * (tracker_apply, pending.h says why): PyTorch's threads only take stacks.
 * It is never woken by them, so an event costs its thread no system call.
 * It looks every 8 ms, and more often only while more than 1,024 events
 * wait at a look, halving its pause each time down to 1 ms. A
 * transformer's step makes some seventy events a millisecond: batches of
 * some 600 events, entered together (a tensor that ends within its batch
 * never enters the registry, tracker.c), two wake-ups a step where looking
 * every millisecond made sixteen; an idle process wakes as seldom. A
 * queued block's time is when its batch is entered: up to 8 ms late. A
 * thread that finds more than 2,048 queued enters them itself. */
#define APPLY_PAUSE_MS 8
#define APPLY_MANY 1024

static void *apply_events(void *unused)
{
    (void)unused;
    long ms = 1;
    for (;;) {
        uint64_t queued = tracker_queued();
        tracker_apply();
        if (queued > APPLY_MANY)
            ms = ms > 1 ? ms / 2 : 1;
        else
            ms = ms < APPLY_PAUSE_MS ? 2 * ms : APPLY_PAUSE_MS;
        struct timespec pause = {0, ms * 1000000L};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* ---- attaching ------------------------------------------------------------ */

/* torch.__version__ and torch.version.git_version ("unknown" if absent) of
 * the PyTorch whose libc10_cuda.so is at `c10`: its torch/version.py, one
 * directory up from torch/lib. Read only if it is a regular file and not a
 * link (a FIFO or a device there is never waited on or read), and only its
 * first 4 KiB. */
static int loaded_torch_version(const char *c10, char *version, size_t size, char *git,
                                size_t git_size)
{
    char path[4096];
    const char *slash = strrchr(c10, '/');
    if (!slash || snprintf(path, sizeof(path), "%.*s/../version.py", (int)(slash - c10), c10) >=
                      (int)sizeof(path))
        return -1;
    int fd = output_open_regular(path, O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char text[4096];
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    struct {
        const char *name;
        char *value;
        size_t size;
    } wanted[] = {{"__version__ = '", version, size}, {"git_version = '", git, git_size}};
    snprintf(git, git_size, "unknown");
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(text, wanted[i].name);
        if (!at && i == 0)
            return -1;
        if (!at)
            continue;
        at += strlen(wanted[i].name);
        size_t length = strcspn(at, "'\n");
        if (at[length] != '\'' || length >= wanted[i].size)
            return -1;
        memcpy(wanted[i].value, at, length);
        wanted[i].value[length] = '\0';
    }
    return 0;
}

/* The file or directory open at `fd` (`path` in messages) is this user's
 * alone: owned by us, writable by no one else (the tracer loads code from
 * it). 0, or -1 with why. Asked of the descriptor the code is then loaded
 * through, so that nothing can be swapped in between. */
static int private_to_us(int fd, const char *path, int directory, char *why, size_t size)
{
    struct stat info;
    if (fstat(fd, &info) != 0) {
        snprintf(why, size, "%.200s cannot be read", path);
        return -1;
    }
    if (directory ? !S_ISDIR(info.st_mode) : !S_ISREG(info.st_mode))
        snprintf(why, size, "%.200s is not a %s", path, directory ? "directory" : "file");
    else if (info.st_uid != geteuid())
        snprintf(why, size, "%.200s is owned by uid %u, not this user; refused", path,
                 (unsigned)info.st_uid);
    else if (info.st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, size, "%.200s is writable by other users; refused", path);
    else
        return 0;
    return -1;
}

/* The cache key, as torch_tracker.py's key() makes it:
 * torch-VERSION-GIT-pyPYTHON-SOURCES, with VERSION cut to its first 100
 * bytes and GIT to 12, and every byte but A-Z a-z 0-9 . + _ - made '_' (a
 * character beyond ASCII: one '_' for each byte of its UTF-8). */
static void cache_key(const char *version, const char *git, const char *python, char *key,
                      size_t size)
{
    snprintf(key, size, "torch-%.100s-%.12s-py%s-%s", version, git, python,
             CUMEMTRACE_TRACKER_SOURCES);
    for (char *c = key; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr(".+_-", *c)))
            *c = '_';
}

/* The tracker for this PyTorch in the per-user cache that
 * python/cumemtrace/torch_tracker.py builds: $XDG_CACHE_HOME/cumemtrace,
 * else ~/.cache/cumemtrace, named by the same key it makes (the PyTorch's
 * version and commit, the Python's version, the tracker's sources). 0 with
 * `path` and `*fd` open on it when it is there and private to us (opened
 * within the cache directory opened first, neither through a link, each
 * checked on its descriptor); 1 with `path` when it is not there; -1 with
 * `why` when the cache is not ours alone. */
static int cached_tracker(const char *version, const char *git, char *path, size_t size, int *fd,
                          char *why, size_t why_size)
{
    const char *base = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char folder[3072];
    if (base && base[0] == '/')
        snprintf(folder, sizeof(folder), "%.3000s/cumemtrace", base);
    else if (home && home[0] == '/')
        snprintf(folder, sizeof(folder), "%.3000s/.cache/cumemtrace", home);
    else
        return 1;
    const char *(*python_version)(void) = real_dlsym(RTLD_DEFAULT, "Py_GetVersion");
    int major = 0, minor = 0;
    char python[16] = "none";
    if (python_version && sscanf(python_version(), "%d.%d", &major, &minor) == 2)
        snprintf(python, sizeof(python), "%d.%d", major, minor);
    char key[256], name[300];
    cache_key(version, git, python, key, sizeof(key));
    snprintf(name, sizeof(name), "libcumemtrace_torch-%s.so", key);
    snprintf(path, size, "%s/%s", folder, name);
    int directory = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (directory < 0 && errno == ENOENT)
        return 1;
    if (directory < 0) {
        snprintf(why, why_size, "%.200s is not a directory we can open; refused", folder);
        return -1;
    }
    *fd = -1;
    int refused = private_to_us(directory, folder, 1, why, why_size);
    if (!refused) {
        *fd = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (*fd >= 0)
            refused = private_to_us(*fd, path, 0, why, why_size);
        else if (errno != ENOENT) {
            snprintf(why, why_size, "%.200s is not a file we can open; refused", path);
            refused = -1;
        }
    }
    close(directory);
    if (refused && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    return refused ? -1 : *fd < 0 ? 1 : 0;
}

/* The tracker library beside us (a build tree's, or an installation's). */
static int beside_us(char *path, size_t size)
{
    Dl_info self;
    if (!dladdr((void *)&frameworks_probe, &self) || !self.dli_fname)
        return -1;
    const char *slash = strrchr(self.dli_fname, '/');
    int dir = slash ? (int)(slash - self.dli_fname) : 1;
    return snprintf(path, size, "%.*s/libcumemtrace_torch.so", dir, slash ? self.dli_fname : ".") <
                   (int)size
               ? 0
               : -1;
}

static void segments_only(const char *why)
{
    run_cache_view(KIND_TORCH_TENSOR, CACHE_SEGMENTS, why);
    log_line("PyTorch's tensors are not traced one by one: %s; reports show its cache "
             "segments",
             why);
}

struct tracker_library {
    const char *(*version)(void);
    int (*attach)(torch_tracker_sink);
    uint64_t (*operation)(void);
};

/* Load the tracker at `path` and check that it was built for PyTorch
 * `loaded`: 0, or -1 with why. */
/* The tracker at `path`, or through the descriptor `fd` on it when it is
 * not -1 and /proc is there (the file checked is the file loaded). */
static int load_tracker(const char *path, int fd, const char *loaded, struct tracker_library *t,
                        char *why, size_t size)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    void *library = dlopen(fd >= 0 && access(proc, R_OK) == 0 ? proc : path, RTLD_NOW | RTLD_LOCAL);
    t->version = library ? real_dlsym(library, "torch_tracker_version") : NULL;
    *(void **)&t->attach = library ? real_dlsym(library, "torch_tracker_attach") : NULL;
    *(void **)&t->operation = library ? real_dlsym(library, "torch_tracker_operation") : NULL;
    if (!t->version || !t->attach || !t->operation) {
        const char *error = library ? "not a tracker library" : dlerror();
        snprintf(why, size, "%.200s cannot be loaded (%.200s)", path, error ? error : "?");
        return -1;
    }
    if (strcmp(loaded, t->version()) != 0) {
        snprintf(why, size, "%.200s was built for PyTorch %.60s, this is %.60s", path, t->version(),
                 loaded);
        return -1;
    }
    return 0;
}

/* Once, with probe_lock held, from inside PyTorch's allocator. The tracker
 * is CUMEMTRACE_TORCH_TRACKER, else the one cached for this PyTorch, else
 * the one beside us; none of them: one line with the command that builds
 * it (outside this process: it takes a compiler and seconds). */
static void attach_torch(const char *c10)
{
    char why[1024], path[4096], loaded[256], git[64];
    if (!config.frameworks) {
        run_cache_view(KIND_TORCH_TENSOR, CACHE_SEGMENTS, "CUMEMTRACE_FRAMEWORKS=0");
        return;
    }
    if (loaded_torch_version(c10, loaded, sizeof(loaded), git, sizeof(git)) < 0) {
        segments_only("this is a PyTorch whose version.py cannot be read: no tracker can be "
                      "matched to it");
        return;
    }
    struct tracker_library t;
    if (config.torch_tracker[0]) {
        if (access(config.torch_tracker, R_OK) != 0) {
            snprintf(why, sizeof(why), "%.200s (CUMEMTRACE_TORCH_TRACKER) was not built",
                     config.torch_tracker);
            segments_only(why);
            return;
        }
        if (load_tracker(config.torch_tracker, -1, loaded, &t, why, sizeof(why)) < 0) {
            segments_only(why);
            return;
        }
    } else {
        int fd = -1;
        int cached = cached_tracker(loaded, git, path, sizeof(path), &fd, why, sizeof(why));
        if (cached < 0) {
            segments_only(why);
            return;
        }
        char beside[4096], beside_why[1024] = "";
        if (cached == 1 && beside_us(beside, sizeof(beside)) == 0 && access(beside, R_OK) == 0 &&
            load_tracker(beside, -1, loaded, &t, beside_why, sizeof(beside_why)) == 0) {
            cached = 2; /* the one beside us fits */
        } else if (cached == 1) {
            char exe[4096] = "", command[4200] = "cumemtrace doctor";
            ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
            const char *base = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
            if (base && strncmp(base + 1, "python", 6) == 0)
                snprintf(command, sizeof(command), "cumemtrace doctor --python %s", exe);
            snprintf(why, sizeof(why),
                     "no tracker for PyTorch %.60s in %.300s%s%.200s "
                     "(`%.200s` builds it, as `cumemtrace run` does)",
                     loaded, path, beside_why[0] ? "; " : "", beside_why, command);
            segments_only(why);
            return;
        }
        int failed = cached == 0 && load_tracker(path, fd, loaded, &t, why, sizeof(why)) < 0;
        if (fd >= 0)
            close(fd); /* loaded or not: the loader holds its own mapping */
        if (failed) {
            segments_only(why);
            return;
        }
    }
    torch_operation = t.operation;
    int status = t.attach(torch_event);
    if (status == TORCH_TRACKER_ATTACHED) {
        run_cache_view(KIND_TORCH_TENSOR, CACHE_BLOCKS, "");
        if (thread_start(apply_events, NULL, "cumemtrace-rec") != 0)
            log_debug("no thread to enter tensors: the allocating threads enter them");
        log_debug("tracing PyTorch %s's tensors through its trace tracker", loaded);
    } else {
        segments_only(status == TORCH_TRACKER_REFUSED
                          ? "its allocator takes no trace trackers (the cudaMallocAsync backend, "
                            "or a pluggable allocator)"
                          : "its allocator was not initialized");
    }
}

static int module_name_is(const char *path, const char *name)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, name, strlen(name)) == 0;
}

static int known(uintptr_t at)
{
    int count = __atomic_load_n(&checked_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < count; i++)
        if (at >= checked[i].low && at < checked[i].high)
            return 1;
    return 0;
}

void frameworks_probe(const void *caller)
{
    uintptr_t at = (uintptr_t)caller;
    if (known(at))
        return;
    pthread_mutex_lock(&probe_lock);
    Dl_info info;
    uintptr_t low, high;
    if (!frameworks_settled && !known(at) && dladdr(caller, &info) && info.dli_fname &&
        module_range(caller, &low, &high) == 0) {
        if (module_name_is(info.dli_fname, "libc10_cuda.so")) {
            attach_torch(info.dli_fname);
            __atomic_store_n(&frameworks_settled, 1, __ATOMIC_RELEASE);
        } else if (checked_count < CHECKED_MODULES) {
            checked[checked_count].low = low;
            checked[checked_count].high = high;
            __atomic_store_n(&checked_count, checked_count + 1, __ATOMIC_RELEASE);
        } else {
            /* A program allocating from that many libraries, none PyTorch's:
             * stop asking. */
            __atomic_store_n(&frameworks_settled, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&probe_lock);
}

void frameworks_fork_prepare(void)
{
    pthread_mutex_lock(&probe_lock);
}

void frameworks_fork_parent(void)
{
    pthread_mutex_unlock(&probe_lock);
}

void frameworks_fork_child(void)
{
    pthread_mutex_init(&probe_lock, NULL);
}
