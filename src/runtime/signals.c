/* signals.c - reports on request (a signal) and dumps when the program dies.
 *
 * Snapshot signal (CUMEMTRACE_SIGNAL, SIGUSR2 by default): the handler only
 * posts a semaphore (async-signal-safe); a helper thread, started with every
 * signal blocked, waits on it and writes the report outside signal context,
 * while the program carries on. A semaphore, not a pipe: the program may
 * close descriptors it does not know and open its own at their numbers, and
 * a byte written by number would land in its file.
 *
 * Fatal signals (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, and with
 * CUMEMTRACE_DUMP_ON_TERM also SIGTERM and SIGINT): the handler writes a raw
 * dump with async-signal-safe calls only (crashdump.c), then hands the signal
 * on, so that exit status and core files are what they would have been.
 *
 * Rules for living with the program's own handlers:
 *  - handlers installed before ours (Python's, faulthandler's) are called
 *    after ours, with the same arguments; SIG_IGN stays ignored;
 *  - a handler the program installs after ours replaces ours: from then on
 *    that signal gets no snapshot or dump, and the program's handler works
 *    exactly as it would without the tracer;
 *  - the snapshot signal's default action (terminate) is not chained to: that
 *    signal is ours once the tracer is active.
 * Handlers are installed at the first CUDA event, not at load time, so a
 * process that never uses CUDA keeps its signals untouched. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "collect.h"
#include "config.h"
#include "crashdump.h"
#include "log.h"
#include "signals.h"
#include "threads.h"
#include "torch_stats.h"
#include "tracker.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT};
#define FATAL_COUNT (sizeof(fatal_signals) / sizeof(fatal_signals[0]))

static struct sigaction previous[65];
static int installed[65];
static sem_t wake;
static int waking; /* the semaphore and the thread are up */
static int snapshots;
static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;

/* ---- the snapshot thread ------------------------------------------------- */

static void write_snapshot(void)
{
    char template_[REPORT_TEMPLATE_MAX];
    report_template(template_, "signal", ++snapshots);
    torch_stats_refresh(250); /* before entering: the reading is Python's, not ours */
    int entered = tracker_enter();
    struct report *r = report_new("signal");
    if (r) {
        r->event.type = EVENT_SIGNAL;
        r->event.signal = config.snapshot_signal;
        report_emit(r, template_, 0, NULL);
        report_delete(r);
    }
    if (entered)
        tracker_leave();
}

/* Take the posts not yet taken; several signals while a report is being
 * written make one report. Returns how many were taken. */
static int take_wakeups(void)
{
    int n = 0;
    for (;;) {
        if (sem_trywait(&wake) == 0)
            n++;
        else if (errno != EINTR)
            return n;
    }
}

static int drained; /* set by signals_drain() under `writing` */

static void *snapshot_thread(void *unused)
{
    (void)unused;
    for (;;) {
        if (sem_wait(&wake) < 0)
            continue;    /* EINTR */
        sem_post(&wake); /* taken again below, with the others */
        pthread_mutex_lock(&writing);
        int done = drained, n = done ? 0 : take_wakeups();
        if (n > 0)
            write_snapshot();
        pthread_mutex_unlock(&writing);
        if (done)
            return NULL;
    }
}

/* At exit: let a snapshot being written finish, and write the one a signal
 * asked for that the thread has not picked up yet, so none is lost. After
 * that the thread starts no other: the process may end at any moment, and a
 * snapshot cut short would leave a temporary file behind. */
void signals_drain(void)
{
    if (!waking)
        return;
    pthread_mutex_lock(&writing);
    if (take_wakeups() > 0)
        write_snapshot();
    drained = 1;
    pthread_mutex_unlock(&writing);
}

static int start_thread(void)
{
    if (sem_init(&wake, 0, 0) < 0)
        return -1;
    if (thread_start(snapshot_thread, NULL, "cumemtrace") != 0) {
        sem_destroy(&wake);
        return -1;
    }
    __atomic_store_n(&waking, 1, __ATOMIC_RELEASE);
    return 0;
}

/* ---- handlers ---------------------------------------------------------------- */

/* Call what was there before us, as if we had never been there. */
static void chain(int signal, siginfo_t *info, void *context)
{
    const struct sigaction *old = &previous[signal];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(signal, info, context);
    } else if (old->sa_handler != SIG_IGN && old->sa_handler != SIG_DFL) {
        old->sa_handler(signal);
    }
}

