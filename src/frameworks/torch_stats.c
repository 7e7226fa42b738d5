/* torch_stats.c - the Python bridge: torch.cuda.memory_stats(), CuPy's
 * allocator and JAX's arrays, read from inside the traced process.
 *
 * PyTorch's counters can only be read by Python code, with the GIL, and
 * never from inside its allocator (where our OOM report is written: the
 * allocator's lock is held then). So they are read by a thread of our own,
 * started in processes that host Python once the tracer is active: every
 * CUMEMTRACE_SAMPLE_MS (1 s) and when a snapshot asks, it takes the GIL with
 * PyGILState_Ensure, reads, and lets go. It holds none of our locks while it
 * waits for the GIL, so a program that keeps the GIL for a long time delays
 * only this reading, never a snapshot or an allocation. (Py_AddPendingCall,
 * which runs a function on the main thread, would spare the thread, but
 * before 3.12 a call queued from a thread that is not the main one is not
 * noticed until something else interrupts the eval loop.)
 *
 * The same readings, with the same GIL, put our allocator into CuPy once it
 * is imported (cupy_pool.c), sweep JAX's live arrays (jax_arrays.c) and
 * answer a live view's request for who holds the arrays (holders_live.c).
 *
 * The first time it holds the GIL it registers a Python atexit hook, torch or
 * not. The hook runs on the main thread before the interpreter is finalized,
 * reads the counters and sweeps JAX's arrays a last time, tells the tracker
 * the program ended, and tells the thread to stop taking the GIL
 * (PyGILState_Ensure once finalization is under way is not safe): the C exit
 * report, written after finalization, shows those final figures.
 *
 * A report asks for a reading of its own moment: a snapshot asks the reader
 * and waits for it (or reads itself when its thread holds the GIL); an OOM
 * report is collected in PyTorch's out-of-memory observer, whose thread
 * takes the GIL and reads (torch_stats_at_oom), as PyTorch's own Python
 * observers do; the exit report shows the exit hook's reading. Those
 * readings also class the live tensors (torch_classes.c). A report given
 * an older reading says how old and why (torch_stats_for_report): this
 * thread's last request is remembered in thread-locals until it collects.
 *
 * Nothing happens unless `torch` is already in sys.modules and
 * torch.cuda.is_initialized() (`cupy`, `jax` imported, and JAX's backends
 * up): we never import a module or initialize CUDA.
 * Any Python error is cleared and the exception the program may have had is
 * restored; the program never sees us. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "cupy_pool.h"
#include "framework_hooks.h"
#include "holders_live.h"
#include "jax_arrays.h"
#include "py_api.h"
#include "python.h"
#include "run_events.h"
#include "threads.h"
#include "torch_classes.h"
#include "torch_stats.h"
#include "tracker.h"

static const char *const keys[TORCH_FIGURE_COUNT] = {
    [TORCH_ALLOCATED] = "allocated_bytes.all.current",
    [TORCH_ALLOCATED_PEAK] = "allocated_bytes.all.peak",
    [TORCH_REQUESTED] = "requested_bytes.all.current",
    [TORCH_RESERVED] = "reserved_bytes.all.current",
    [TORCH_RESERVED_PEAK] = "reserved_bytes.all.peak",
    [TORCH_ACTIVE] = "active_bytes.all.current",
    [TORCH_INACTIVE_SPLIT] = "inactive_split_bytes.all.current",
    [TORCH_INACTIVE_SPLIT_BLOCKS] = "inactive_split.all.current",
    [TORCH_ALLOC_RETRIES] = "num_alloc_retries",
    [TORCH_OOMS] = "num_ooms",
};

static int available; /* -1 no Python (or no reader thread), 1 yes, 0 not looked yet */
static int exiting;   /* the exit hook ran: Python is being finalized */
static int hook_registered;
static int reader_started;
static int reader_pinned;        /* the reader's thread state is kept (read_with_gil) */
static int wanted;               /* a reading was asked for */
static int report_wanted;        /* ... for a report: JAX's arrays swept whatever it costs */
static uint64_t readings;        /* completed attempts, for torch_stats_refresh */
static uint64_t report_readings; /* ... of them made for a report */
static uint64_t serials;         /* the last reading's serial */
static uint64_t report_serial;   /* the serial of the last reading made for a report */
static struct torch_stats report_reading;    /* the reading report_serial */
static struct torch_classes *latest_classes; /* ... and what its tensors were */
/* This thread's request, for the report it collects next: the serial of
 * the reading it got, or why it got none. */
