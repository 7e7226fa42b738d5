/* jax_arrays.c - JAX's live arrays, swept with the GIL (see jax_arrays.h).
 *
 * A sweep reads jax.live_arrays("gpu") and, for each array, its buffer's
 * address (unsafe_buffer_pointer()), its bytes on the device
 * (on_device_size_in_bytes()) and the hash of its traceback. Several arrays
 * may share one buffer: it is counted once. An array already there at the
 * last sweep is known by (address, traceback, size), so a new array placed
 * where a freed one was, by another line, is not taken for the old one. Only
 * new arrays cost more: the frames of their traceback (raw_frames(): the code
 * objects and instruction offsets JAX keeps, innermost first) become tagged
 * Python frames through python.c's location table, and their device is read.
 * An array sharded over several devices has no single buffer
 * (unsafe_buffer_pointer() refuses): it is not recorded.
 *
 * The driver allocations that hold arrays (JAX's preallocated region, the
 * regions a growing pool adds) are its cache's segments: JAX says nothing
 * of them, so the first array seen in each marks its holder
 * (segments_holder), which reports then keep apart from the lines'
 * own memory, also once the arrays are gone.
 *
 * Cost: a sweep holds the GIL for a few calls into JAX per live array. Its
 * time is measured and paid from a budget that grows by 1% of the time that
 * passes, up to BUDGET_CAP_NS: a periodic sweep (or one for a mark) is made
 * only while the budget is not spent, so sweeps take at most 1% of the
 * program's time, beyond the first BUDGET_CAP_NS of them. The sweeps for a
 * report and at the program's end are always made, and paid too.
 *
 * The end: JAX registers its own exit clean-up when it is imported, which
 * drops its backends. Our exit hook may have gone in before that, and would
 * then run after it: so when JAX is first seen imported, a second exit hook
 * goes in, which runs before JAX's and makes the last sweep. (A sweep after
 * JAX's clean-up finds no backend and is not made.)
 *
 * One sweep at a time: `lock` is only taken with the GIL held, and Python
 * may let go of the GIL in the middle of a sweep (between the bytecodes of a
 * method written in Python), so a second sweeper only tries it; the last
 * one, which must be made, waits for it with the GIL let go. */
#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "cache_blocks.h"
#include "cache_segments.h"
#include "clock.h"
#include "config.h"
#include "jax_arrays.h"
#include "kinds.h"
#include "log.h"
#include "map.h"
#include "py_api.h"
#include "python.h"
#include "run_events.h"
#include "tracker.h"

struct entry {
    uint64_t address; /* 0: an empty slot (map.h) */
    uint64_t size;
    uint64_t number; /* its record's allocation number */
    int64_t hash;    /* of its traceback; 0 without one */
    uint32_t epoch;  /* the last sweep that saw it */
};

struct seen {         /* one array of this sweep */
    uint64_t address; /* 0: not recorded (sharded, no buffer, or an error) */
    uint64_t size;
    int64_t hash;
};

enum { UNSEEN, ACTIVE, OFF };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state; /* guarded by `lock`; read without it to skip early */
static int final_done, end_hook_registered;
#define BUDGET_CAP_NS 100000000 /* 100 ms */
static int64_t budget_ns = BUDGET_CAP_NS;
static uint64_t budget_at_ns; /* when it was last topped up */
static struct map table;      /* of struct entry, by address, at most half full */
static uint32_t epoch;
static struct seen *seen;
static size_t seen_room;
static PyObject *s_pointer, *s_size, *s_traceback, *s_raw_frames, *s_devices;

/* The segments found so far (a region a device, usually), and whether this
 * sweep already looked for one in vain (a walk of every record: once). */
#define SEGMENTS 64
static struct {
    uint64_t start, end;
} segments[SEGMENTS];
static int segment_count, looked_in_vain;

/* The frames of the last few new tracebacks, by hash: the arrays a loop
 * makes share their line. */
#define FRAME_CACHE 16
static struct {
    int64_t hash;
    int depth;
    uintptr_t frames[CONFIG_MAX_DEPTH];
} frame_cache[FRAME_CACHE];

/* ---- the table of recorded arrays ------------------------------------------ */

static uint64_t address_hash(uint64_t address)
{
    return ((address >> 4) * 0x9e3779b97f4a7c15ull) >> 32;
}

static uint64_t entry_hash(const void *slot)
{
    return address_hash(((const struct entry *)slot)->address);
}

static int same_address(const void *slot, const void *address)
{
    return ((const struct entry *)slot)->address == *(const uint64_t *)address;
}

