/* python.h - Python frames in allocation stacks (see python.c). */
#ifndef CUMEMTRACE_PYTHON_H
#define CUMEMTRACE_PYTHON_H

#include <stddef.h>
#include <stdint.h>

/* A Python frame in a stack: no return address has these top bits set. */
#define PYTHON_FRAME_TAG 0xfffe000000000000ULL
#define PYTHON_FRAME_MASK 0xffff000000000000ULL

struct python_location {
    const char *file;
    const char *function;
    int line;
};

/* If this thread holds the GIL: replace the interpreter's native frames in
 * frames[0..depth) by the Python stack, up to `max` frames in all. Returns
 * the new depth. */
int python_capture(uintptr_t *frames, int depth, int max);

/* This thread is running Python (it has frames of its own): cheap, no lock. */
int python_runs_here(void);

/* This thread's Python frames as they are now, read but not looked up, as
 * key[0..n) (one word a frame; STACK_KEY_WORDS at most) and *hash, for
 * stacks.h's stack_known_by_key: n, which is 0 where they cannot be read so
 * (no frames, more than the key holds, CPython 3.10, or a thread whose frames
 * python_capture has not walked yet). A thread that runs no Python, which
 * python_capture gives the main thread's frames, has them keyed as it last
 * read them, lately, with `operation`'s answer (a framework block's one
 * native frame, the tracker's native_frames; 0: no key). Equal keys and
 * hashes stand for equal stacks of python_capture's, at a native depth of
 * 0 or with that one frame. Cheap, no lock. */
int python_frames_key(uintptr_t *key, uint64_t *hash, uint64_t (*operation)(void));

/* Whether the stack of `depth` frames this thread captured just after
 * python_frames_key gave key[0..words) is the one the key stands for, to be
 * remembered by it: every frame of its own gave a location, or the main
 * thread's frames it borrowed are the reading the key names. */
int python_key_kept(const uintptr_t *key, int words, int depth);

/* With the GIL: from CPython 3.12 on, watch the interpreter's code objects
 * being freed (PyCode_AddWatcher), so that python_frames_key's keys need
 * not read each frame's code object. Once; a no-op before 3.12, or where
 * the interpreter has no watcher left. python_unwatch_code, with the GIL,
 * before the interpreter is finalized (its watchers are then dropped, and
 * code objects freed unseen): the keys read the code objects again. */
void python_watch_code(void);
void python_unwatch_code(void);

/* With the GIL, for a code object the caller holds: the tagged frame of
 * `code` at the instruction `offset` bytes into its code (a frame's f_lasti,
 * as JAX's tracebacks keep them), or 0. */
uintptr_t python_frame_at(const void *code, int offset);

/* Fork (from tracker.c's handlers, after the registry's locks are taken):
 * the location table is held across it; in the child, the one thread left
 * is the main one. */
void python_fork_prepare(void);
void python_fork_parent(void);
void python_fork_child(void);

/* How CPython major.minor's frames are read on every thread, the GIL held
 * or not: 2 from the offsets the interpreter publishes (3.13 on; checked
 * when it starts, see choose_layout), 1 from the layout known for it, 0 not
 * at all (only where the thread holds the GIL). `known` gets what is read
 * for which versions. For `cumemtrace doctor`. */
int python_layout_known(int major, int minor, char *known, size_t size);
/* The known layout's row (python_layout.h) of CPython major.minor; NULL if
 * none. */
struct python_layout;
const struct python_layout *python_layout_row(int major, int minor);

/* The working directory the program started in, kept at load
 * (python_keep_start_dir, from the library's constructor): Python names the
 * files it compiled from a relative path relative to it, whatever
 * directory the program moves to later. "" where it could not be read. */
void python_keep_start_dir(void);
const char *python_start_dir(void);

/* The location of a tagged frame; NULL if it is not one we know. */
const struct python_location *python_location(uintptr_t tagged);

static inline int is_python_frame(uintptr_t address)
{
    return (address & PYTHON_FRAME_MASK) == PYTHON_FRAME_TAG;
}

#endif
