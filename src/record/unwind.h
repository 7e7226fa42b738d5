/* unwind.h - a walk of this thread's stack by remembered frame rules, for
 * stacks.c: what libgcc's walk (_Unwind_Backtrace) gives, at a fraction of
 * its cost (some 55 instructions a frame, the filter of the tracer's own
 * frames included; libgcc's walk finds and runs each frame's call frame
 * information anew, some 1,400 a frame), and at about 12 a
 * frame for the frames a walk from where this thread's last walk started
 * finds as that walk left them (unwind.c's memo of it).
 *
 * A frame's caller is found by a rule: where its canonical frame address
 * (CFA) is (the stack pointer or the frame pointer plus an offset), the
 * return address at CFA - 8, and the caller's frame pointer either kept or
 * saved at CFA plus an offset. The rule of a code address is read once from
 * its object's call frame information (.eh_frame, found through libgcc's
 * _Unwind_Find_FDE) and kept by address for the process's life (an
 * object unloaded and another loaded at its addresses is not noticed). A rule
 * that cannot be expressed so (a signal frame, a CFA expression, a register
 * kept in another), or code without frame information, makes the walk give
 * up, and the caller walks with libgcc instead.
 *
 * A rule is trusted only once a walk that used it gave exactly the frames
 * libgcc gave for the same stack (the caller compares, unwind_settle);
 * one that differed is never used again. x86-64 only; elsewhere every walk
 * gives up. */
#ifndef CUMEMTRACE_UNWIND_H
#define CUMEMTRACE_UNWIND_H

#include <stdint.h>

#define UNWIND_UNPROVEN_MAX 64

/* The rules a walk used that are not yet trusted: past the first
 * UNWIND_UNPROVEN_MAX, they stay untrusted, for a later walk to settle. */
struct unwind_proof {
    int count;
    uint64_t *rules[UNWIND_UNPROVEN_MAX];
};

/* Find _Unwind_Find_FDE with `lookup` (dlsym) in `libgcc` (libgcc_s's
 * handle); without it, every walk gives up. */
void unwind_init(void *libgcc, void *(*lookup)(void *handle, const char *name));
/* After fork, in the child (one thread): the table's lock made anew. */
void unwind_reset(void);

/* The caller's callers' return addresses outside [skip_low, skip_high),
 * innermost first, into out[]: the first `max` of those among the `most`
 * frames libgcc's _Unwind_Backtrace, called from the caller's place, would
 * give after its first (the return address into the caller). How many, or
 * -1: walk with libgcc. proof->count > 0: some rule was new, and the
 * caller must compare with libgcc's walk and call unwind_settle. */
int unwind_walk(uintptr_t *out, int max, int most, uintptr_t skip_low, uintptr_t skip_high,
                struct unwind_proof *proof);
/* The new rules of a compared walk: trusted from now on (same = 1), or
 * never used again (0). */
void unwind_settle(const struct unwind_proof *proof, int same);

#endif
