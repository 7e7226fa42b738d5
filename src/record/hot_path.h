/* hot_path.h - where the code of a framework's tensor event lies.
 *
 * A PyTorch step hands the tracer hundreds of tensor events, each between
 * stretches of the interpreter's and PyTorch's own code, which evict the
 * tracer's code from the first-level instruction cache in between. The
 * functions every such event runs through, spread over six files, would
 * lie wherever the linker put each file's code: some 140 KiB apart, ten
 * pages. Marked HOT_PATH, they lie together (the linker gathers every
 * .text.hot.* section, in link order): some 3 KiB, whose lines then take
 * fewer sets of the cache and fewer of its page translations from the code
 * that runs between events. Each starts a cache line: how many lines a
 * function spans then depends on its own length, not on where the one
 * before it ended (a change elsewhere moved a tensor's path from 48 lines
 * to 52 with no line of it changed; callgrind, a 4 KiB I1). Only a section
 * and an alignment: GCC's `hot` attribute would also change how they are
 * compiled. */
#ifndef CUMEMTRACE_HOT_PATH_H
#define CUMEMTRACE_HOT_PATH_H

#define HOT_PATH __attribute__((section(".text.hot.cumemtrace"), aligned(64)))

#endif