static __thread uint64_t asked;
static __thread const char *asked_why;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t read_done = PTHREAD_COND_INITIALIZER;
static struct torch_stats latest;

/* One device's figures from memory_stats(device), a flat dict. */
static void read_device(PyObject *cuda, int device, uint64_t *figures)
{
    for (int i = 0; i < TORCH_FIGURE_COUNT; i++)
        figures[i] = TORCH_MISSING;
    PyObject *stats = py.call_method(cuda, "memory_stats", "i", device);
    if (!stats)
        return;
    for (int i = 0; i < TORCH_FIGURE_COUNT; i++) {
        PyObject *value = py.dict_get(stats, keys[i]); /* borrowed */
        if (!value)
            continue;
        unsigned long long n = py.as_unsigned(value);
        if (n == (unsigned long long)-1)
            py.clear(); /* not a non-negative int: leave it missing */
        else
            figures[i] = n;
    }
    py_release(stats);
}

/* With the GIL. Fills `out`, valid when PyTorch is there with CUDA initialized. */
static void read_counters(struct torch_stats *out)
{
    memset(out, 0, sizeof(*out));
    PyObject *torch = py.dict_get(py.module_dict(), "torch"); /* borrowed */
    if (!torch)
        return;
    PyObject *cuda = py.get_attr(torch, "cuda");
    PyObject *initialized = cuda ? py.call_method(cuda, "is_initialized", NULL) : NULL;
    PyObject *count = initialized && py.is_true(initialized) == 1
                          ? py.call_method(cuda, "device_count", NULL)
                          : NULL;
    long devices = count ? py.as_long(count) : -1;
    if (devices > MAX_DEVICES)
        devices = MAX_DEVICES;
    for (long d = 0; d < devices; d++)
        read_device(cuda, (int)d, out->figures[d]);
    if (devices > 0) {
        out->valid = 1;
        out->device_count = (int)devices;
        out->time_ms = tracker_now_ms();
    }
    py_release(count);
    py_release(initialized);
    py_release(cuda);
}

/* A reading made for `read`, with its classes (a report's; taken over).
 * Its serial. */
static uint64_t publish(const struct torch_stats *reading, int read, struct torch_classes *classes)
{
    pthread_mutex_lock(&lock);
    uint64_t serial = ++serials;
    if (reading->valid) {
        latest = *reading;
        latest.read = read;
        latest.serial = serial;
    }
    if (read != TORCH_READ_SAMPLE) {
        report_reading = *reading;
        report_reading.read = read;
        report_reading.serial = serial;
        torch_classes_free(latest_classes);
        latest_classes = classes;
        report_serial = serial;
        report_readings++;
    }
    readings++;
    pthread_cond_broadcast(&read_done);
    pthread_mutex_unlock(&lock);
    return serial;
}

/* Python's exit hooks: the program has ended, its interpreter is about to
 * tear down what module globals held. The counters are read a last time,
 * the tracker told (run_program_end), and the caches' view kept
 * (framework_hooks.program_ended). */
static PyObject *exit_hook(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    struct torch_stats reading;
    PyObject *type, *value, *traceback;
    py.fetch(&type, &value, &traceback);
    jax_arrays_sweep(JAX_SWEEP_END); /* unless the hook that runs before JAX's took it */
    read_counters(&reading);
    py.clear();
    struct torch_classes *classes = torch_classes_read();
    __atomic_store_n(&exiting, 1, __ATOMIC_RELEASE);
    python_unwatch_code();
    publish(&reading, TORCH_READ_EXIT, classes);
    run_program_end();
    if (framework_hooks.program_ended)
        framework_hooks.program_ended();
    py.restore(type, value, traceback);
    return py.build_value(""); /* None */
}

static struct py_method_def exit_hook_def = {"cumemtrace_torch_exit", exit_hook, PY_METH_NOARGS,
                                             "cumemtrace: read torch.cuda.memory_stats() at exit"};

