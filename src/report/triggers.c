/* triggers.c - the out-of-memory and exit reports (see triggers.h).
 *
 * Both run on the thread of the event, marked inside the tracer
 * (tracker_enter) like every report, so that a CUDA call made meanwhile, from
 * a signal handler say, passes through untracked; a thread already inside
 * (such a call itself) writes no report. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "crashdump.h"
#include "report.h"
#include "signals.h"
#include "triggers.h"

/* ---- out-of-memory reports ---------------------------------------------
 *
 * At an OOM the report is collected at once (the program may die next) and
 * written with the retry "pending". PyTorch answers an OOM by freeing its
 * cache and asking again for the same size on the same thread: when that
 * retry succeeds or fails, the same report (the picture of the OOM moment)
 * is written again with the outcome. */
static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int active;
    pthread_t thread;
    uint64_t size;
    struct report *report;
    char template_[sizeof(config.output) + 32];
} pending_oom;
static int ooms_reported;

static void finish_pending_oom(int outcome)
{
    pthread_mutex_lock(&oom_lock);
    if (pending_oom.active) {
        pending_oom.active = 0;
        pending_oom.report->event.retry = outcome;
        report_emit(pending_oom.report, pending_oom.template_, 0);
        report_delete(pending_oom.report);
        pending_oom.report = NULL;
    }
    pthread_mutex_unlock(&oom_lock);
}

/* Inside the tracer, without its lock. */
static void check_retry(uint64_t size, int succeeded)
{
    if (!__atomic_load_n(&pending_oom.active, __ATOMIC_ACQUIRE) ||
        !pthread_equal(pending_oom.thread, pthread_self()) || pending_oom.size != size)
        return;
    tracker_oom_retried(succeeded);
    finish_pending_oom(succeeded ? RETRY_SUCCEEDED : RETRY_FAILED);
}

static void report_oom(const struct allocation *a, int code, uint32_t stack_id)
{
    if (config.oom == OOM_OFF || (config.oom == OOM_FIRST && ooms_reported > 0))
        return;
    finish_pending_oom(RETRY_NONE);     /* an earlier one never saw its retry */
    int number = ++ooms_reported;
    struct report *r = report_new("oom");
    if (!r)
        return;
    struct report_event *e = &r->event;
    e->type = EVENT_OOM;
    e->size = a->size;
    e->api = a->api;
    e->kind = a->kind & BLOCK_KIND_MASK;
    e->device = a->device;
    e->code = code;
    e->stack_id = stack_id;
    e->retry = RETRY_PENDING;
    if (a->device >= 0 && host.memory_info &&
        host.memory_info(a->device, &e->free, &e->total) == 0)
        e->has_memory_info = 1;

    pthread_mutex_lock(&oom_lock);
    if (config.oom == OOM_FIRST)
        snprintf(pending_oom.template_, sizeof(pending_oom.template_), "%s-oom", config.output);
    else
        snprintf(pending_oom.template_, sizeof(pending_oom.template_), "%s-oom-%d",
                 config.output, number);
    report_emit(r, pending_oom.template_, 1);
    pending_oom.report = r;
    pending_oom.thread = pthread_self();
    pending_oom.size = a->size;
    __atomic_store_n(&pending_oom.active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&oom_lock);
}

/* ---- the exit report ------------------------------------------------------ */

static pid_t exit_report_pid;

/* Registered at the first CUDA event, after the CUDA libraries set up their
 * own exit handlers: ours then runs before theirs tear the contexts down,
 * while the driver can still answer cuMemGetInfo. */
static void arm_exit_report(void)
{
    static int registered;
    /* A load first: every allocation passes here, and an exchange would be a
     * write to one cache line shared by every allocating thread. */
    if (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE) &&
        !__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL))
        atexit(trigger_exit_report);
}

void trigger_on_alloc(uint64_t size)
{
    if (!tracker_enter())
        return;
    check_retry(size, 1);
    arm_exit_report();
    tracker_leave();
}

void trigger_on_failure(const struct allocation *a, int code, int oom, uint32_t stack_id)
{
    if (!tracker_enter())
        return;
    arm_exit_report();
    check_retry(a->size, 0);
    if (oom)
        report_oom(a, code, stack_id);
    tracker_leave();
}

/* Once per process: a forked child that inherited the handler writes its own
 * only if it made CUDA calls itself (tracker.traced is cleared at fork). */
void trigger_exit_report(void)
{
    if (!config.enabled || !tracker.traced)
        return;
    pid_t pid = getpid();
    if (__atomic_exchange_n(&exit_report_pid, pid, __ATOMIC_ACQ_REL) == pid)
        return;
    /* exit() called from a signal handler that interrupted this thread
     * inside a CUDA call or inside the tracer: the CUDA libraries, malloc or
     * our own lock may be held by the very code that was interrupted, so the
     * full report could hang. Write the async-signal-safe dump instead. */
    if ((host.call_in_progress && host.call_in_progress()) || tracker_inside()) {
        crashdump_write(0);
        return;
    }
    signals_drain();
    if (tracker_enter()) {      /* not inside: said above */
        report_write_to("exit", config.output, 1);
        tracker_leave();
    }
}
