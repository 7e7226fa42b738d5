/* python.c - the Python lines behind an allocation, when the host is CPython.
 *
 * PyTorch, CuPy and JAX release the GIL before they reach the allocator, so
 * the Python stack of the allocating thread has to be read without the GIL.
 * That is safe for the thread's own frames: only the thread itself changes
 * its frame chain, and it is busy calling us. So on CPython 3.10 to 3.14 the
 * chain is walked directly, from PyGILState_GetThisThreadState() (the thread's
 * own state, kept in thread-local storage) through the interpreter's frame
 * structures: from 3.13 on at the offsets the interpreter publishes about
 * itself (python_offsets.c), before that at those python_layout.h lists per
 * version (and for a 3.13 whose published record is not right). Reading never
 * allocates, never takes a reference and never calls the interpreter except
 * PyCode_Addr2Line, a pure function of the immutable code object. Every code
 * object and string is checked against the interpreter's own type objects;
 * the first walk in a process reads through process_vm_readv, so a layout
 * that is not what we expect costs a message, not a crash.
 *
 * Other versions (3.9, a release whose record we do not know, a
 * free-threaded build) get the stable C API (PyEval_GetFrame,
 * PyFrame_GetBack, ...) when the thread holds the GIL, and nothing otherwise.
 * All symbols are resolved at run time with the dlsym the interposer lends
 * (host.h): libpython is never linked, and a process without Python pays
 * one failed lookup.
 *
 * Each (code object, instruction offset) maps to a location: file, function,
 * line, copied once into a table. A Python frame enters the stack as a tagged
 * value (PYTHON_FRAME_TAG | location id), which no return address can be, so
 * stacks with Python frames are hashed, deduplicated and stored like any
 * other. The Python frames take the place of the interpreter's native frames:
 * the native stack is cut at its first frame inside the interpreter and the
 * Python frames follow, innermost first, as in PyTorch's combined tracebacks
 * and py-spy --native. CUMEMTRACE_PYTHON=0 turns all this off. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "arena.h"
#include "clock.h"
#include "config.h"
#include "host.h"
#include "hot_path.h"
#include "log.h"
#include "map.h"
#include "modules.h"
#include "python.h"
#include "python_layout.h"
#include "python_locations.h"
#include "python_offsets.h"
#include "stacks.h"

typedef struct _object PyObject;

static struct {
    int (*is_initialized)(void);
    const char *(*version)(void);
    void *(*this_thread_state)(void);
    int (*address_to_line)(const void *code, int offset);
    const void *code_type, *unicode_type;
    /* The C API, for versions without a layout, with the GIL only. */
    int (*gil_check)(void);
    PyObject *(*get_frame)(void);
    PyObject *(*frame_back)(PyObject *);
    PyObject *(*frame_code)(PyObject *);
    int (*frame_line)(PyObject *);
    PyObject *(*get_attr)(PyObject *, const char *);
    const char *(*as_utf8)(PyObject *);
    void (*decref)(PyObject *);
    void (*incref)(PyObject *);
    /* Watching code objects (3.12 on), with the GIL. */
    int (*add_code_watcher)(int (*)(int, void *));
    int (*clear_code_watcher)(int);
    const void *(*thread_interpreter)(const void *);
    void (*clear_error)(void);
} py;

static int available;                      /* -1 no, 1 yes, 0 not looked yet */
static int c_api;                          /* every C API function of the fallback was found */
static const struct python_layout *layout; /* NULL: the C API, GIL only */
static struct python_layout published;     /* the interpreter's own, 3.13 on */
static int validated;                      /* a walk through checked reads succeeded */
static int foreign;                        /* walking another thread's frames: every read checked */
static const char *main_state;             /* the main thread's state, seen when it allocated */
static pid_t process_id;         /* getpid() is a system call: read once, and after fork */
static __thread int thread_role; /* 0 not known yet, THREAD_MAIN or THREAD_OTHER */
enum { THREAD_MAIN = 1, THREAD_OTHER = 2 };
static uintptr_t interpreter_low, interpreter_high;
static const char *python_runtime; /* _PyRuntime, where exported */

/* What a walk of a thread's own frames reads of the layout at every event
 * (walk_own, own_first_frame), on one cache line: the layout's fields lie on
 * three, two of which a walk missed in cache at every tensor (callgrind,
 * bench/torch_tensors.py). Frames' owners: 3.10's have none (owner_mask 0);
 * from 3.12 on, owners from `shim` up are shims (frame_offset says which),
 * and 3.11 has none (256: no owner is one). `cframe`: 3.11 and 3.12 reach
 * the frame through a _PyCFrame. Set with the layout, before any walk. The
 * offsets fit 16 bits: python_offsets.c bounds the published ones, and the
 * table's are below 1 KiB. */
static struct {
    _Alignas(64) uintptr_t code_tag_bits;
    uint16_t tstate_frame, cframe_frame, code, instruction, owner, previous, filename, version;
    uint16_t shim;
    unsigned char owner_mask, cframe, keyed;
    /* The thread's state read with no call into the interpreter (0: not
     * checked yet, 1: read so, -1: not); direct_check says how. */
    signed char direct;
    uint32_t tss_key; /* a pthread_key_t */
    const int *initialized;
    /* python_watch_code's: the threads of `watched` (an interpreter; NULL:
     * none) key their frames by the code objects freed so far, not by
     * their filenames. code_frees is written by the watcher at each code
     * object freed: seldom, once a program has started. */
    uint64_t code_frees;
    const char *watched;
} own;
_Static_assert(sizeof(own) <= 64, "what a walk reads of the layout is one cache line");
_Static_assert(sizeof(pthread_key_t) == sizeof(own.tss_key), "a Py_tss_t's key");

static void own_offsets(const struct python_layout *l)
{
    own.code_tag_bits = l->code_tag_bits;
    own.tstate_frame = (uint16_t)l->tstate_frame;
    own.cframe_frame = (uint16_t)l->cframe_frame;
    own.code = (uint16_t)l->frame_code;
    own.instruction = (uint16_t)l->frame_instruction;
    own.owner = (uint16_t)l->frame_owner;
    own.previous = (uint16_t)l->frame_previous;
    own.filename = (uint16_t)l->code_filename;
    own.version = (uint16_t)l->code_version;
    own.shim = l->minor >= 12 ? 3 : 256;
    own.owner_mask = l->minor >= 11 ? 0xff : 0;
    own.cframe = l->minor == 11 || l->minor == 12;
    own.keyed = l->minor >= 11;
}