/* The entry of `address`; NULL if none. */
static struct entry *find(uint64_t address)
{
    if (!table.capacity)
        return NULL;
    struct entry *e = map_find(&table, address_hash(address), same_address, &address);
    return e->address ? e : NULL;
}

/* The slot for a new address (not in the table); NULL if out of memory. */
static struct entry *insert(uint64_t address)
{
    if (map_reserve(&table, 1, 50, 1024, sizeof(struct entry), entry_hash) < 0)
        return NULL;
    struct entry *e = map_find(&table, address_hash(address), same_address, &address);
    table.used++;
    *e = (struct entry){.address = address};
    return e;
}

/* The first array seen in a driver allocation marks it a segment. */
static void claim_segment(uint64_t address)
{
    for (int i = 0; i < segment_count; i++)
        if (address >= segments[i].start && address < segments[i].end)
            return;
    uint64_t start, size;
    if (looked_in_vain || segments_holder(KIND_JAX_ARRAY, address, &start, &size) < 0) {
        looked_in_vain = 1;
        return;
    }
    if (segment_count < SEGMENTS) {
        segments[segment_count].start = start;
        segments[segment_count++].end = start + size;
    }
}

/* ---- one array ------------------------------------------------------------- */

static uint64_t unsigned_of(PyObject *object, int *bad)
{
    unsigned long long value = object ? py.as_unsigned(object) : 0;
    if (!object || (value == (unsigned long long)-1 && py.occurred())) {
        *bad = 1;
        return 0;
    }
    return value;
}

/* Pass 1: what a sweep needs of every array, with no Python object kept. */
static struct seen read_array(PyObject *array)
{
    struct seen s = {0, 0, 0};
    int bad = 0;
    PyObject *pointer = py.call_method_object(array, s_pointer, NULL);
    PyObject *size = pointer ? py.call_method_object(array, s_size, NULL) : NULL;
    PyObject *traceback = size ? py.get_attr_object(array, s_traceback) : NULL;
    if (!traceback && py.occurred())
        py.clear();
    s.address = unsigned_of(pointer, &bad);
    s.size = unsigned_of(size, &bad);
    if (traceback) { /* None when JAX keeps none: a record with no stack */
        py_hash hash = py.hash(traceback);
        s.hash = hash == -1 ? 0 : hash;
    }
    if (bad)
        s.address = 0;
    py_release(traceback);
    py_release(size);
    py_release(pointer);
    if (py.occurred())
        py.clear();
    return s;
}

/* Its traceback as tagged Python frames, innermost first. */
static int frames_of(PyObject *array, int64_t hash, uintptr_t *frames)
{
    unsigned slot = (unsigned)((uint64_t)hash % FRAME_CACHE);
    if (hash && frame_cache[slot].hash == hash) {
        memcpy(frames, frame_cache[slot].frames, frame_cache[slot].depth * sizeof(*frames));
        return frame_cache[slot].depth;
    }
    PyObject *traceback = py.get_attr_object(array, s_traceback);
    PyObject *raw = traceback ? py.call_method_object(traceback, s_raw_frames, NULL) : NULL;
    PyObject *codes = raw ? py.tuple_item(raw, 0) : NULL; /* borrowed */
    PyObject *offsets = codes ? py.tuple_item(raw, 1) : NULL;
    py_ssize n = offsets ? py.list_size(codes) : 0;
    if (n > 0 && py.list_size(offsets) < n)
        n = py.list_size(offsets);
    int depth = 0;
    for (py_ssize i = 0; i < n && depth < CONFIG_MAX_DEPTH; i++) {
        long offset = py.as_long(py.list_item(offsets, i));
        if (offset == -1 && py.occurred()) {
            py.clear();
            continue;
        }
        uintptr_t frame = python_frame_at(py.list_item(codes, i), (int)offset);
        if (frame)
            frames[depth++] = frame;
    }
    py_release(raw);
    py_release(traceback);
    if (py.occurred())
        py.clear();
    if (hash) {
        frame_cache[slot].hash = hash;
        frame_cache[slot].depth = depth;
        memcpy(frame_cache[slot].frames, frames, depth * sizeof(*frames));
    }
    return depth;
}

/* The CUDA ordinal of the array's one device (jax.Device.local_hardware_id,
 * else its id); -1 if not known. */