/* With the GIL, the first time we hold it: atexit.register(exit_hook), the
 * interpreter's code objects watched (python_watch_code; the exit hook stops
 * that), and CuPy's blocks traced if it is imported; then whoever waits for
 * it (await_exit_hook) is told. */
static void first_with_gil(int bridge)
{
    PyObject *atexit = py.import("atexit");
    PyObject *function = atexit ? py.new_function(&exit_hook_def, NULL, NULL) : NULL;
    PyObject *done = function ? py.call_method(atexit, "register", "O", function) : NULL;
    int hooked = done != NULL;
    py_release(done);
    py_release(function);
    py_release(atexit);
    py.clear();
    if (hooked) /* only with the hook that stops it in time */
        python_watch_code();
    cupy_pool_check(bridge);
    pthread_mutex_lock(&lock);
    hook_registered = 1;
    pthread_cond_broadcast(&read_done);
    pthread_mutex_unlock(&lock);
}

/* With the GIL: PyTorch's counters, CuPy's allocator still ours (`bridge`:
 * on the reader thread, see cupy_pool_check), JAX's arrays swept (for a
 * report whatever it costs), and for a report what the live tensors are
 * (into *classes, if given). The program's exception is kept. */
static void read_holding_gil(struct torch_stats *reading, int bridge, int for_report,
                             struct torch_classes **classes)
{
    PyObject *type, *value, *traceback;
    py.fetch(&type, &value, &traceback);
    /* The hook goes in at the first chance, torch or not: it is what tells
     * the reader to stop taking the GIL before Python is finalized
     * (PyGILState_Ensure after that is not safe). */
    if (!hook_registered)
        first_with_gil(bridge);
    read_counters(reading);
    py.clear();
    if (classes)
        *classes = torch_classes_read();
    cupy_pool_check(bridge);
    jax_arrays_sweep(for_report ? JAX_SWEEP_REPORT : JAX_SWEEP_TICK);
    py.clear();
    py.restore(type, value, traceback);
}

/* One attempt, on the reader thread.
 *
 * The reader keeps one thread state for its whole life: PyGILState_Ensure
 * makes a thread state when the thread has none, and PyGILState_Release
 * deletes it when the thread's count falls to 0, each time under the
 * interpreter's head lock and without the GIL. A fork at that moment (the
 * forking thread holds the GIL, so nothing else of Python's is then
 * between the two) left the child waiting for that lock for ever in
 * PyOS_AfterFork_Child (CPython 3.11; seen about once in 200 runs of a
 * program forking while the reader read every 40 ms). So the first
 * reading takes the GIL once more and never gives that back: later ones
 * only take and release the GIL. */
static void read_with_gil(int for_report)
{
    struct torch_stats reading = {0};
    struct torch_classes *classes = NULL;
    if (py.is_initialized() && !(py.is_finalizing && py.is_finalizing()) &&
        !__atomic_load_n(&exiting, __ATOMIC_ACQUIRE)) {
        int gil = py.gil_ensure();
        if (!reader_pinned) {
            py.gil_ensure();
            reader_pinned = 1;
        }
        if (!__atomic_load_n(&exiting, __ATOMIC_ACQUIRE)) {
            read_holding_gil(&reading, 1, for_report, for_report ? &classes : NULL);
            holders_live_answer(); /* a live view's request, if due */
        }
        py.gil_release(gil);
    }
    publish(&reading, for_report ? TORCH_READ_REPORT : TORCH_READ_SAMPLE, classes);
}

/* Whether this thread may read itself: Python is running, and this thread
 * holds its GIL (a C extension's call, ctypes.PyDLL). */
static int holding_gil(void)
{
    return __atomic_load_n(&available, __ATOMIC_ACQUIRE) > 0 && py.is_initialized() &&
           !__atomic_load_n(&exiting, __ATOMIC_ACQUIRE) && py.gil_check();
}