/* The walker's lock: the location table (python_locations.h), which it
 * serializes, and the reading of another thread's frames. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- finding the interpreter ------------------------------------------------- */

static int resolve(void **slot, const char *name)
{
    *slot = host.lookup ? host.lookup(RTLD_DEFAULT, name) : NULL;
    return *slot != NULL;
}

static int peek_checked(const char *address, void *out, size_t size);

/* Whether the table's row gives every offset the published record gives, as
 * it does: then it may add the ones the record lacks (the code object's
 * layout is fixed within a minor version). */
static int row_agrees(const struct python_layout *row, const struct python_layout *p)
{
    return row->tstate_frame == p->tstate_frame && row->cframe_frame == p->cframe_frame &&
           row->frame_code == p->frame_code && row->frame_previous == p->frame_previous &&
           row->frame_instruction == p->frame_instruction && row->frame_owner == p->frame_owner &&
           row->code_filename == p->code_filename && row->code_name == p->code_name &&
           row->code_start == p->code_start && row->ascii_size == p->ascii_size &&
           row->compact_size == p->compact_size && row->compact_utf8 == p->compact_utf8 &&
           row->string_state == p->string_state && row->string_length == p->string_length &&
           row->code_tag_bits == p->code_tag_bits;
}

/* The interpreter's own offsets where it publishes them (3.13 on) and they
 * hold up, else the table's row for its version, else none (the C API, with
 * the GIL only); a record not as expected is said once, here. _PyRuntime is
 * read through a checked read: a symbol of that name that is something else
 * must not crash us. */
static void choose_layout(void)
{
    int major = 0, minor = 0;
    if (sscanf(py.version(), "%d.%d", &major, &minor) != 2)
        return;
    void *free_threaded; /* 3.13t: another object header, no GIL at all */
    if (resolve(&free_threaded, "_Py_MergeZeroLocalRefcount"))
        return;
    const struct python_layout *row = python_layout_row(major, minor);
    void *runtime;
    if (resolve(&runtime, "_PyRuntime"))
        python_runtime = runtime;
    if ((major > 3 || minor >= 13) && python_runtime) {
        unsigned char record[PYTHON_OFFSETS_BYTES];
        const char *why = "_PyRuntime cannot be read";
        if (peek_checked(python_runtime, record, sizeof(record)) == 0 &&
            python_offsets_read(record, major, minor, &published, &why) == 0) {
            if (row && row_agrees(row, &published)) {
                published.code_first_traceable = row->code_first_traceable;
                published.code_version = row->code_version;
                published.runtime_tss = row->runtime_tss;
                published.runtime_initialized = row->runtime_initialized;
            }
            layout = &published;
            log_debug("CPython %d.%d: Python frames at the offsets it publishes", major, minor);
            return;
        }
        log_line("CPython %d.%d: the structure offsets it publishes are not as expected (%s); %s",
                 major, minor, why,
                 row ? "Python frames at the offsets known for it"
                     : "Python frames only for threads that hold the GIL");
        layout = row;
        return;
    }
    layout = row;
    if (layout)
        log_debug("CPython %d.%d: Python frames at the offsets known for it", major, minor);
    else
        log_line("CPython %d.%d: Python frames only for threads that hold the GIL "
                 "(frame layouts known for 3.10 to 3.12, and from the interpreter itself "
                 "from 3.13 on)",
                 major, minor);
}

static void look_up(void)
{
    available = -1;
    process_id = getpid();
    if (!resolve((void **)&py.is_initialized, "Py_IsInitialized") ||
        !resolve((void **)&py.version, "Py_GetVersion"))
        return;
    module_range((const void *)py.is_initialized, &interpreter_low, &interpreter_high);
    if (resolve((void **)&py.this_thread_state, "PyGILState_GetThisThreadState") &&
        resolve((void **)&py.address_to_line, "PyCode_Addr2Line") &&
        resolve((void **)&py.code_type, "PyCode_Type") &&
        resolve((void **)&py.unicode_type, "PyUnicode_Type"))
        choose_layout();
    if (layout)
        own_offsets(layout);
    void **slots[] = {(void **)&py.gil_check,  (void **)&py.get_frame,  (void **)&py.frame_back,
                      (void **)&py.frame_code, (void **)&py.frame_line, (void **)&py.get_attr,
                      (void **)&py.as_utf8,    (void **)&py.decref,     (void **)&py.incref};
    const char *names[] = {"PyGILState_Check",
                           "PyEval_GetFrame",
                           "PyFrame_GetBack",
                           "PyFrame_GetCode",
                           "PyFrame_GetLineNumber",
                           "PyObject_GetAttrString",
                           "PyUnicode_AsUTF8",
                           "Py_DecRef",
                           "Py_IncRef"};
    c_api = 1;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!resolve(slots[i], names[i]))
            c_api = 0;
    /* 3.12 on; absent before, and then nothing is watched. */
    if (!resolve((void **)&py.add_code_watcher, "PyCode_AddWatcher") ||
        !resolve((void **)&py.clear_code_watcher, "PyCode_ClearWatcher") ||
        !resolve((void **)&py.thread_interpreter, "PyThreadState_GetInterpreter") ||
        !resolve((void **)&py.clear_error, "PyErr_Clear"))
        py.add_code_watcher = NULL;
    if (layout || c_api)
        available = 1;
}

/* ---- reading the interpreter's structures ------------------------------------ */

/* A pointer-sized or smaller read. Until one walk has succeeded, and always
 * in another thread's frames, reads go through process_vm_readv, which fails
 * cleanly on an unmapped address; otherwise the layout is trusted and reads
 * are plain loads, inlined: a walk makes a hundred of them. */
static int peek_checked(const char *address, void *out, size_t size)
{
    struct iovec local = {out, size}, remote = {(void *)address, size};
    ssize_t n = process_vm_readv(process_id, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)size)
        return 0;
    if (n < 0 && errno != EFAULT) { /* not allowed here (seccomp): trust the layout */
        memcpy(out, address, size);
        return 0;
    }
    return -1;
}

static inline int peek(const char *address, void *out, size_t size)
{
    if (validated && !foreign) {
        memcpy(out, address, size);
        return 0;
    }
    return peek_checked(address, out, size);
}

