/* python.c - the Python lines behind an allocation, when the host is CPython.
 *
 * When the allocating thread holds the GIL, the Python stack is walked with
 * the stable C API (PyEval_GetFrame, PyFrame_GetBack, PyFrame_GetCode,
 * PyFrame_GetLineNumber), resolved at run time with dlsym: libpython is never
 * linked, and a process without Python pays one failed lookup. Works on
 * CPython 3.9 and later (these functions exist from 3.9 on).
 *
 * Each (code object, line) becomes a location: file, function and line,
 * copied once and kept in a table; the code object is kept alive so its
 * address is never reused for another. A Python frame enters the stack as a
 * tagged value (PYTHON_FRAME_TAG | location id), which no return address can
 * be, so stacks with Python frames are hashed, deduplicated and stored like
 * any other. The Python frames take the place of the interpreter's own
 * native frames: the native stack is cut at the first frame inside the
 * interpreter and the Python frames follow, innermost first, as in PyTorch's
 * combined tracebacks. CUMEMTRACE_PYTHON=0 turns all this off. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "config.h"
#include "modules.h"
#include "python.h"

typedef struct _object PyObject;

static struct {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    PyObject *(*get_frame)(void);
    PyObject *(*frame_back)(PyObject *);
    PyObject *(*frame_code)(PyObject *);
    int (*frame_line)(PyObject *);
    PyObject *(*get_attr)(PyObject *, const char *);
    const char *(*as_utf8)(PyObject *);
    void (*decref)(PyObject *);
    void (*incref)(PyObject *);
} py;

static int available;              /* -1 no, 1 yes, 0 not looked yet */
static uintptr_t interpreter_low, interpreter_high;

/* Locations: an array indexed by id - 1, and an open-addressing index by
 * (code, line). Guarded by `lock` (the GIL serialises capture, but reports
 * read the table from other threads). */
struct location_key {
    uintptr_t code;
    int line;
    uint32_t id;
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct python_location *locations;
static uint32_t location_count, location_capacity;
static struct location_key *index_slots;
static uint32_t index_capacity;
static char *strings;
static size_t strings_used, strings_size;

static void look_up(void)
{
    void **slots[] = {(void **)&py.is_initialized, (void **)&py.gil_check,
                      (void **)&py.get_frame,      (void **)&py.frame_back,
                      (void **)&py.frame_code,     (void **)&py.frame_line,
                      (void **)&py.get_attr,       (void **)&py.as_utf8,
                      (void **)&py.decref,         (void **)&py.incref};
    const char *names[] = {"Py_IsInitialized", "PyGILState_Check", "PyEval_GetFrame",
                           "PyFrame_GetBack", "PyFrame_GetCode", "PyFrame_GetLineNumber",
                           "PyObject_GetAttrString", "PyUnicode_AsUTF8", "Py_DecRef",
                           "Py_IncRef"};
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *slots[i] = dlsym(RTLD_DEFAULT, names[i]);
        if (!*slots[i]) {
            available = -1;
            return;
        }
    }
    module_range((const void *)py.get_frame, &interpreter_low, &interpreter_high);
    available = 1;
}

static const char *keep(const char *s)
{
    size_t n = strlen(s) + 1;
    if (strings_used + n > strings_size) {
        size_t size = n > (1u << 20) ? n : (1u << 20);
        char *pages = pages_alloc(size);     /* old pages stay: strings never move */
        if (!pages)
            return "?";
        strings = pages;
        strings_used = 0;
        strings_size = size;
    }
    char *copy = strings + strings_used;
    memcpy(copy, s, n);
    strings_used += n;
    return copy;
}