static int device_of(PyObject *array)
{
    PyObject *devices = py.call_method_object(array, s_devices, NULL);
    PyObject *iterator = devices ? py.get_iter(devices) : NULL;
    PyObject *device = iterator ? py.iter_next(iterator) : NULL;
    long ordinal = -1;
    const char *names[] = {"local_hardware_id", "id"};
    for (int i = 0; i < 2 && device && ordinal < 0; i++) {
        PyObject *number = py_attr(device, names[i]);
        ordinal = number ? py.as_long(number) : -1;
        if (ordinal == -1 && py.occurred())
            py.clear();
        py_release(number);
    }
    py_release(device);
    py_release(iterator);
    py_release(devices);
    if (py.occurred())
        py.clear();
    return ordinal >= 0 && ordinal < 127 ? (int)ordinal : -1;
}

/* ---- a sweep --------------------------------------------------------------- */

static int names_made(void)
{
    if (!s_pointer) {
        s_pointer = py.intern("unsafe_buffer_pointer");
        s_size = py.intern("on_device_size_in_bytes");
        s_traceback = py.intern("traceback");
        s_raw_frames = py.intern("raw_frames");
        s_devices = py.intern("devices");
    }
    if (s_pointer && s_size && s_traceback && s_raw_frames && s_devices)
        return 1;
    py.clear();
    return 0;
}

static int room_for(py_ssize n)
{
    size_t want = n > 0 ? (size_t)n : 1;
    if (want <= seen_room)
        return 1;
    size_t room = seen_room ? seen_room : 4096;
    while (room < want)
        room *= 2;
    struct seen *bigger = pages_grow(seen, seen_room * sizeof(*seen), room * sizeof(*seen));
    if (!bigger)
        return 0;
    seen = bigger;
    seen_room = room;
    return 1;
}

/* Whether JAX's backends are up: only then may it be called. */
static int backends_up(void)
{
    PyObject *bridge = py_imported("jax._src.xla_bridge");
    PyObject *check = py_attr(bridge, "backends_are_initialized");
    PyObject *answer = check ? py.call_function(check, NULL) : py_attr(bridge, "_backends");
    int up = answer && py.is_true(answer) == 1;
    py_release(answer);
    py_release(check);
    if (py.occurred())
        py.clear();
    return up;
}

/* The live arrays made records, and the records of the arrays gone ended.
 * Lock held. */
static void sweep(PyObject *jax)
{
    static int listed_once;
    uint64_t start = monotonic_ns();
    PyObject *arrays = py.call_method(jax, "live_arrays", "s", "gpu");
    py_ssize n = arrays ? py.list_size(arrays) : -1;
    if (n < 0 || !room_for(n) || !names_made()) {
        if (py.occurred())
            py.clear();
        py_release(arrays);
        if (!__atomic_exchange_n(&listed_once, 1, __ATOMIC_RELAXED))
            log_debug("jax.live_arrays(\"gpu\") gave no list: JAX's arrays are not traced");
        return;
    }
    if (++epoch == 0)
        epoch = 1;
    /* Every array first, so that one already recorded is kept whichever of
     * the arrays sharing its buffer comes first. */
    for (py_ssize i = 0; i < n; i++) {
        seen[i] = read_array(py.list_item(arrays, i));
        struct entry *e = seen[i].address ? find(seen[i].address) : NULL;
        if (e && e->hash == seen[i].hash && e->size == seen[i].size)
            e->epoch = epoch;
    }
    unsigned added = 0, gone = 0, elsewhere = 0;
    uintptr_t frames[CONFIG_MAX_DEPTH];
    looked_in_vain = 0;
    tracker_cache_sweep(1);
    for (py_ssize i = 0; i < n; i++) {
        if (!seen[i].address) {
            elsewhere++;
            continue;
        }
        struct entry *e = find(seen[i].address);
        if (e && e->epoch == epoch)
            continue;
        if (!e && !(e = insert(seen[i].address)))
            continue;
        cache_blocks_free_if(e->address, e->number); /* another array there before */
        PyObject *array = py.list_item(arrays, i);
        int depth = frames_of(array, seen[i].hash, frames);
        e->number = cache_blocks_alloc_with_frames(KIND_JAX_ARRAY, device_of(array),
                                                   seen[i].address, seen[i].size, frames, depth);
        e->size = seen[i].size;
        e->hash = seen[i].hash;
        e->epoch = epoch;
        claim_segment(seen[i].address);
        added++;
    }
    for (uint32_t i = 0; i < table.capacity;) {
        struct entry *e = map_slot(&table, i);
        if (e->address && e->epoch != epoch) {
            cache_blocks_free_if(e->address, e->number);
            map_remove(&table, e, entry_hash); /* another entry may have moved into slot i */
            gone++;
            continue;
        }
        i++;
    }
    tracker_cache_sweep(0);
    py_release(arrays);
    if (state == UNSEEN) {
        __atomic_store_n(&state, ACTIVE, __ATOMIC_RELAXED);
        run_cache_view(KIND_JAX_ARRAY, CACHE_BLOCKS, "");
    }
    uint64_t cost = monotonic_ns() - start;
    budget_ns -= (int64_t)cost;
    log_debug("JAX: %ld live arrays swept in %.3f ms: %u new, %u gone, %u with no one buffer",
              (long)n, cost / 1e6, added, gone, elsewhere);
}

