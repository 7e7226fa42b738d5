/* triggers.c - the out-of-memory and exit reports (see triggers.h).
 *
 * Both run on the thread of the event, marked inside the tracer
 * (tracker_enter) like every report, so that a CUDA call made meanwhile, from
 * a signal handler say, passes through untracked; a thread already inside
 * (such a call itself) writes no report. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "collect.h"
#include "config.h"
#include "crashdump.h"
#include "run_events.h"
#include "signals.h"
#include "stacks.h"
#include "torch_stats.h"
#include "triggers.h"

/* ---- out-of-memory reports ---------------------------------------------
 *
 * At an OOM the report is collected at once (the program may die next) and
 * its files written with the retry "pending". PyTorch answers an OOM by
 * freeing its cache and asking again for the same size on the same thread:
 * when that retry succeeds or fails, the same report (the picture of the OOM
 * moment) is written again with the outcome; when it failed, PyTorch gives
 * up and its out-of-memory observer brings the report in its cache's terms
 * (trigger_cache_oom), which takes that one's place in its very files.
 *
 * The verdict is said once, the final one: while PyTorch's observer is ours
 * (its tensors are traced), the summary on stderr waits for the outcome
 * (owed), and is printed with it, or with the next OOM or at exit when no
 * outcome came. Without it the driver's verdict is the final one, printed at
 * once. The final verdict is kept for the reports after it
 * (run_oom_verdict): the exit report's findings repeat it. */
static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
struct oom_report {
    pid_t pid; /* the process it describes: a forked child's are not */
    pthread_t thread;
    uint64_t size;
    int owed; /* its summary is not yet on stderr */
    struct report *report;
    char template_[REPORT_TEMPLATE_MAX];
    struct report_files files; /* where it went: rewritten there */
};
static int pending_active; /* pending_oom waits for its retry */
static struct oom_report pending_oom;
static int ooms_reported;
/* The last OOM report whose retry failed: the framework's own OOM that
 * follows on that thread is the same failure, and rewrites that report in
 * the very files it went to. Its report is kept while its summary is owed. */
static struct {
    int failed;
    struct oom_report oom;
} last_oom;

/* PyTorch's allocator, whose observer is ours, decides what an OOM on the
 * driver becomes. */
static int framework_decides(void)
{
    return __atomic_load_n(&tracker.caches[0].view, __ATOMIC_ACQUIRE) == CACHE_BLOCKS;
}

/* `r`'s verdict is the final one: kept for the reports after it. */
static void keep_verdict(const struct report *r)
{
    struct report_finding finding;
    if (report_findings(r, &finding, 1) == 1 && strcmp(finding.verdict, "oom") == 0)
        run_oom_verdict(report_verdict(r), finding.text, r->event.size, r->event.stack_id);
}

/* The owed summary of the report that waited for its framework's OOM, which
 * did not come: said now, with what it has. With oom_lock held. */
static void settle_last_oom(void)
{
    if (!last_oom.oom.report)
        return;
    if (last_oom.oom.pid != getpid()) { /* the parent's, inherited at a fork */
        last_oom.oom.report = NULL;
        return;
    }
    report_emit(last_oom.oom.report, last_oom.oom.template_, 1, &last_oom.oom.files);
    keep_verdict(last_oom.oom.report);
    report_delete(last_oom.oom.report);
    last_oom.oom.report = NULL;
}

static void finish_pending_oom(int outcome)
{
    pthread_mutex_lock(&oom_lock);
    settle_last_oom();
    if (pending_active && pending_oom.pid != getpid()) { /* the parent's */
        pending_active = 0;
        pending_oom.report = NULL;
    }
    if (pending_active) {
        pending_active = 0;
        struct oom_report *p = &pending_oom;
        p->report->event.retry = outcome;
        /* Failed under PyTorch: its own OOM follows, with the verdict. */
        int wait = p->owed && outcome == RETRY_FAILED;
        report_emit(p->report, p->template_, p->owed && !wait, &p->files);
        if (!wait && outcome != RETRY_SUCCEEDED)
            keep_verdict(p->report);
        last_oom.failed = outcome == RETRY_FAILED;
        last_oom.oom.pid = p->pid;
        last_oom.oom.thread = p->thread;
        memcpy(last_oom.oom.template_, p->template_, sizeof(p->template_));
        if (last_oom.failed)
            memcpy(&last_oom.oom.files, &p->files, sizeof(p->files));
        if (wait) {
            last_oom.oom.report = p->report;
        } else {
            report_delete(p->report);
        }
        p->report = NULL;
    }
    pthread_mutex_unlock(&oom_lock);
}

