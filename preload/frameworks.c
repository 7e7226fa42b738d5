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
 * Anything that stops it (no tracker library, one built for another PyTorch,
 * an allocator that refuses trackers, CUMEMTRACE_FRAMEWORKS=0) costs one line
 * and leaves the driver view, which the report then says it shows. */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "modules.h"
#include "output.h"
#include "preload.h"
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

static uint64_t (*torch_operation)(void);  /* torch_tracker_operation, once attached */

/* PyTorch's allocator gave up (its OOM event, its lock held): the report
 * waits for its out-of-memory observer, which follows on this thread with
 * the lock let go, so that PyTorch's own figures and what its tensors are
 * can be read with the GIL at that very moment (torch_stats_at_oom). */
static __thread struct {
    int waiting;
    int device;
    uint64_t size, driver_free;
} given_up;

static void torch_oom_observed(int device)
{
    if (!given_up.waiting || given_up.device != device)
        return;
    given_up.waiting = 0;
    torch_stats_at_oom();
    trigger_cache_oom(KIND_TORCH_TENSOR, device, given_up.size, given_up.driver_free);
}

static void torch_event(const struct torch_tracker_event *e)
{
    if (e->action == TORCH_OOM_OBSERVED) {
        torch_oom_observed(e->device);
        return;
    }
    /* A tensor's block is recorded until its free completes; the request
     * before it, and snapshots, change nothing here (a third of the events). */
    if (e->action == TORCH_FREE_REQUESTED || e->action == TORCH_SNAPSHOT)
        return;
    if (config.self_time)
        self_time_start();
    switch (e->action) {
    case TORCH_ALLOC:
        tracker_defer_cache_block(KIND_TORCH_TENSOR, e->device, e->address, e->size,
                                  e->stream, torch_operation);
        break;
    case TORCH_FREE_COMPLETED:   /* as torch.cuda.memory_stats()'s requested_bytes */
        tracker_defer_cache_free(e->address);
        break;
    case TORCH_SEGMENT_ALLOC:
    case TORCH_SEGMENT_MAP:
        tracker_cache_segment(KIND_TORCH_TENSOR, e->address, e->size);
        break;
    case TORCH_OOM:
        given_up.waiting = 1;
        given_up.device = e->device;
        given_up.size = e->size;
        given_up.driver_free = e->address;
        break;
    default:
        break;
    }
    if (config.self_time)
        self_time_stop();
}

/* The tracer's own thread, which enters the tensors' events in the registry
 * (tracker_apply, pending.h says why): PyTorch's threads only take stacks.
 * It is never woken by them, so an event costs its thread no system call:
 * it looks every millisecond while events come (some seventy a millisecond
 * on a transformer's step), and less often while none do, up to every
 * 8 ms (woken every millisecond, an idle process spent 2.5% of a core on
 * it). A thread that finds the queue longer than a batch enters it itself
 * (tracker.c): 8 ms of events at one every 4 us. */
static void *apply_events(void *unused)
{
    (void)unused;
    long ms = 1;
    for (;;) {
        ms = tracker_apply() ? 1 : (ms < 8 ? 2 * ms : 8);
        struct timespec pause = {0, ms * 1000000L};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* ---- attaching ------------------------------------------------------------ */

/* torch.__version__ of the PyTorch whose libc10_cuda.so is at `c10`: its
 * torch/version.py, one directory up from torch/lib. Read only if it is a
 * regular file and not a link (a FIFO or a device there is never waited on
 * or read), and only its first 4 KiB. */
static int loaded_torch_version(const char *c10, char *version, size_t size)
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
    const char *at = strstr(text, "__version__ = '");
    if (!at)
        return -1;
    at += strlen("__version__ = '");
    size_t length = strcspn(at, "'\n");
    if (at[length] != '\'' || length >= size)
        return -1;
    memcpy(version, at, length);
    version[length] = '\0';
    return 0;
}

/* The tracker library: CUMEMTRACE_TORCH_TRACKER, else the one beside us. */
static int tracker_path(char *path, size_t size)
{
    if (config.torch_tracker[0])
        return snprintf(path, size, "%s", config.torch_tracker) < (int)size ? 0 : -1;
    Dl_info self;
    if (!dladdr((void *)&frameworks_probe, &self) || !self.dli_fname)
        return -1;
    const char *slash = strrchr(self.dli_fname, '/');
    int dir = slash ? (int)(slash - self.dli_fname) : 1;
    return snprintf(path, size, "%.*s/libcumemtrace_torch.so", dir,
                    slash ? self.dli_fname : ".") < (int)size ? 0 : -1;
}

static void segments_only(const char *why)
{
    tracker_cache_view(KIND_TORCH_TENSOR, CACHE_SEGMENTS, why);
    log_line("PyTorch's tensors are not traced one by one: %s; reports show its cache "
             "segments", why);
}

/* Once, with probe_lock held, from inside PyTorch's allocator. */
static void attach_torch(const char *c10)
{
    char why[160], path[4096], loaded[64];
    if (!config.frameworks) {
        tracker_cache_view(KIND_TORCH_TENSOR, CACHE_SEGMENTS, "CUMEMTRACE_FRAMEWORKS=0");
        return;
    }
    if (tracker_path(path, sizeof(path)) < 0 || access(path, R_OK) != 0) {
        segments_only("libcumemtrace_torch.so was not built for this PyTorch "
                      "(scripts/build-torch-tracker.sh builds it)");
        return;
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const char *(*version)(void) = library ? real_dlsym(library, "torch_tracker_version") : NULL;
    int (*attach)(torch_tracker_sink) =
        library ? real_dlsym(library, "torch_tracker_attach") : NULL;
    uint64_t (*operation)(void) = library ? real_dlsym(library, "torch_tracker_operation") : NULL;
    if (!version || !attach || !operation) {
        const char *error = library ? "not a tracker library" : dlerror();
        snprintf(why, sizeof(why), "%.50s cannot be loaded (%.80s)", path, error ? error : "?");
        segments_only(why);
        return;
    }
    if (loaded_torch_version(c10, loaded, sizeof(loaded)) < 0 ||
        strcmp(loaded, version()) != 0) {
        snprintf(why, sizeof(why), "libcumemtrace_torch.so was built for PyTorch %s, this is %s",
                 version(), loaded_torch_version(c10, loaded, sizeof(loaded)) < 0
                                ? "a PyTorch whose version.py cannot be read" : loaded);
        segments_only(why);
        return;
    }
    torch_operation = operation;
    int status = attach(torch_event);
    if (status == TORCH_TRACKER_ATTACHED) {
        tracker_cache_view(KIND_TORCH_TENSOR, CACHE_BLOCKS, "");
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
