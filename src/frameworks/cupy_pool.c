/* cupy_pool.c - CuPy's pool blocks, through its allocator (see cupy_pool.h).
 *
 * Our allocator is a C function (a PyCFunction whose `self` is the pool's
 * own malloc). Each call:
 *  - calls the pool's malloc with tracker_cache_allocating(KIND_CUPY_BLOCK)
 *    set, so a chunk the pool takes from the driver meanwhile (on this
 *    thread: CuPy links the CUDA runtime statically, only the driver's
 *    cuMemAlloc is seen) is marked a segment of CuPy's cache;
 *  - records the block it returns (a MemoryPointer: .ptr, .device_id, .mem)
 *    with this thread's stack, Python lines included;
 *  - puts a token in the block's PooledMemory's __dict__: a capsule whose
 *    destructor ends the record. CuPy returns the block to its pool when the
 *    last array using the PooledMemory goes, and only then is its __dict__
 *    cleared. The token carries the record's allocation number, so that a
 *    block handed out again at the same address before the token dies
 *    (possible without a GIL) is not the one it ends.
 * A block of size 0, or memory that is not the pool's (no __dict__), is left
 * as the driver sees it. When CuPy's pool gives up (a MemoryError), the OOM
 * report is written in its cache's terms.
 *
 * We put it in only over a MemoryPool's malloc (CuPy's default): any other
 * allocator (cupy.cuda.MemoryAsyncPool, set_allocator(None)) makes each
 * block a driver allocation of its own, which the driver view already
 * traces one by one. A program that replaces ours later (RMM's allocator,
 * say) keeps it: the report then says that CuPy's blocks are no longer
 * traced, and shows the pool's segments. Blocks allocated before ours went
 * in (before CuPy was seen imported) are not recorded; the chunks the pool
 * took then are known as its segments once it hands a block out at a
 * chunk's start (segments_handed_out), as it does when one is reused.
 *
 * Install and check run with the GIL, which Python may let go between the
 * calls they make: `lock` is only tried. */
#include <pthread.h>
#include <stdio.h>

#include "cache_blocks.h"
#include "cache_segments.h"
#include "config.h"
#include "cupy_pool.h"
#include "framework_hooks.h"
#include "host.h"
#include "kinds.h"
#include "log.h"
#include "py_api.h"
#include "run_events.h"
#include "tracker.h"

#define TOKEN_NAME "cumemtrace.cupy_block"

enum { UNSEEN, INSTALLED, NOT_A_POOL, REPLACED, OFF };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state;
static PyObject *cuda;    /* cupy.cuda, once ours is in */
static PyObject *wrapper; /* ours, as installed */
static PyObject *s_ptr, *s_device_id, *s_mem, *s_token;
static const char *why; /* the view's reason, when not blocks */

/* Changed with `lock` held, read without it to return early. */
static void set_state(int value)
{
    __atomic_store_n(&state, value, __ATOMIC_RELAXED);
}

/* ---- the allocator --------------------------------------------------------- */

/* The token's destructor: the block went back to the pool. No Python call:
 * it may run during the interpreter's teardown. */
static void token_gone(PyObject *token)
{
    uint64_t address = (uintptr_t)py.capsule_pointer(token, TOKEN_NAME);
    uint64_t number = (uintptr_t)py.capsule_context(token);
    cache_blocks_free_if(address, number);
}

static uint64_t unsigned_of(PyObject *object, int *bad)
{
    unsigned long long value = object ? py.as_unsigned(object) : 0;
    if (!object || (value == (unsigned long long)-1 && py.occurred())) {
        *bad = 1;
        return 0;
    }
    return value;
}

/* The block `pointer` the pool just gave for `size` bytes: a token on its
 * memory, then its record. */
static void record(PyObject *pointer, PyObject *size)
{
    int bad = 0;
    PyObject *address = py.get_attr_object(pointer, s_ptr);
    PyObject *device = address ? py.get_attr_object(pointer, s_device_id) : NULL;
    PyObject *memory = device ? py.get_attr_object(pointer, s_mem) : NULL;
    uint64_t at = unsigned_of(address, &bad);
    uint64_t bytes = unsigned_of(size, &bad);
    long ordinal = device ? py.as_long(device) : -1;
    PyObject *token =
        memory && !bad && at ? py.capsule_new((void *)(uintptr_t)at, TOKEN_NAME, token_gone) : NULL;
    /* Only a pool's block has a __dict__ to hold it. */
    if (token && py.set_attr_object(memory, s_token, token) == 0) {
        uint64_t number = cache_blocks_alloc(KIND_CUPY_BLOCK, (int)ordinal, at, bytes, 0, NULL);
        py.capsule_set_context(token, (void *)(uintptr_t)number);
        segments_handed_out(KIND_CUPY_BLOCK, at); /* a chunk from before we were in */
    }
    py_release(token);
    py_release(memory);
    py_release(device);
    py_release(address);
    if (py.occurred())
        py.clear();
}