/* ---- when ------------------------------------------------------------------ */

/* Whether the budget allows a periodic sweep now. Lock held. */
static int affordable(void)
{
    uint64_t now = monotonic_ns();
    if (budget_at_ns) {
        budget_ns += (int64_t)((now - budget_at_ns) / 100);
        if (budget_ns > BUDGET_CAP_NS)
            budget_ns = BUDGET_CAP_NS;
    }
    budget_at_ns = now;
    return budget_ns > 0;
}

static PyObject *end_hook(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *type, *value, *traceback;
    py.fetch(&type, &value, &traceback);
    jax_arrays_sweep(JAX_SWEEP_END);
    py.clear();
    py.restore(type, value, traceback);
    return py.build_value(""); /* None */
}

static struct py_method_def end_hook_def =
    {"cumemtrace_jax_end", end_hook, PY_METH_NOARGS,
     "cumemtrace: the last sweep of JAX's arrays, before JAX's own exit clean-up"};

/* atexit.register(end_hook), once JAX is imported: it runs before JAX's. */
static void register_end_hook(void)
{
    end_hook_registered = 1;
    PyObject *atexit = py.import("atexit");
    PyObject *function = atexit ? py.new_function(&end_hook_def, NULL, NULL) : NULL;
    PyObject *done = function ? py.call_method(atexit, "register", "O", function) : NULL;
    py_release(done);
    py_release(function);
    py_release(atexit);
    if (py.occurred())
        py.clear();
}

/* With the GIL: `lock`, or 0 if another sweep holds it and `wait` is 0. */
static int take_lock(int wait)
{
    if (pthread_mutex_trylock(&lock) == 0)
        return 1;
    if (!wait)
        return 0;
    void *thread = py.save_thread();
    pthread_mutex_lock(&lock);
    py.restore_thread(thread);
    return 1;
}

void jax_arrays_sweep(int when)
{
    int now_state = __atomic_load_n(&state, __ATOMIC_RELAXED);
    if (now_state == OFF || py_api_load() < 0)
        return;
    PyObject *jax = py_imported("jax");
    if (!jax || !take_lock(when == JAX_SWEEP_END))
        return;
    if (state == OFF || (when == JAX_SWEEP_END && final_done)) {
        pthread_mutex_unlock(&lock);
        return;
    }
    if (!config.frameworks) {
        __atomic_store_n(&state, OFF, __ATOMIC_RELAXED);
        run_cache_view(KIND_JAX_ARRAY, CACHE_SEGMENTS, "CUMEMTRACE_FRAMEWORKS=0");
    } else {
        if (!end_hook_registered && when != JAX_SWEEP_END)
            register_end_hook();
        if ((when != JAX_SWEEP_TICK || affordable()) && backends_up())
            sweep(jax);
        if (when == JAX_SWEEP_END)
            final_done = 1;
    }
    pthread_mutex_unlock(&lock);
}

int jax_arrays_active(void)
{
    return __atomic_load_n(&state, __ATOMIC_RELAXED) == ACTIVE;
}

/* The child's records start empty (tracker_fork_child): so does our table;
 * the view is said again, the tracker's copy of it being reset too. A
 * forked Python program goes on, and ends, on its own. */
void jax_arrays_after_fork(void)
{
    pthread_mutex_init(&lock, NULL);
    map_clear(&table);
    segment_count = 0;
    final_done = 0;
    budget_ns = BUDGET_CAP_NS;
    budget_at_ns = 0;
    if (state == ACTIVE)
        run_cache_view(KIND_JAX_ARRAY, CACHE_BLOCKS, "");
    else if (state == OFF)
        run_cache_view(KIND_JAX_ARRAY, CACHE_SEGMENTS, "CUMEMTRACE_FRAMEWORKS=0");
}