/* CLOCK_REALTIME `ms` from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    long long ns = t.tv_nsec + (long long)ms * 1000000LL;
    t.tv_sec += ns / 1000000000LL;
    t.tv_nsec = ns % 1000000000LL;
    return t;
}

/* JAX's arrays are seen only when swept: at least every JAX_SWEEP_MS, so
 * that a short run has its growth observations (each sweep is paid from its
 * budget of 1% of the time: jax_arrays.c). */
#define JAX_SWEEP_MS 100

/* A live view's request for holders (holders_live.c) is walked at the
 * reading once it is due: sooner than the period, never sooner than
 * HOLDERS_POLL_MS (Python not enterable for a moment: no busy loop). */
#define HOLDERS_POLL_MS 20

static int period_ms(void)
{
    int ms = config.sample_ms > 0 ? config.sample_ms : 1000;
    if (jax_arrays_active() && ms > JAX_SWEEP_MS)
        ms = JAX_SWEEP_MS;
    int holders = holders_live_due_in();
    if (holders >= 0 && holders < ms)
        ms = holders > HOLDERS_POLL_MS ? holders : HOLDERS_POLL_MS;
    return ms;
}

static void *reader_thread(void *unused)
{
    (void)unused;
    for (;;) {
        struct timespec deadline = deadline_in(period_ms());
        pthread_mutex_lock(&lock);
        while (!wanted && pthread_cond_timedwait(&wake, &lock, &deadline) != ETIMEDOUT)
            ;
        int for_report = report_wanted;
        wanted = report_wanted = 0;
        pthread_mutex_unlock(&lock);
        if (__atomic_load_n(&exiting, __ATOMIC_ACQUIRE))
            return NULL;
        read_with_gil(for_report);
    }
}

static void start_reader(void)
{
    if (thread_start(reader_thread, NULL, "cumemtrace-py") != 0)
        available = -1;
}

/* At the first CUDA call of a Python program, the exit hook must go in
 * before the program can end, or its end is never seen. With the GIL held
 * (a first call often is), it goes in at once; without, the reader puts it
 * in as soon as it gets the GIL, which is waited for here, a little: a
 * thread holding the GIL and waiting for a lock this thread holds (a
 * framework's allocator) would otherwise keep both waiting. */
static void await_exit_hook(void)
{
    if (py.gil_check()) {
        PyObject *type, *value, *traceback;
        py.fetch(&type, &value, &traceback);
        if (!hook_registered)
            first_with_gil(0);
        py.clear();
        py.restore(type, value, traceback);
        return;
    }
    struct timespec deadline = deadline_in(200);
    pthread_mutex_lock(&lock);
    while (!hook_registered && available > 0 &&
           pthread_cond_timedwait(&read_done, &lock, &deadline) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&lock);
}

/* Ask the reader for a reading (`for_report`: JAX's arrays swept whatever
 * it costs), starting it the first time. */
static void request(int for_report)
{
    /* The snapshot thread and the first CUDA call may race: the same answer. */
    if (!__atomic_load_n(&available, __ATOMIC_ACQUIRE))
        __atomic_store_n(&available, py_api_load() == 0 ? 1 : -1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&available, __ATOMIC_ACQUIRE) < 0 || !py.is_initialized() ||
        __atomic_load_n(&exiting, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&lock);
    int start = !reader_started;
    reader_started = 1;
    wanted = 1;
    report_wanted |= for_report;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    if (start)
        start_reader();
    if (start)
        await_exit_hook();
}

void torch_stats_request(void)
{
    request(0);
}

int torch_stats_python(void)
{
    if (__atomic_load_n(&available, __ATOMIC_ACQUIRE) <= 0)
        return -1;
    return __atomic_load_n(&exiting, __ATOMIC_ACQUIRE) ? 0 : 1;
}

/* A reading (`for_report`: one made for a report, begun after this call),
 * waited for up to timeout_ms. 0 if it came; a report's is this thread's. */
static int refresh(int for_report, int timeout_ms)
{
    pthread_mutex_lock(&lock);
    uint64_t *count = for_report ? &report_readings : &readings;
    uint64_t before = *count;
    pthread_mutex_unlock(&lock);
    request(for_report);
    if (available < 0 || __atomic_load_n(&exiting, __ATOMIC_ACQUIRE))
        return -1;
    struct timespec deadline = deadline_in(timeout_ms);
    pthread_mutex_lock(&lock);
    int error = 0;
    while (*count == before && error != ETIMEDOUT)
        error = pthread_cond_timedwait(&read_done, &lock, &deadline);
    int came = *count != before;
    if (came && for_report)
        asked = report_serial;
    pthread_mutex_unlock(&lock);
    return came ? 0 : -1;
}