static int grow(void)
{
    if (location_count + 1 >= location_capacity) {
        uint32_t capacity = location_capacity ? location_capacity * 2 : 1024;
        void *p = pages_grow(locations, location_capacity * sizeof(*locations),
                             capacity * sizeof(*locations));
        if (!p)
            return -1;
        locations = p;
        location_capacity = capacity;
    }
    if ((location_count + 1) * 10 >= index_capacity * 7) {
        uint32_t capacity = index_capacity ? index_capacity * 2 : 2048;
        struct location_key *slots = pages_alloc(capacity * sizeof(*slots));
        if (!slots)
            return -1;
        for (uint32_t i = 0; i < index_capacity; i++) {
            if (!index_slots[i].id)
                continue;
            uint32_t j = (uint32_t)((index_slots[i].code >> 4) ^ (uint32_t)index_slots[i].line * 2654435761u) & (capacity - 1);
            while (slots[j].id)
                j = (j + 1) & (capacity - 1);
            slots[j] = index_slots[i];
        }
        pages_free(index_slots, index_capacity * sizeof(*index_slots));
        index_slots = slots;
        index_capacity = capacity;
    }
    return 0;
}

static const char *attribute(PyObject *code, const char *name)
{
    PyObject *value = py.get_attr(code, name);
    const char *text = value ? py.as_utf8(value) : NULL;
    const char *kept = keep(text ? text : "?");
    if (value)
        py.decref(value);
    return kept;
}

/* The id of (code, line), adding it if new; 0 if out of memory. GIL held. */
static uint32_t location_of(PyObject *code, int line)
{
    uintptr_t key = (uintptr_t)code;
    pthread_mutex_lock(&lock);
    uint32_t id = 0;
    if (grow() == 0) {
        uint32_t j = (uint32_t)((key >> 4) ^ (uint32_t)line * 2654435761u) & (index_capacity - 1);
        for (; index_slots[j].id; j = (j + 1) & (index_capacity - 1))
            if (index_slots[j].code == key && index_slots[j].line == line) {
                id = index_slots[j].id;
                break;
            }
        if (!id) {
            struct python_location *l = &locations[location_count];
            l->file = attribute(code, "co_filename");
            l->function = attribute(code, "co_name");
            l->line = line;
            py.incref(code);            /* its address stays this code's */
            id = ++location_count;
            index_slots[j].code = key;
            index_slots[j].line = line;
            index_slots[j].id = id;
        }
    }
    pthread_mutex_unlock(&lock);
    return id;
}

int python_capture(uintptr_t *frames, int depth, int max)
{
    if (!config.python)
        return depth;
    if (!available)
        look_up();
    if (available < 0 || !py.is_initialized() || !py.gil_check())
        return depth;

    /* Cut the native stack at the interpreter. */
    int cut = depth;
    for (int i = 0; i < depth; i++)
        if (frames[i] >= interpreter_low && frames[i] < interpreter_high) {
            cut = i;
            break;
        }
    PyObject *frame = py.get_frame();       /* borrowed */
    if (!frame)
        return depth;
    py.incref(frame);
    int n = cut;
    while (frame && n < max) {
        PyObject *code = py.frame_code(frame);
        uint32_t id = code ? location_of(code, py.frame_line(frame)) : 0;
        if (code)
            py.decref(code);
        if (id)
            frames[n++] = PYTHON_FRAME_TAG | id;
        PyObject *back = py.frame_back(frame);  /* new reference */
        py.decref(frame);
        frame = back;
    }
    if (frame)
        py.decref(frame);
    return n > cut ? n : depth;
}

const struct python_location *python_location(uintptr_t tagged)
{
    if ((tagged & PYTHON_FRAME_MASK) != PYTHON_FRAME_TAG)
        return NULL;
    uint32_t id = (uint32_t)(tagged & ~PYTHON_FRAME_MASK);
    pthread_mutex_lock(&lock);
    const struct python_location *l = id >= 1 && id <= location_count ? &locations[id - 1] : NULL;
    pthread_mutex_unlock(&lock);
    return l;
}

uint32_t python_location_count(void)
{
    return location_count;
}

const struct python_location *python_location_at(uint32_t id)
{
    return id >= 1 && id <= location_count ? &locations[id - 1] : NULL;
}