static inline const char *pointer_at(const char *base, size_t offset, int *bad)
{
    const char *p = NULL;
    if (!base || peek(base + offset, &p, sizeof(p)) < 0)
        *bad = 1;
    return p;
}

static inline int is_a(const char *object, const void *type, int *bad)
{
    return object && pointer_at(object, sizeof(void *), bad) == type;
}

/* A str object's text, copied into the string store. */
static const char *string_of(const char *object, int *bad)
{
    uint32_t state = 0;
    int64_t length = 0;
    if (!is_a(object, py.unicode_type, bad) ||
        peek(object + layout->string_state, &state, sizeof(state)) < 0 ||
        peek(object + layout->string_length, &length, sizeof(length)) < 0 || length < 0) {
        *bad = 1;
        return "?";
    }
    if (!(state & 0x20)) /* not compact: legacy */
        return "?";
    if (state & 0x40 && foreign) { /* ASCII, read with checks */
        char text[1024];
        if (length >= (int64_t)sizeof(text) || peek(object + layout->ascii_size, text, length) < 0)
            return "?";
        return locations_keep(text, (size_t)length);
    }
    if (state & 0x40) /* ASCII: the text follows */
        return length < 4096 ? locations_keep(object + layout->ascii_size, (size_t)length) : "?";
    if (foreign)
        return "?"; /* not worth unchecked reads */
    const char *utf8 = pointer_at(object, layout->compact_utf8, bad);
    if (utf8)
        return locations_keep(utf8, strlen(utf8));
    unsigned kind = (state >> 2) & 7; /* 1, 2 or 4 bytes a character */
    const unsigned char *data = (const unsigned char *)object + layout->compact_size;
    char text[1024];
    size_t used = 0;
    for (int64_t i = 0; i < length && used + 4 < sizeof(text); i++) {
        uint32_t c = kind == 1   ? data[i]
                     : kind == 2 ? ((const uint16_t *)data)[i]
                                 : ((const uint32_t *)data)[i];
        if (c < 0x80) {
            text[used++] = (char)c;
        } else if (c < 0x800) {
            text[used++] = (char)(0xc0 | c >> 6);
            text[used++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            text[used++] = (char)(0xe0 | c >> 12);
            text[used++] = (char)(0x80 | ((c >> 6) & 0x3f));
            text[used++] = (char)(0x80 | (c & 0x3f));
        } else {
            text[used++] = (char)(0xf0 | c >> 18);
            text[used++] = (char)(0x80 | ((c >> 12) & 0x3f));
            text[used++] = (char)(0x80 | ((c >> 6) & 0x3f));
            text[used++] = (char)(0x80 | (c & 0x3f));
        }
    }
    return locations_keep(text, used);
}

/* The byte offset of the instruction a frame is at; 0 for a frame that is
 * not a Python function's (a C-stack shim, one still being set up). */
static int frame_offset(const char *frame, const char *code, int *offset, int *bad)
{
    char owner = 0;
    if (layout->minor >= 11 && peek(frame + layout->frame_owner, &owner, 1) < 0)
        *bad = 1;
    /* 3.12, 3.13: 3 is FRAME_OWNED_BY_CSTACK; 3.14: 3 is the interpreter's
     * entry shim, 4 the C stack's. Neither is a Python function's. */
    if (*bad || (layout->minor >= 12 && owner >= 3))
        return 0;
    if (!is_a(code, py.code_type, bad)) {
        *bad = 1;
        return 0;
    }
    if (layout->minor == 10) {
        int lasti = 0;
        if (peek(frame + layout->frame_instruction, &lasti, sizeof(lasti)) < 0)
            *bad = 1;
        *offset = lasti < 0 ? -1 : lasti * 2;
        return !*bad;
    }
    int first_traceable = 0;
    const char *instruction = pointer_at(frame, layout->frame_instruction, bad);
    if (layout->code_first_traceable && /* else only an instruction before the code */
        peek(code + layout->code_first_traceable, &first_traceable, sizeof(int)) < 0)
        *bad = 1;
    const char *start = code + layout->code_start;
    if (*bad || (owner != 1 && instruction < start + 2 * first_traceable)) /* incomplete */
        return 0;
    *offset = (int)(instruction - start);
    return 1;
}

/* The location id of a frame at `offset` in `code`; 0 if out of memory. */
static uint32_t location_at(const char *code, int offset, int *bad)
{
    uintptr_t check = (uintptr_t)pointer_at(code, layout->code_filename, bad);
    uint32_t version = 0;
    if (layout->code_version && peek(code + layout->code_version, &version, sizeof(version)) < 0)
        *bad = 1;
    if (*bad)
        return 0;
    uint32_t id = locations_known((uintptr_t)code, check, version, offset);
    if (id)
        return id; /* nearly always */
    if (locations_reserve() < 0)
        return 0;
    int line = py.address_to_line(code, offset);
    id = locations_known((uintptr_t)code, check, version, LOCATIONS_LINE | line);
    if (!id) {
        const char *file = string_of((const char *)check, bad);
        const char *function = string_of(pointer_at(code, layout->code_name, bad), bad);
        if (*bad)
            return 0;
        id = locations_enter((uintptr_t)code, check, version, LOCATIONS_LINE | line,
                             locations_new(file, function, line));
    }
    return locations_enter((uintptr_t)code, check, version, offset, id);
}

static const char *first_frame(const char *thread_state, int *bad)
{
    const char *frame = pointer_at(thread_state, layout->tstate_frame, bad);
    if (layout->minor == 11 || layout->minor == 12)
        frame = pointer_at(frame, layout->cframe_frame, bad);
    return frame;
}

/* What decided a frame's location in this thread's last walks: a table
 * direct-mapped by code object and instruction, whose location is a pure
 * function of them. A model's forward comes back to the same few hundred
 * call sites from one tensor to the next (and a table keyed by frame
 * address as well held each site once per depth it was reached at, and
 * missed). Two ways a set, the newer first, so that two sites that hash
 * alike do not evict each other at every tensor; a set is one cache line.
 * Per thread: no lock, and only this thread's frames; ids are never taken
 * back, and the location table is copied whole across fork, so an entry
 * stays valid in a forked child too. An entry's code is never NULL. 16 KiB
 * in static TLS, which the C library zeroes for each thread it creates.
 * `where`: frame_word's (3.10's frames' owner is always 0), so that the
 * code's version (struct location_key) fits beside the id in 32 bytes, two
 * entries to a cache line. */
#define MEMO_BITS 8
struct frame_memo {
    const char *code, *check;
    uintptr_t where;
    uint32_t id, version;
};
_Static_assert(sizeof(struct frame_memo) == 32, "a set of the memo is one cache line");
static __thread _Alignas(64) struct frame_memo memo[1 << MEMO_BITS][2];

static inline const char *load_pointer(const char *address)
{
    const char *p;
    memcpy(&p, address, sizeof(p));
    return p;
}

/* One word for where a frame is: its instruction (3.10: f_lasti and the
 * field after it) with its owner in the top byte, which a user-space
 * address leaves clear. The memo's entries and the key's words alike. */
static inline uintptr_t frame_word(const char *instruction, unsigned owner)
{
    return (uintptr_t)instruction | (uintptr_t)owner << 56;
}

static inline struct frame_memo *memo_set(const char *code, const char *instruction)
{
    uint64_t h = ((uint64_t)(uintptr_t)code ^ (uint64_t)(uintptr_t)instruction << 16) *
                 0x9e3779b97f4a7c15ull;
    return memo[h >> (64 - MEMO_BITS)];
}

/* `code`'s co_version by a plain load, as walk_own reads it; `version_at`
 * is the layout's code_version, and where that is 0 (no version known) the
 * version is 0 too, as location_at takes it. */
static inline uint32_t load_version(const char *code, size_t version_at)
{
    uint32_t version = 0;
    if (version_at)
        memcpy(&version, code + version_at, sizeof(version));
    return version;
}

/* The id of a frame of `code` at `where` (its instruction and owner, struct
 * frame_memo) if memo entry `m` is for the same code at the same instruction
 * (the same byte offset then: 3.11 on keep the instructions inside the code
 * object, 3.10's f_lasti is the offset itself), with the same owner, the
 * same filename object and the same version; 0 otherwise.
 * The entry was made by the full path, which found `code` a code object
 * whose frame was complete at that instruction. If it is the same code
 * object, the full path would find so again: a live frame of this thread
 * holds a code object (a C stack's shim, which may not, is skipped before),
 * and whether a frame is complete depends only on its code, its instruction
 * and its owner. Whether it is the same code object, not one compiled at its
 * address after it was freed, is what the filename and the version tell, as
 * they tell the index (struct location_key says how far, per version). The
 * index would then find the entry's (code, filename, version, offset) key,
 * whose id never changes: the same id without the hash look-up. Plain loads:
 * the thread's own frames, a validated layout. */
static inline uint32_t memo_confirms(const struct frame_memo *m, const char *code, uintptr_t where,
                                     size_t filename_at, size_t version_at)
{
    if (m->code != code || m->where != where || load_pointer(code + filename_at) != m->check ||
        load_version(code, version_at) != m->version)
        return 0;
    return m->id;
}

/* The full path of walk_own for a frame the memo does not confirm, the
 * location table's lock taken if *locked says this thread does not hold it
 * yet: the frame's location id (0: none, a frame not complete), entered in
 * the memo's set `set`; -1 where something is wrong. Apart and out of line,
 * so that the walk's loop keeps what it needs in registers rather than on
 * the stack around these calls, for the memo's frames, nearly all of them. */
__attribute__((noinline, cold)) static int64_t walk_own_miss(struct frame_memo *set,
                                                             const char *frame, const char *code,
                                                             uintptr_t where, int *locked)
{
    int bad = 0, offset;
    uint32_t id = 0;
    if (!*locked) {
        pthread_mutex_lock(&lock);
        *locked = 1;
    }
    if (frame_offset(frame, code, &offset, &bad))
        id = location_at(code, offset, &bad);
    if (bad)
        return -1;
    if (id) {
        set[1] = set[0];
        set[0] = (struct frame_memo){code, load_pointer(code + own.filename), where, id,
                                     load_version(code, own.version)};
    }
    return id;
}

/* walk_state's loop over the thread's own frames once the layout is
 * validated: plain loads, and the memo before the full path. Stops, with the
 * frames found so far, where the full path finds something wrong, as
 * walk_state does. The memo's frames need no lock (walk() says why); the
 * full path does: *locked says whether this thread holds it, and the first
 * frame the memo does not confirm takes it. The offsets are copied to
 * locals: the stores to frames[] might alias `own` for all the compiler
 * knows, and it would load them again at every frame. */
HOT_PATH static int walk_own(const char *frame, uintptr_t *frames, int n, int max, int *locked)
{
    const uintptr_t code_tag_bits = own.code_tag_bits;
    const size_t code_at = own.code, instruction_at = own.instruction, owner_at = own.owner,
                 previous_at = own.previous, filename_at = own.filename, version_at = own.version;
    const unsigned owner_mask = own.owner_mask, shim = own.shim;
    while (frame && n < max) {
        const char *code =
            (const char *)((uintptr_t)load_pointer(frame + code_at) & ~code_tag_bits);
        /* 3.10: f_lasti and the field after it; only compared */
        const char *instruction = load_pointer(frame + instruction_at);
        unsigned owner = (unsigned char)frame[owner_at] & owner_mask;
        if (owner >= shim) { /* a shim: frame_offset's 0 */
            frame = load_pointer(frame + previous_at);
            continue;
        }
        const uintptr_t where = frame_word(instruction, owner);
        struct frame_memo *set = memo_set(code, instruction);
        uint32_t id = memo_confirms(&set[0], code, where, filename_at, version_at);
        if (!id)
            id = memo_confirms(&set[1], code, where, filename_at, version_at);
        if (!id) {
            int64_t found = walk_own_miss(set, frame, code, where, locked);
            if (found < 0)
                break;
            id = (uint32_t)found;
        }
        if (id)
            frames[n++] = PYTHON_FRAME_TAG | id;
        frame = load_pointer(frame + previous_at);
    }
    return n;
}

/* The Python frames of `thread_state`, appended at frames[n..max). Returns
 * -1 if the layout turned out wrong (then the C API takes over). Lock held. */
static int walk_state(const char *thread_state, uintptr_t *frames, int n, int max)
{
    int bad = 0, start = n;
    const char *frame = first_frame(thread_state, &bad);
    int locked = 1;
    if (validated && !foreign)
        return bad ? n : walk_own(frame, frames, n, max, &locked);
    while (frame && !bad && n < max) {
        const char *code = (const char *)((uintptr_t)pointer_at(frame, layout->frame_code, &bad) &
                                          ~layout->code_tag_bits);
        int offset;
        if (!bad && frame_offset(frame, code, &offset, &bad)) {
            uint32_t id = location_at(code, offset, &bad);
            if (id)
                frames[n++] = PYTHON_FRAME_TAG | id;
        }
        if (!bad)
            frame = pointer_at(frame, layout->frame_previous, &bad);
    }
    if (foreign)
        return bad ? start : n; /* it moved under us: no frames, no verdict */
    if (bad && !validated) {
        log_line("CPython %d.%d: its frames are not laid out as expected; Python frames "
                 "only for threads that hold the GIL",
                 layout->major, layout->minor);
        layout = NULL;
        return -1;
    }
    if (n > start)
        __atomic_store_n(&validated, 1, __ATOMIC_RELEASE); /* walk() reads it unlocked */
    return n;
}

/* first_frame by plain loads, for a thread's own state once the layout is
 * validated; NULL where first_frame finds no frame or something wrong. */
static const char *own_first_frame(const char *thread_state)
{
    const char *frame = load_pointer(thread_state + own.tstate_frame);
    if (own.cframe && frame)
        frame = load_pointer(frame + own.cframe_frame);
    return frame;
}

/* Whether `state`, the main thread's, lies in the interpreter's static data
 * (from 3.11 on). The state and the _PyCFrame it points to (3.11, 3.12:
 * inside it, or on the main thread's stack, where that thread has been)
 * then stay mapped, so its current frame is found with plain loads, where
 * checked reads would cost two system calls. A state anywhere else (3.10,
 * an embedding's own) is read with checks. */
static int state_is_static(const char *state)
{
    return (uintptr_t)state >= interpreter_low && (uintptr_t)state < interpreter_high;
}

/* A thread that runs no Python (PyTorch's autograd engine, a library's
 * worker) allocates on behalf of a Python thread that is usually waiting
 * for it: loss.backward() waits while the engine thread allocates the
 * gradients. So such a thread gets the main thread's Python frames, after a
 * marker frame that says whose they are. The main thread is not stopped
 * while we read: every read of its frames is checked (process_vm_readv),
 * strings are copied through checked reads, and a walk that meets anything
 * unexpected gives no frames. The last walk is kept, as the reading
 * `borrowed_reading` numbers, and reused while the main thread stays in the
 * same frame at the same instruction, the usual case while it waits.
 *
 * Whether it is still at the same instruction takes a checked read, a
 * system call, dearer than the rest of the event: a backward pass makes
 * hundreds of them a step from one engine thread, while loss.backward()
 * waits in one frame. So a thread that found the main thread in the same
 * frame asks again only after BORROWED_REUSES borrowings of its own or
 * BORROWED_NS, as the coarse clock tells it (it moves a kernel tick at a
 * time: the window is up to one tick, 1 to 4 ms; the full clock took some
 * 300 cycles of a tensor's event on the H100, clock.h), or once another
 * thread has read the main thread's frames anew: a main thread that went on
 * to another line of the same function within that window has its next few
 * borrowed walks show the line before. Within its window, the thread's
 * events are keyed by the reading (borrowed_key), with no walk. Lock held. */
#define BORROWED_REUSES 64
#define BORROWED_NS 2000000

/* Which reading of the main thread's frames walk_main_thread holds (1, 2,
 * ...; 0 before the first): bumped under the lock at each new one, read
 * without it by borrowed_key. */
static uint64_t borrowed_reading;

/* This thread's window on a reading: the reading it last confirmed (0:
 * none, or its frames could not be read), the main thread's frame it found
 * then, when, and how many borrowings ago; and the reading whose frames its
 * last borrowed walk appended (0: none since borrowed_key last asked), by
 * which python_key_kept tells whether a stack captured for a key is the
 * key's. */
static __thread struct {
    uint64_t reading, checked_ns, appended;
    const char *frame;
    int reuses;
} borrowing;

/* Whether this thread may reuse `reading` (0: none) with the main thread in
 * `frame`, now, with no look: the reading it last confirmed, the frame it
 * found then, fewer than BORROWED_REUSES borrowings and BORROWED_NS since.
 * Counts the borrowing. */
static inline int window_open(uint64_t reading, const char *frame, uint64_t now)
{
    return reading && borrowing.reading == reading && frame == borrowing.frame &&
           ++borrowing.reuses < BORROWED_REUSES && now - borrowing.checked_ns < BORROWED_NS;
}

static int walk_main_thread(uintptr_t *frames, int n, int max)
{
    static uint32_t marker;
    static const char *last_frame, *last_instruction;
    static uintptr_t last[64];
    static int last_count;
    if (!main_state || !validated || n >= max)
        return n;
    int bad = 0;
    foreign = !state_is_static(main_state);
    const char *frame = first_frame(main_state, &bad);
    foreign = 1; /* the frame itself may be in a chunk freed meanwhile */
    uint64_t now = coarse_ns();
    if (!bad && frame && !window_open(borrowed_reading, frame, now)) {
        /* Where the frame is: its instruction pointer (3.11+), or f_lasti and
         * the field after it (3.10); only compared with the last walk's. */
        const char *instruction = pointer_at(frame, layout->frame_instruction, &bad);
        if (!bad && (frame != last_frame || instruction != last_instruction)) {
            last_count = walk_state(main_state, last, 0, (int)(sizeof(last) / sizeof(last[0])));
            last_frame = frame;
            last_instruction = instruction;
            __atomic_store_n(&borrowed_reading, borrowed_reading + 1, __ATOMIC_RELEASE);
        }
        borrowing.reading = borrowed_reading;
        borrowing.frame = frame;
        borrowing.checked_ns = now;
        borrowing.reuses = 0;
    }
    foreign = 0;
    if (bad || !frame || last_count <= 0) {
        borrowing.reading = 0;
        return n;
    }
    if (!marker && locations_reserve() == 0)
        marker = locations_new("<this thread runs no Python: the main thread's stack follows>",
                               "[main thread, at that moment]", 0);
    if (marker)
        frames[n++] = PYTHON_FRAME_TAG | marker;
    for (int i = 0; i < last_count && n < max; i++)
        frames[n++] = last[i];
    if (marker) /* a stack with no marker is not keyed: it will have one */
        borrowing.appended = borrowed_reading;
    else
        borrowing.reading = 0;
    return n;
}

/* This thread's state as python_runs_here just found it, for the walk of
 * the same event (python_capture takes it, whether it walks or not): the
 * look-up is a call into the interpreter and its thread-specific data,
 * some hundred cycles of a tensor's event. Between the two no Python runs
 * on this thread, so the state cannot change. */
static __thread const char *state_found;
static __thread int state_known;

/* walk() where the thread's own frames gave none yet, or may not be read
 * without the lock: the first walks, a thread that runs no Python, a
 * layout found wrong. `locked`: whether walk_own left the lock taken.
 * Apart and out of line, so that the path of nearly every event, a thread
 * walking its own frames, is a few cache lines of code: between two
 * tensors the interpreter and PyTorch evict it from the first-level
 * instruction cache, and each line it spans is fetched again at every
 * event. */
__attribute__((noinline)) static int walk_locked(uintptr_t *frames, int n, int max,
                                                 const char *thread_state, int is_main, int locked)
{
    int start = n;
    if (!locked)
        pthread_mutex_lock(&lock);
    if (!layout) { /* another thread found it wrong meanwhile */
        pthread_mutex_unlock(&lock);
        return -1;
    }
    if (thread_state) {
        if (is_main)
            main_state = thread_state;
        n = walk_state(thread_state, frames, n, max);
    }
    /* No Python running here; PyTorch's engine threads keep a thread state
     * they never run Python in. */
    if (n == start && !is_main)
        n = walk_main_thread(frames, n, max);
    pthread_mutex_unlock(&lock);
    return n;
}

/* Whether walk_own may read `thread_state`'s frames, with no lock: a
 * validated layout (which stays so, and layout with it), and on the main
 * thread the state it noted under the lock (main_state has no other writer
 * but a forked child, alone). walk() and python_frames_key's test. */
static inline int own_frames_readable(const char *thread_state, int is_main)
{
    return thread_state && __atomic_load_n(&validated, __ATOMIC_ACQUIRE) &&
           (!is_main || main_state == thread_state);
}

static int walk(uintptr_t *frames, int n, int max, const char *thread_state)
{
    /* gettid() is a system call, dearer than the walk: once per thread. */
    if (__builtin_expect(!thread_role, 0))
        thread_role = gettid() == process_id ? THREAD_MAIN : THREAD_OTHER;
    int is_main = thread_role == THREAD_MAIN, start = n;
    /* The frames the memo confirms need nothing shared (the memo is this
     * thread's, the ids are never taken back, the layout is fixed): the
     * lock is taken only at the first frame it does not confirm. The main
     * thread notes its state under the lock first. No frames at all: the
     * walk borrows the main thread's, under the lock, in walk_locked. The
     * expectations lay the common path out in one run of code (walk_locked
     * says why it matters). */
    int locked = 0;
    if (__builtin_expect(own_frames_readable(thread_state, is_main), 1)) {
        n = walk_own(own_first_frame(thread_state), frames, n, max, &locked);
        if (__builtin_expect(n > start, 1)) {
            if (__builtin_expect(locked, 0))
                pthread_mutex_unlock(&lock);
            return n;
        }
    }
    return walk_locked(frames, start, max, thread_state, is_main, locked);
}

/* python_frames_key's walk: walk_own's reads, with no look-up. A frame
 * that is not a shim gives one word, frame_word's. With the instruction's
 * code object and the owner, it is what decides the frame's location
 * (memo_confirms says why), and from 3.11 on the instruction is an address
 * inside its code object, which it then names too, while that code object
 * lives. A key kept before its code objects were freed and others compiled
 * at their addresses must not be taken for today's. Where `watched`, the
 * hash takes the count of code objects freed so far (python_watch_code): a
 * key kept before any was freed is never found again. Otherwise (3.10,
 * 3.11, and from 3.12 on where the interpreter's code objects are not
 * watched) it takes each code object's filename, which tells the new from
 * the freed unless both have the same filename object (struct
 * location_key). The filenames have a lane of their own, a multiply at
 * each: xor-ed together, two frames of one file (a function and its
 * comprehension) would cancel each other out. 0 where the thread has more
 * frames than the key's STACK_KEY_WORDS: walk() would cut them at its own
 * limit, after the frames that give no location, which the key does not
 * tell. */
HOT_PATH static inline __attribute__((always_inline)) int own_key(const char *frame, uintptr_t *key,
                                                                  uint64_t *hash, int watched)
{
    const uintptr_t code_tag_bits = own.code_tag_bits;
    const size_t code_at = own.code, instruction_at = own.instruction, owner_at = own.owner,
                 previous_at = own.previous, filename_at = own.filename;
    const unsigned shim = own.shim;
    uint64_t h = 0, filenames = 0;
    uintptr_t *at = key, *end = key + STACK_KEY_WORDS;
    for (; frame; frame = load_pointer(frame + previous_at)) {
        unsigned owner = (unsigned char)frame[owner_at];
        if (owner >= shim)
            continue;
        if (at == end)
            return 0;
        uintptr_t where = frame_word(load_pointer(frame + instruction_at), owner);
        *at++ = where;
        h = (h ^ where) * 0x9e3779b1u;
        if (!watched) {
            const char *code =
                (const char *)((uintptr_t)load_pointer(frame + code_at) & ~code_tag_bits);
            filenames = (filenames ^ (uintptr_t)load_pointer(code + filename_at)) * 0x9e3779b1u;
        }
    }
    /* The count's bits inverted: never a small number a lane of filenames
     * might happen to be. */
    if (watched)
        filenames = ~(uint64_t)__atomic_load_n(&own.code_frees, __ATOMIC_RELAXED);
    *hash = stack_mix(stack_mix(h, filenames), (uint64_t)(at - key));
    return (int)(at - key);
}

/* A tensor's event asks for this thread's state and whether the
 * interpreter still runs: PyGILState_GetThisThreadState() and
 * Py_IsInitialized(), five functions in libpython and the C library, whose
 * code is fetched anew at every event (9 of the 48 lines of code a tensor's
 * allocation and free ran; callgrind, a 4 KiB I1, CPython 3.12.1). Both
 * answers are in _PyRuntime: the key under which the interpreter keeps each
 * thread's state as thread-specific data, and the int Py_IsInitialized()
 * returns. The layout gives their offsets; they are read directly only once
 * a thread with a state found them answering as the calls do (direct_check):
 * own.direct. A forked child checks again: its interpreter may make the key
 * anew. */

/* Whether _PyRuntime's key gives `thread_state`, this thread's by the call
 * (not NULL), and its `initialized` reads 1, as Py_IsInitialized() just
 * said: own.direct's verdict, once. Checked reads: a layout wrong for this
 * build must not crash us (pthread_getspecific gives NULL for a key that is
 * none). */
__attribute__((noinline, cold)) static void direct_check(const char *thread_state)
{
    struct {
        int created;
        uint32_t key;
    } tss; /* Py_tss_t: int, pthread_key_t */
    int initialized = 0;
    signed char verdict = -1;
    const struct python_layout *l = layout; /* NULL once found wrong */
    if (python_runtime && l && l->runtime_tss && l->runtime_initialized &&
        peek_checked(python_runtime + l->runtime_tss, &tss, sizeof(tss)) == 0 &&
        peek_checked(python_runtime + l->runtime_initialized, &initialized, sizeof(initialized)) ==
            0 &&
        tss.created == 1 && initialized == 1 &&
        pthread_getspecific((pthread_key_t)tss.key) == thread_state) {
        own.tss_key = tss.key;
        own.initialized = (const int *)(python_runtime + l->runtime_initialized);
        verdict = 1;
    }
    __atomic_store_n(&own.direct, verdict, __ATOMIC_RELEASE);
    log_debug("CPython: thread states read %s",
              verdict > 0 ? "from _PyRuntime" : "through PyGILState_GetThisThreadState");
}

/* running_state through the calls, and direct_check once a thread has a
 * state. Out of line: nearly every event reads directly. */
__attribute__((noinline, cold)) static int running_state_called(const char **state)
{
    *state = py.this_thread_state();
    if (!py.is_initialized())
        return 0;
    if (*state && own.direct == 0)
        direct_check(*state);
    return 1;
}

/* This thread's state, as PyGILState_GetThisThreadState() gives it. */
static inline const char *state_here(void)
{
    if (__builtin_expect(__atomic_load_n(&own.direct, __ATOMIC_ACQUIRE) > 0, 1))
        return pthread_getspecific((pthread_key_t)own.tss_key);
    return py.this_thread_state();
}

/* Whether the interpreter runs, as Py_IsInitialized() says, and this
 * thread's state in *state if so. */
static inline int running_state(const char **state)
{
    if (__builtin_expect(__atomic_load_n(&own.direct, __ATOMIC_ACQUIRE) > 0, 1)) {
        if (!__atomic_load_n(own.initialized, __ATOMIC_RELAXED))
            return 0;
        *state = pthread_getspecific((pthread_key_t)own.tss_key);
        return 1;
    }
    return running_state_called(state);
}

/* PyThreadState begins with its prev, next and interp pointers in every
 * version from 3.7 to 3.14; python_watch_code checks it against
 * PyThreadState_GetInterpreter before it counts on it. */
#define THREAD_STATE_INTERPRETER (2 * sizeof(void *))

/* A borrowed key's first word: the reading, under a top byte no frame_word
 * has (an owner is below the shim's, which is small). */
#define BORROWED_KEY ((uintptr_t)0xff << 56)

/* python_frames_key for a thread that runs no Python (walk_main_thread):
 * python_capture gives it the main thread's frames after its native ones,
 * which at a framework block's depth 0 are the one frame of `operation`
 * (the tracker's native_frames). So the reading of the main thread's frames
 * and the operation's answer stand for the stack, as long as walk_main_thread
 * would reuse that reading: the thread's window on it lasts, no thread has
 * read the frames anew, and the main thread is in the frame it was in. Its
 * frame is found by plain loads only where its state is static; the frame
 * is compared, never read. Out of line: a thread that runs Python, nearly
 * every event's, does not fetch its code. */
HOT_PATH __attribute__((noinline)) static int borrowed_key(uintptr_t *key, uint64_t *hash,
                                                           uint64_t (*operation)(void))
{
    uint64_t reading = __atomic_load_n(&borrowed_reading, __ATOMIC_ACQUIRE);
    const char *main = __atomic_load_n(&main_state, __ATOMIC_RELAXED);
    borrowing.appended = 0;
    if (!state_is_static(main) || !window_open(reading, own_first_frame(main), coarse_ns()))
        return 0;
    uint64_t answer = operation ? operation() : 0;
    if (!answer)
        return 0;
    key[0] = BORROWED_KEY | (uintptr_t)reading;
    key[1] = (uintptr_t)answer;
    *hash = stack_mix(stack_mix(key[0], key[1]), 2);
    return 2;
}

HOT_PATH int python_frames_key(uintptr_t *key, uint64_t *hash, uint64_t (*operation)(void))
{
    /* After this thread's first walk (thread_role is known from then on),
     * where walk() would read its frames itself; 3.10's instruction is an
     * offset, which names no code object. */
    if (!config.python || available <= 0 || !own.keyed || !thread_role)
        return 0;
    const char *thread_state;
    if (!running_state(&thread_state))
        return 0;
    int is_main = thread_role == THREAD_MAIN;
    const char *frame =
        own_frames_readable(thread_state, is_main) ? own_first_frame(thread_state) : NULL;
    if (__builtin_expect(!frame, 0))
        return is_main ? 0 : borrowed_key(key, hash, operation);
    const char *watched = __atomic_load_n(&own.watched, __ATOMIC_ACQUIRE);
    /* Expected: from 3.12 on, laid out in line. */
    if (__builtin_expect(watched &&
                             load_pointer(thread_state + THREAD_STATE_INTERPRETER) == watched,
                         1))
        return own_key(frame, key, hash, 1);
    return own_key(frame, key, hash, 0);
}

int python_key_kept(const uintptr_t *key, int words, int depth)
{
    if ((key[0] & BORROWED_KEY) == BORROWED_KEY)
        return borrowing.appended == (key[0] & ~BORROWED_KEY);
    return depth == words;
}

/* ---- watching code objects, with the GIL --------------------------------------- */

static int code_watcher = -1; /* PyCode_AddWatcher's id; set and read with the GIL */

/* Called by the interpreter, with the GIL, at each code object made or
 * freed (PY_CODE_EVENT_DESTROY, 1, before its memory goes back). A thread
 * that keys its frames then either holds the GIL or is inside a call made
 * from those frames, whose code objects it holds: a code object compiled
 * at a freed one's address is run, and keyed, only after this count moved,
 * and after the GIL passed on, which orders the two. */
static int code_event(int event, void *code)
{
    (void)code;
    if (event == 1)
        __atomic_fetch_add(&own.code_frees, 1, __ATOMIC_RELAXED);
    return 0;
}

void python_watch_code(void)
{
    if (!config.python || code_watcher >= 0)
        return;
    if (!available)
        look_up();
    if (available <= 0 || !own.keyed || !py.add_code_watcher)
        return;
    const char *thread_state = py.this_thread_state();
    const char *interpreter = thread_state ? py.thread_interpreter(thread_state) : NULL;
    if (!interpreter || load_pointer(thread_state + THREAD_STATE_INTERPRETER) != interpreter)
        return;
    code_watcher = py.add_code_watcher(code_event);
    if (code_watcher < 0) { /* all eight taken: the filenames key the frames */
        py.clear_error();
        log_debug("no code watcher left: Python frames keyed by their files");
        return;
    }
    __atomic_store_n(&own.watched, interpreter, __ATOMIC_RELEASE);
    log_debug("watching code objects: Python frames keyed without their files");
}

void python_unwatch_code(void)
{
    if (code_watcher < 0)
        return;
    __atomic_store_n(&own.watched, NULL, __ATOMIC_RELEASE);
    if (py.clear_code_watcher(code_watcher) < 0)
        py.clear_error();
    code_watcher = -1;
}

/* ---- the C API, with the GIL ------------------------------------------------- */

static const char *attribute(PyObject *code, const char *name)
{
    PyObject *value = py.get_attr(code, name);
    const char *text = value ? py.as_utf8(value) : NULL;
    const char *kept = text ? locations_keep(text, strlen(text)) : "?";
    if (value)
        py.decref(value);
    return kept;
}

static uint32_t location_with_gil(PyObject *code, int line)
{
    if (locations_reserve() < 0)
        return 0;
    uint32_t id = locations_known((uintptr_t)code, 0, 0, LOCATIONS_LINE | line);
    if (id)
        return id;
    const char *file = attribute(code, "co_filename");
    py.incref(code); /* its address stays this code's */
    return locations_enter((uintptr_t)code, 0, 0, LOCATIONS_LINE | line,
                           locations_new(file, attribute(code, "co_name"), line));
}

/* The Python frames of this thread through the C API, where no layout is
 * known: only with the GIL. Out of line, off the path of a known layout. */
__attribute__((noinline, cold)) static int walk_with_gil(uintptr_t *frames, int n, int max)
{
    if (!c_api || !py.gil_check())
        return n;
    PyObject *frame = py.get_frame(); /* borrowed */
    if (!frame)
        return n;
    py.incref(frame);
    pthread_mutex_lock(&lock);
    while (frame && n < max) {
        PyObject *code = py.frame_code(frame);
        uint32_t id = code ? location_with_gil(code, py.frame_line(frame)) : 0;
        if (code)
            py.decref(code);
        if (id)
            frames[n++] = PYTHON_FRAME_TAG | id;
        PyObject *back = py.frame_back(frame); /* new reference */
        py.decref(frame);
        frame = back;
    }
    pthread_mutex_unlock(&lock);
    if (frame)
        py.decref(frame);
    return n;
}

/* ---- capture and lookup ------------------------------------------------------ */

/* Fork: the location table is held across it, so the child's copy is whole.
 * In the child the forking thread is the only one, and the main one; the
 * parent's main thread state is gone. */
void python_fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void python_fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void python_fork_child(void)
{
    process_id = getpid();
    thread_role = 0;
    main_state = NULL;
    borrowed_reading++; /* no key of the parent's readings stands */
    if (own.direct > 0)
        own.direct = 0;          /* its key may be made anew: direct_check again */
    pthread_mutex_unlock(&lock); /* taken by this thread before fork */
}

/* Plain loads, as walk() reads a thread's own frames without the lock: the
 * checked reads of first_frame would take system calls whenever another
 * thread is borrowing the main thread's frames meanwhile (`foreign`). */
HOT_PATH int python_runs_here(void)
{
    if (!config.python || available <= 0 || !layout ||
        !__atomic_load_n(&validated, __ATOMIC_ACQUIRE))
        return 0;
    const char *thread_state = state_here();
    state_found = thread_state;
    state_known = 1;
    return thread_state && own_first_frame(thread_state);
}

HOT_PATH int python_capture(uintptr_t *frames, int depth, int max)
{
    int known = state_known;
    state_known = 0;
    if (!config.python)
        return depth;
    if (__builtin_expect(!available, 0))
        look_up();
    if (available < 0 || !py.is_initialized())
        return depth;

    /* Cut the native stack at the interpreter. */
    int cut = depth;
    for (int i = 0; i < depth; i++)
        if (frames[i] >= interpreter_low && frames[i] < interpreter_high) {
            cut = i;
            break;
        }
    int n = layout ? walk(frames, cut, max, known ? state_found : state_here()) : -1;
    if (n < 0)
        n = walk_with_gil(frames, cut, max);
    return n > cut ? n : depth;
}

/* The layout's reads of a code object are checked until a walk has
 * validated them, so a code object from anywhere is read safely. */
uintptr_t python_frame_at(const void *code, int offset)
{
    if (!config.python || !code)
        return 0;
    if (!available)
        look_up();
    if (available < 0)
        return 0;
    uint32_t id = 0;
    pthread_mutex_lock(&lock);
    if (layout) {
        int bad = 0;
        if (is_a(code, py.code_type, &bad) && !bad)
            id = location_at(code, offset, &bad);
    } else if (c_api && py.address_to_line) {
        id = location_with_gil((PyObject *)code, py.address_to_line(code, offset));
    }
    pthread_mutex_unlock(&lock);
    return id ? PYTHON_FRAME_TAG | id : 0;
}

static char start_dir[4096];

void python_keep_start_dir(void)
{
    if (!getcwd(start_dir, sizeof(start_dir)))
        start_dir[0] = '\0';
}

const char *python_start_dir(void)
{
    return start_dir;
}

const struct python_location *python_location(uintptr_t tagged)
{
    if ((tagged & PYTHON_FRAME_MASK) != PYTHON_FRAME_TAG)
        return NULL;
    uint32_t id = (uint32_t)(tagged & ~PYTHON_FRAME_MASK);
    pthread_mutex_lock(&lock);
    const struct python_location *l = locations_at(id);
    pthread_mutex_unlock(&lock);
    return l;
}