/* A thread that holds the GIL reads itself: the reader would wait for it,
 * the longer by the holders walk's budget (torch_classes.c). */
int torch_stats_refresh(int timeout_ms)
{
    asked = 0;
    asked_why = NULL;
    if (config.holders)
        timeout_ms += config.holders_ms;
    if (!holding_gil()) {
        int came = refresh(1, timeout_ms);
        if (came < 0)
            asked_why = __atomic_load_n(&exiting, __ATOMIC_ACQUIRE)
                            ? "Python had ended: its exit hook made the last reading"
                            : "Python's GIL was not let go of in time for this report";
        return came;
    }
    struct torch_stats reading = {0};
    struct torch_classes *classes = NULL;
    read_holding_gil(&reading, 0, 1, &classes);
    asked = publish(&reading, TORCH_READ_REPORT, classes);
    return 0;
}

void torch_stats_at_oom(void)
{
    asked = 0;
    asked_why = "Python was not running at the OOM";
    if (!__atomic_load_n(&available, __ATOMIC_ACQUIRE))
        __atomic_store_n(&available, py_api_load() == 0 ? 1 : -1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&available, __ATOMIC_ACQUIRE) < 0 || !py.is_initialized() ||
        (py.is_finalizing && py.is_finalizing()) || __atomic_load_n(&exiting, __ATOMIC_ACQUIRE))
        return;
    int gil = py.gil_ensure();
    struct torch_stats reading = {0};
    struct torch_classes *classes = NULL;
    read_holding_gil(&reading, 0, 1, &classes);
    py.gil_release(gil);
    asked = publish(&reading, TORCH_READ_OOM, classes);
    asked_why = NULL;
}

void torch_stats_not_now(const char *why)
{
    asked = 0;
    asked_why = why;
}

void torch_stats_before_mark(void)
{
    if (!jax_arrays_active() || __atomic_load_n(&available, __ATOMIC_ACQUIRE) <= 0)
        return;
    if (!holding_gil()) {
        refresh(0, 250);
        return;
    }
    struct torch_stats reading = {0};
    read_holding_gil(&reading, 0, 0, NULL);
    publish(&reading, TORCH_READ_SAMPLE, NULL);
}

void torch_stats_for_report(struct torch_stats *out, int at_end,
                            void (*classes)(const struct torch_classes *, const char *why,
                                            void *arg),
                            void *arg)
{
    pthread_mutex_lock(&lock);
    /* A periodic reading may have come between this thread's and now. */
    uint64_t mine = at_end && report_reading.read == TORCH_READ_EXIT ? report_serial : asked;
    int current = mine && report_serial == mine;
    *out = current && report_reading.valid ? report_reading : latest;
    out->now = current && report_reading.valid;
    const char *why = asked_why;
    if (!why && at_end)
        why = "Python's exit hooks did not run (os._exit, exec, or the end came from C)";
    if (!why)
        why = available < 0 ? "no Python in this process"
                            : "a periodic reading: none was made for this report";
    out->why_not = out->now ? NULL : why;
    if (classes)
        classes(current ? latest_classes : NULL, current ? NULL : why, arg);
    pthread_mutex_unlock(&lock);
    asked = 0;
    asked_why = NULL;
}

void torch_stats_reset(void)
{
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&read_done, NULL);
    memset(&latest, 0, sizeof(latest));
    memset(&report_reading, 0, sizeof(report_reading));
    torch_classes_free(latest_classes); /* the parent's tensors */
    latest_classes = NULL;
    report_serial = report_readings = 0;
    asked = 0;
    asked_why = NULL;
    reader_started = 0; /* the thread did not survive the fork */
    reader_pinned = 0;
    wanted = report_wanted = 0;
    readings = 0;
    cupy_pool_after_fork();
    jax_arrays_after_fork();
    holders_live_reset();
}