static void snapshot_handler(int signal, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    if (__atomic_load_n(&waking, __ATOMIC_ACQUIRE))
        sem_post(&wake);
    chain(signal, info, context);
    errno = saved_errno;
}

/* The dump's own stack, for when the handler runs on a small alternate
 * signal stack of the program's (a few KiB, enough for its handler, not for
 * the dump): DUMP_STACK_NEED is what crashdump_write() may take. */
#define DUMP_STACK_NEED (32 * 1024)
static char dump_stack[DUMP_STACK_NEED * 2] __attribute__((aligned(64)));
static ucontext_t dump_context, handler_context;
static int dump_signal;

static void dump_on_own_stack(void)
{
    crashdump_write(dump_signal);
}

/* Write the dump on the stack we run on, when it has room; else on ours:
 * a small alternate stack would overflow, and the program's handler, which
 * runs after, would never run. */
static void dump(int signal)
{
    stack_t alternate;
    char here;
    if (sigaltstack(NULL, &alternate) < 0 || !(alternate.ss_flags & SS_ONSTACK) ||
        (size_t)(&here - (char *)alternate.ss_sp) >= DUMP_STACK_NEED) {
        crashdump_write(signal);
        return;
    }
    dump_signal = signal;
    if (getcontext(&dump_context) < 0)
        return;
    dump_context.uc_stack.ss_sp = dump_stack;
    dump_context.uc_stack.ss_size = sizeof(dump_stack);
    dump_context.uc_link = &handler_context;
    makecontext(&dump_context, dump_on_own_stack, 0);
    swapcontext(&handler_context, &dump_context);
}

static void fatal_handler(int signal, siginfo_t *info, void *context)
{
    static int dumping;
    int saved_errno = errno;
    if (!__atomic_exchange_n(&dumping, 1, __ATOMIC_ACQ_REL))
        dump(signal);

    /* Hand the signal on. A handler of the program's own runs now. With the
     * default action: restore it; a fault raised by the CPU happens again when
     * we return and the kernel applies it (core dump included); a signal sent
     * by kill, raise or abort is raised again, and arrives when we return. */
    const struct sigaction *old = &previous[signal];
    if (old->sa_handler == SIG_DFL && !(old->sa_flags & SA_SIGINFO)) {
        sigaction(signal, old, NULL);
        if (!info || info->si_code <= 0 || signal == SIGABRT || signal == SIGTERM ||
            signal == SIGINT)
            raise(signal);
    } else {
        chain(signal, info, context);
    }
    errno = saved_errno;
}

static void install(int signal, void (*handler)(int, siginfo_t *, void *))
{
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(signal, &action, &previous[signal]) == 0)
        installed[signal] = 1;
}

void signals_start(void)
{
    if (config.snapshot_signal > 0 && config.snapshot_signal < 65) {
        if (start_thread() == 0)
            install(config.snapshot_signal, snapshot_handler);
        else
            log_line("cannot start the snapshot thread; CUMEMTRACE_SIGNAL is off");
    }
    crashdump_prepare();   /* also for exit() during a CUDA call (triggers.c) */
    torch_stats_request(); /* in a Python process: start reading PyTorch's counters */
    if (config.crash) {
        for (unsigned i = 0; i < FATAL_COUNT; i++) {
            int signal = fatal_signals[i];
            if ((signal == SIGTERM || signal == SIGINT) && !config.dump_on_term)
                continue;
            if (signal == config.snapshot_signal)
                continue;
            install(signal, fatal_handler);
        }
    }
}

int signals_start_pending;

/* In a forked child the thread is gone and the semaphore's count is the
 * parent's: a new semaphore and a new thread are made at the child's first
 * CUDA call (signals_start_if_pending), not here; meanwhile a signal posts
 * nothing. A
 * thread made here, in a child of a process whose other threads may have
 * been inside the allocator at the fork, can wait for ever on a lock the
 * C library does not reset (ASan's allocator does that). And a dump path
 * with the child's pid. */
void signals_after_fork(void)
{
    if (waking) {
        waking = 0;
        snapshots = 0;
        drained = 0;
        pthread_mutex_init(&writing, NULL);
        __atomic_store_n(&signals_start_pending, 1, __ATOMIC_RELEASE);
    }
    crashdump_prepare();
}

void signals_start_now(void)
{
    if (!__atomic_exchange_n(&signals_start_pending, 0, __ATOMIC_ACQ_REL))
        return;
    if (start_thread() < 0)
        log_line("cannot start the snapshot thread in the child; CUMEMTRACE_SIGNAL is off");
}