/* Inside the tracer, without its lock. */
static void check_retry(uint64_t size, int succeeded)
{
    if (!__atomic_load_n(&pending_active, __ATOMIC_ACQUIRE) ||
        !pthread_equal(pending_oom.thread, pthread_self()) || pending_oom.size != size)
        return;
    run_oom_retried(succeeded);
    finish_pending_oom(succeeded ? RETRY_SUCCEEDED : RETRY_FAILED);
}

static void report_oom(const struct allocation *a, int code, uint32_t stack_id)
{
    if (config.oom == OOM_OFF || (config.oom == OOM_FIRST && ooms_reported > 0))
        return;
    finish_pending_oom(RETRY_NONE); /* an earlier one never saw its retry */
    int number = ++ooms_reported;
    torch_stats_not_now("the failure is inside a CUDA call (PyTorch's allocator holds its lock "
                        "then): Python cannot run there");
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
    if (a->device >= 0 && host.memory_info && host.memory_info(a->device, &e->free, &e->total) == 0)
        e->has_memory_info = 1;

    pthread_mutex_lock(&oom_lock);
    report_template(pending_oom.template_, "oom", config.oom == OOM_FIRST ? 0 : number);
    pending_oom.files.count = 0;
    pending_oom.owed = framework_decides();
    report_emit(r, pending_oom.template_, !pending_oom.owed, &pending_oom.files);
    if (!pending_oom.owed)
        keep_verdict(r);
    pending_oom.report = r;
    pending_oom.pid = getpid();
    pending_oom.thread = pthread_self();
    pending_oom.size = a->size;
    __atomic_store_n(&pending_active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&oom_lock);
}

/* A framework gave up (PyTorch after freeing its cache and asking the driver
 * again): the report of that moment, with its cache's view and a verdict in
 * its terms. It replaces the report of the driver's failure that led here,
 * and says the verdict on stderr unless that one already did. */
void trigger_cache_oom(int cache_kind, int device, uint64_t request, uint64_t driver_free)
{
    struct allocation a = {.size = request,
                           .device = device,
                           .kind = cache_kind,
                           .api = host.cache_api[cache_kind - KIND_TORCH_TENSOR]};
    uint32_t stack_id = run_failure(&a, 0, 1);
    if (config.oom == OOM_OFF || !tracker_enter())
        return;
    if (__atomic_load_n(&pending_active, __ATOMIC_ACQUIRE) &&
        pthread_equal(pending_oom.thread, pthread_self())) {
        run_oom_retried(0);
        finish_pending_oom(RETRY_FAILED);
    }
    char template_[sizeof(last_oom.oom.template_)];
    struct report_files *files = NULL; /* the rewritten report's, a copy */
    pthread_mutex_lock(&oom_lock);
    int same = last_oom.failed && last_oom.oom.pid == getpid() &&
               pthread_equal(last_oom.oom.thread, pthread_self());
    int summary = !same || last_oom.oom.report;
    last_oom.failed = 0;
    if (same && (files = pages_alloc(sizeof(*files))))
        memcpy(files, &last_oom.oom.files, sizeof(*files));
    if (same) {
        memcpy(template_, last_oom.oom.template_, sizeof(template_));
        if (last_oom.oom.report)
            report_delete(last_oom.oom.report); /* this one says it, in its terms */
        last_oom.oom.report = NULL;
    } else {
        settle_last_oom();
        if (config.oom == OOM_FIRST && ooms_reported > 0)
            template_[0] = '\0';
        else
            report_template(template_, "oom", config.oom == OOM_FIRST ? 0 : ooms_reported + 1);
    }
    if (!same && template_[0])
        ooms_reported++;
    pthread_mutex_unlock(&oom_lock);
    struct report *r = template_[0] ? report_new("oom") : NULL;
    if (r) {
        struct report_event *e = &r->event;
        e->type = EVENT_OOM;
        e->size = request;
        e->api = a.api;
        e->kind = cache_kind;
        e->device = device;
        e->stack_id = stack_id;
        e->retry = RETRY_FAILED;
        e->free = driver_free;
        e->has_memory_info =
            host.memory_info && host.memory_info(device, &(uint64_t){0}, &e->total) == 0;
        report_emit(r, template_, summary, files);
        keep_verdict(r);
        report_delete(r);
    }
    if (files)
        pages_free(files, sizeof(*files));
    tracker_leave();
}