/* The pool gave up on `size`: CuPy raises OutOfMemoryError, a MemoryError.
 * The report of that moment, in its cache's terms; the exception goes on. */
static void report_oom(PyObject *size)
{
    PyObject *type, *value, *traceback;
    py.fetch(&type, &value, &traceback);
    PyObject *runtime = py_attr(cuda, "runtime");
    PyObject *current = runtime ? py.call_method(runtime, "getDevice", NULL) : NULL;
    long device = current ? py.as_long(current) : -1;
    int bad = 0;
    uint64_t bytes = unsigned_of(size, &bad);
    py_release(current);
    py_release(runtime);
    py.clear();
    uint64_t free_bytes = 0, total;
    if (device < 0 || !host.memory_info || host.memory_info((int)device, &free_bytes, &total) < 0)
        free_bytes = 0;
    if (!bad && framework_hooks.cache_oom)
        framework_hooks.cache_oom(KIND_CUPY_BLOCK, (int)device, bytes, free_bytes);
    py.restore(type, value, traceback);
}

static PyObject *cupy_malloc(PyObject *pool_malloc, PyObject *size)
{
    int outer = tracker_cache_allocating(KIND_CUPY_BLOCK);
    PyObject *pointer = py.call_function(pool_malloc, size, NULL);
    tracker_cache_allocating(outer);
    if (pointer)
        record(pointer, size);
    else if (py.exception_matches(py.memory_error))
        report_oom(size);
    return pointer;
}

static struct py_method_def malloc_def =
    {"cumemtrace_cupy_malloc", cupy_malloc, PY_METH_O,
     "cumemtrace: CuPy's memory pool's malloc, each block recorded with its line"};

/* ---- putting it in --------------------------------------------------------- */

static void say_view(void)
{
    if (state == INSTALLED)
        run_cache_view(KIND_CUPY_BLOCK, CACHE_BLOCKS, "");
    else if (why)
        run_cache_view(KIND_CUPY_BLOCK, CACHE_SEGMENTS, why);
}

/* The process-wide allocator, if it is a MemoryPool's malloc: ours goes over
 * it. Lock held. */
static void install(PyObject *cupy)
{
    if (!config.frameworks) {
        set_state(OFF);
        why = "CUMEMTRACE_FRAMEWORKS=0";
        say_view();
        return;
    }
    PyObject *module = py_attr(cupy, "cuda");
    PyObject *original = module ? py.call_method(module, "get_allocator", NULL) : NULL;
    PyObject *pool_class = py_attr(module, "MemoryPool");
    PyObject *owner = py_attr(original, "__self__");
    int pool = owner && pool_class && py.is_instance(owner, pool_class) == 1;
    py_release(owner);
    py_release(pool_class);
    if (py.occurred())
        py.clear();
    if (original && !pool) {
        set_state(NOT_A_POOL);
        log_debug("CuPy's allocator is not a memory pool: each of its blocks is a driver "
                  "allocation, traced as such");
    } else if (original) {
        s_ptr = s_ptr ? s_ptr : py.intern("ptr");
        s_device_id = s_device_id ? s_device_id : py.intern("device_id");
        s_mem = s_mem ? s_mem : py.intern("mem");
        s_token = s_token ? s_token : py.intern("_cumemtrace_block");
        PyObject *ours = s_ptr && s_device_id && s_mem && s_token
                             ? py.new_function(&malloc_def, original, NULL)
                             : NULL;
        PyObject *done = ours ? py.call_method(module, "set_allocator", "O", ours) : NULL;
        if (done) { /* not when this thread is inside using_allocator: later */
            set_state(INSTALLED);
            wrapper = ours;
            cuda = module;
            module = NULL;
            ours = NULL;
            say_view();
            log_debug("tracing CuPy's pool blocks through its allocator");
        }
        py_release(done);
        py_release(ours);
    }
    py_release(original);
    py_release(module);
    if (py.occurred())
        py.clear();
}

/* Whether the program put another allocator in place of ours. Lock held. */
static void check_replaced(void)
{
    PyObject *current = py.call_method(cuda, "get_allocator", NULL);
    if (current && current != wrapper) {
        set_state(REPLACED);
        why = "the program replaced CuPy's allocator (cupy.cuda.set_allocator): its blocks "
              "allocated since are not traced";
        say_view();
        log_line("CuPy's blocks are not traced one by one since the program replaced its "
                 "allocator (cupy.cuda.set_allocator); reports show its pool's segments");
    }
    py_release(current);
    if (py.occurred())
        py.clear();
}

void cupy_pool_check(int bridge)
{
    int now = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if ((now != UNSEEN && !(now == INSTALLED && bridge)) || py_api_load() < 0)
        return;
    PyObject *cupy = py_imported("cupy");
    if (!cupy || pthread_mutex_trylock(&lock) != 0)
        return;
    if (state == UNSEEN)
        install(cupy);
    else if (state == INSTALLED && bridge)
        check_replaced();
    pthread_mutex_unlock(&lock);
}

void cupy_pool_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    say_view();
}
