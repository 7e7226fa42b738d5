/* init.c - start-up of the preloaded library.
 *
 * Everything is lazy: nothing happens until the first CUDA memory event, so a
 * process that never uses CUDA (a shell, a compiler started by the traced
 * program) is not touched at all: no settings read, no message, no handler.
 * The first event calls preload_init(), which does its work once. The
 * exceptions, at the bottom: a private duplicate of stderr (let go in a
 * forked child and at setsid), a check of the settings that speaks only when
 * one is wrong (read without being used: the first event reads them), and
 * the settings that change the environment (CUMEMTRACE_FOLLOW=0,
 * ..._TORCH_PER_TENSOR=1).
 *
 * One tracer a process: where two copies of the library are loaded (an
 * LD_PRELOAD exported by one installation, `cumemtrace run` of another),
 * the one the process's look-ups reach first traces; the other, which finds
 * the process's cumemtrace_version in another module and answering a
 * version (the API-only library answers none), stands aside: its wrappers pass every
 * call on untouched, and it says so in one line at its first event. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "collect.h"
#include "config.h"
#include "framework_hooks.h"
#include "live.h"
#include "log.h"
#include "modules.h"
#include "output.h"
#include "preload.h"
#include "python.h"
#include "signals.h"
#include "stacks.h"
#include "torch_stats.h"
#include "triggers.h"

/* Around fork, nothing of ours may hold a lock of the loader or the C
 * library, and our own tables must be whole, when the child is made: a probe
 * for PyTorch's allocator (frameworks.c), which holds its lock and may be
 * loading a library, is let finish first (its lock comes before the
 * registry's, as on the probe's own path); then a report being finished
 * (report.h); then the tracker (tracker.h). */
static void before_fork(void)
{
    frameworks_fork_prepare();
    report_fork_prepare();
    tracker_fork_prepare();
}

static void after_fork_parent(void)
{
    tracker_fork_parent();
    report_fork_parent();
    frameworks_fork_parent();
}

static void after_fork_child(void)
{
    frameworks_fork_child();
    report_fork_child();
    context_after_fork();
    pools_after_fork();
    tracker_fork_child();
    torch_stats_reset();
    signals_after_fork();
    live_after_fork();
}

/* What the core cannot do without us (host.h): lent once, kept across fork. */
static const struct host interposer = {
    .lookup = real_dlsym,
    .api_names = entry_names,
    .api_count = API_COUNT,
    .cache_api = {API_torch_caching_allocator, API_cupy_memory_pool, API_jax_array},
    .call_in_progress = real_call_in_progress,
    .memory_info = context_memory_info,
    .pool_info = pool_default_info,
    .created_pool_info = pool_created_info,
};

/* What the frameworks' bridge tells the reports of (framework_hooks.h). */
static const struct framework_hooks reports = {
    .cache_oom = trigger_cache_oom,
    .program_ended = report_keep_end,
};

/* The other copy's cumemtrace_version, where one is loaded first. */
static const char *(*first_copy)(void);

static void init_once(void)
{
    if (first_copy) {
        Dl_info other, own;
        const char *version = first_copy();
        if (!dladdr((void *)first_copy, &other) || !other.dli_fname)
            other.dli_fname = "?";
        if (!dladdr((void *)&preload_init, &own) || !own.dli_fname)
            own.dli_fname = "?";
        log_line("another copy of the tracer (%s, %s) traces this process; this one (%s) "
                 "stands aside",
                 other.dli_fname, version ? version : "?", own.dli_fname);
        tracker_stand_aside();
        return;
    }
    log_descriptors_check();
    log_reserve();
    tracker_start(&interposer);
    framework_hooks_lend(&reports);
    uintptr_t low, high;
    if (module_range((const void *)&preload_init, &low, &high) == 0)
        stack_set_skip_range(low, high);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    if (config.enabled) {
        signals_start();
        live_start();
    }
    log_debug("cumemtrace %s active in pid %d (%d entry points)", CUMEMTRACE_VERSION, (int)getpid(),
              API_COUNT);
}

void preload_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

/* Exit without atexit handlers having run (e.g. the program called exit
 * before any CUDA event registered ours, then made CUDA calls from other
 * atexit handlers): the destructor is the last chance. */
__attribute__((destructor)) static void cumemtrace_stop(void)
{
    trigger_exit_report();
}

/* CUMEMTRACE_FOLLOW=0: programs this one starts are not traced: take this
 * library out of LD_PRELOAD before the program can exec anything. The
 * others stay, however long the list. */