/* Before the report at the program's end: an OOM report whose outcome never
 * came says its verdict first. Inside the tracer. */
static void settle_ooms(void)
{
    finish_pending_oom(RETRY_NONE);
    pthread_mutex_lock(&oom_lock);
    settle_last_oom();
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

/* Where the exit report went, so that the report at exit after a failed
 * exec takes the place of the one written before it. */
static struct report_files exit_files;

/* The report that ends the process, `reason` "exit" or "exec"; once per
 * process, and only in the process the tables describe: a forked child
 * that inherited the handler writes its own only if it made CUDA calls
 * itself (tracker.traced is cleared at fork), and a vfork child (which
 * shares our memory and runs no fork handler) writes none. 1 if written. */
static int final_report(const char *reason)
{
    pid_t pid = getpid();
    if (!config.enabled || !tracker.traced || tracker.pid != (int)pid)
        return 0;
    if (__atomic_exchange_n(&exit_report_pid, pid, __ATOMIC_ACQ_REL) == pid)
        return 0;
    /* exit() called from a signal handler (an alarm's, a Ctrl-C's): the
     * code it interrupted may hold malloc's lock, the loader's, the CUDA
     * libraries' or our own, and the full report, which takes them all,
     * could wait for ever. Likewise inside a CUDA call or inside the tracer.
     * The async-signal-safe dump takes its place (and says so). The walk
     * that looks for a handler runs inside the tracer. */
    int unsafe = (host.call_in_progress && host.call_in_progress()) || !tracker_enter();
    if (!unsafe) {
        unsafe = stack_in_signal_handler() > 0;
        tracker_leave();
    }
    if (unsafe) {
        if (strcmp(reason, "exit") == 0)
            crashdump_exit("exit() from a signal handler or during a CUDA call, where the "
                           "report could wait for ever on a lock the interrupted code holds");
        return 0;
    }
    signals_drain();
    if (!tracker_enter()) /* not inside: said above */
        return 0;
    settle_ooms();
    int failed = 0;
    if (config.formats || !config.quiet) {
        struct report *r = report_new(reason);
        char template_[REPORT_TEMPLATE_MAX];
        failed = !r || report_emit(r, report_template(template_, NULL, 0), 1, &exit_files) < 0;
        if (r)
            report_delete(r);
    }
    tracker_leave();
    /* Out of descriptors or memory (the program took them all): the dump,
     * made ahead and written without either, keeps what the report would.
     * (Where that file could not be made either, the lines said enough.) */
    if (failed && strcmp(reason, "exit") == 0 && crashdump_ready())
        crashdump_exit("the exit report could not be written");
    return 1;
}

void trigger_exit_report(void)
{
    final_report("exit");
}

int trigger_exec_report(void)
{
    int saved = errno;
    int written = final_report("exec");
    errno = saved;
    return written;
}

void trigger_exec_failed(int written)
{
    if (written)
        __atomic_store_n(&exit_report_pid, 0, __ATOMIC_RELEASE);
}
