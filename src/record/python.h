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

/* Whether CPython major.minor's frames are read from the interpreter's
 * structures on every thread, the GIL held or not (its layout is known);
 * `known` gets the versions that are ("3.10 to 3.13"). For `cumemtrace
 * doctor`. */
int python_layout_known(int major, int minor, char *known, size_t size);

/* The location of a tagged frame; NULL if it is not one we know. */
const struct python_location *python_location(uintptr_t tagged);
uint32_t python_location_count(void);
const struct python_location *python_location_at(uint32_t id);

static inline int is_python_frame(uintptr_t address)
{
    return (address & PYTHON_FRAME_MASK) == PYTHON_FRAME_TAG;
}

#endif