static void follow_setting(void)
{
    const char *follow = getenv("CUMEMTRACE_FOLLOW");
    const char *preload = getenv("LD_PRELOAD");
    int on = 1;
    if (!follow || !*follow || !preload || config_parse_bool(follow, &on) < 0 || on)
        return;
    size_t size = strlen(preload) + 1;
    char *kept = pages_alloc(size);
    if (!kept)
        return;
    size_t used = 0;
    const char *p = preload;
    while (*p) {
        size_t n = strcspn(p, " :");
        int ours = n >= 16 && memmem(p, n, "libcumemtrace.so", 16) != NULL;
        if (n && !ours) {
            if (used)
                kept[used++] = ' ';
            memcpy(kept + used, p, n);
            used += n;
        }
        p += n;
        if (*p)
            p++;
    }
    kept[used] = '\0';
    if (used)
        setenv("LD_PRELOAD", kept, 1);
    else
        unsetenv("LD_PRELOAD");
    pages_free(kept, size);
}

/* CUMEMTRACE_TORCH_PER_TENSOR=1: every PyTorch tensor is its own cudaMalloc,
 * so each is traced with its stack (PyTorch's caching allocator is off:
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1, which PyTorch reads when it starts).
 * A malformed value is left for config_load to name, in a process that
 * uses CUDA; here it changes nothing. */
static void torch_per_tensor_setting(void)
{
    const char *value = getenv("CUMEMTRACE_TORCH_PER_TENSOR");
    int on = 0;
    if (value && *value && config_parse_bool(value, &on) == 0 && on)
        setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
}

/* Whether the process that started this one has this library loaded: it
 * saw the same settings when it loaded, and said what was wrong with them.
 * Read only when there is something to say. */
static int parent_traced(void)
{
    char path[64], chunk[4096 + 16];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)getppid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t kept = 0;
    int found = 0;
    for (ssize_t n; !found && (n = read(fd, chunk + kept, sizeof(chunk) - 1 - kept)) > 0;) {
        size_t used = kept + (size_t)n;
        found = memmem(chunk, used, "libcumemtrace.so", 16) != NULL;
        kept = used < 15 ? used : 15; /* a name cut between two reads */
        memmove(chunk, chunk + used - kept, kept);
    }
    close(fd);
    return found;
}

/* The settings, checked when the library loads rather than at the first
 * CUDA call, minutes into a run: malformed values (config_load names the
 * variable and the value used instead; the first CUDA call, which reads
 * them again, does not repeat it), names that are no setting (with the
 * closest one), and a report location that cannot be written. Said once
 * for a tree of processes: not again in one whose parent is traced. */
static void check_settings(void)
{
    const char *enable = getenv("CUMEMTRACE_ENABLE");
    int on = 1;
    if (enable && *enable && config_parse_bool(enable, &on) == 0 && !on)
        return;
    char template_[2 * CONFIG_TEXT_MAX], why[OUTPUT_PATH_MAX + 80];
    config_output_template(template_, sizeof(template_));
    int unusable = output_check(template_, why, sizeof(why)) < 0;
    if ((!config_check_environment(0) && !unusable) || parent_traced())
        return;
    config_check_environment(1);
    log_once_per_line(1);
    config_load();
    log_once_per_line(0);
    if (unusable)
        log_line("no report can be written where CUMEMTRACE_OUTPUT says ('%s'): %s", template_,
                 why);
}

/* A process that detaches from its session (a daemon, a server started by
 * a script) lets go of the stderr it started with: our copy of it too. */
static pid_t (*real_setsid)(void);

PUBLIC pid_t setsid(void)
{
    log_release_stderr();
    if (!real_setsid) {
        errno = ENOSYS;
        return -1;
    }
    return real_setsid();
}

/* The only work done at load time: find the C library's exec functions
 * (exec.c), see whether another copy traces already (above), keep a private
 * copy of stderr (log.h), say what is wrong with the settings, settings
 * that must change the environment before the program runs, and the
 * directory the program starts in (python.h). */
__attribute__((constructor)) static void cumemtrace_load(void)
{
    *(void **)&real_setsid = real_dlsym(RTLD_NEXT, "setsid");
    exec_init();
    const char *(*first)(void);
    *(void **)&first = real_dlsym(RTLD_DEFAULT, "cumemtrace_version");
    Dl_info found, own; /* by module: our own name may be bound to the other's */
    if (first && dladdr((void *)first, &found) && dladdr((void *)&preload_init, &own) &&
        found.dli_fbase != own.dli_fbase && first()) {
        first_copy = first; /* nothing of ours to keep: the other's */
        return;
    }
    log_keep_stderr();
    python_keep_start_dir();
    pthread_atfork(NULL, NULL, log_release_stderr);
    check_settings();
    follow_setting();
    torch_per_tensor_setting();
}
