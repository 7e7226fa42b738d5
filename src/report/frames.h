/* frames.h - which frames of a stack matter to the person reading it.
 *
 * One rule, used by every writer (text, JSON, HTML, folded, memviz, diff,
 * merge, the live view), so that every view of a run names the same line.
 * From the origin of each frame (origins.h):
 *  - The site of a stack is its innermost Python frame in the user's own
 *    code (not a framework's, not the standard library's, not an installed
 *    package's: origins.h), if there is one (a tensor's stack from PyTorch's autograd
 *    thread borrows the main thread's Python frames after a marker frame of
 *    line 0, never a site: its site is the main thread's line); else its
 *    innermost native frame in the user's own code; else its innermost
 *    framework or interpreter frame (not the tracer's own hook, a runtime
 *    frame, where a framework's block starts); else its innermost frame
 *    outside CUDA's libraries.
 *  - Hidden by default: start-up, C runtime, interpreter and framework
 *    frames, and CUDA's frames but the outermost of each run of them (the
 *    call the program made), and an installed package's (a library's)
 *    Python frames. Never hidden: the user's own frames, the site, the one
 *    framework frame that names what the site asked for, the library frame
 *    the site called and the innermost library frame, and the operation a
 *    framework's thread ran for it (see struct frame_view).
 *    CUMEMTRACE_ALL_FRAMES=1 (--all-frames) shows every frame; the JSON
 *    report always keeps every frame and says which are hidden. A hidden
 *    frame has its function and module, and its file and line only with
 *    CUMEMTRACE_ALL_FRAMES=1 or where another stack shows it: a file and
 *    line cost the module's whole debug information (frames_read_lines). */
#ifndef CUMEMTRACE_FRAMES_H
#define CUMEMTRACE_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "origins.h"
#include "stacks.h"
#include "symbolize.h"

struct report;

/* The origin of a frame of the report, by address (origins.h). */
int frames_origin(const struct report *r, uintptr_t address);

/* What a stack shows: `site`, the index of its site (-1 for a stack without
 * frames), and `call`, the framework frame kept below the site (-1: none):
 * the innermost framework Python frame inside it (linear.py's forward), else
 * its outermost native framework frame (the binding the site called); and
 * `operation` (-1: none), on a stack that borrows the main thread's frames,
 * the native framework frame just before the marker: what the framework's
 * thread ran for the main thread (PyTorch's backward node, AddmmBackward0's
 * apply), which tells apart tensors made under the same backward() line;
 * `library_call` and `library` (-1: none), the outermost and the innermost
 * library frame inside the site: an installed package's Python
 * (origins.h, ORIGIN_LIBRARY) or the standard library's (this thread's, up
 * to a marker): the package function the user's line called, and where
 * the package asked for the memory (transformers' generate,
 * DynamicLayer.update). */
struct frame_view {
    long site, call, operation, library, library_call;
};
void frames_view(const struct report *r, const struct stack *s, struct frame_view *v);
/* 1 if the frame at `address` is a marker (python.h: a Python frame of line
 * 0, "[main thread, at that moment]", after which a thread that runs no
 * Python borrows the main thread's frames): a placeholder, never shown as a
 * frame; a writer may say in words whose frames follow it. */
int frames_marker(const struct report *r, uintptr_t address);
/* 1 if frame `index` of `s` is hidden by default, whatever
 * CUMEMTRACE_ALL_FRAMES says (a marker always). */
int frames_hidden(const struct report *r, const struct stack *s, uint32_t index,
                  const struct frame_view *v);
/* 1 if the writers leave frame `index` out: hidden, and not r->all_frames;
 * a marker always. */
int frames_left_out(const struct report *r, const struct stack *s, uint32_t index,
                    const struct frame_view *v);

/* File and line for the native frames the writers show (every native
 * frame with r->all_frames): debug information is read for those alone,
 * so the frames left out keep their function and module but no file or
 * line. Called once report_finish has named and classified the frames.
 * 0, or -1 when out of memory. */
int frames_read_lines(struct report *r);

/* A frame's name, the same in every export: "function" for a native frame,
 * "function (file:line)" for a Python one ("function" alone for a marker
 * of line 0: "[main thread, at that moment]"), "module+0xoffset" without a
 * symbol, "0xaddress" outside any module. */
void frames_name(const struct symbol *s, uintptr_t address, char *text, size_t size);

/* C++ names as people read them: template arguments and parameter lists
 * collapsed ("wrap_kernel_functor_unboxed_<...>::call(...)"). The JSON report
 * keeps the whole name. */
const char *frames_short_name(const char *name, char *buffer, size_t size);

/* Works out, once the frames are classified (report_classify_frames), how
 * the site line of each shown stack is told apart from the other shown
 * stacks' of the same line (frames_site_line), into r->site_apart. Always
 * 0: without the memory for it, each site names its line alone (said in
 * the debug log). */
int frames_tell_apart(struct report *r);

/* A stack's site in words, the same in every output: "file:line in
 * function" (else the frame's name, frames_name); then its callers, "<
 * caller:line" outwards, at least `callers` of them and as many as it takes
 * to tell it from every other shown stack of the same site line (down to
 * the first that differs: "Buf.__init__ < hoard_buffers:18"); then the
 * library path inside it, " (via transformers, torch: generate ->
 * DynamicLayer.update:147)": the packages it went through outermost first
 * (a framework's Python frames on it folded into it and named, the
 * standard library as "stdlib"), the library frame the site called and the
 * innermost. Where the callers end before the stacks differ, the frames
 * inside up to the first that differs: inside the via part where there is
 * one (between its ends, the one that differs; after its innermost frame,
 * " -> at::_ops::cat::call(...)"), nothing after it; else after the site.
 * Where nothing shown differs, " (stack N)", its id in the JSON report.
 * "" for no stack or a stack without frames. Not escaped for a terminal
 * (output_text) or JSON. */
void frames_site_line(const struct report *r, uint32_t stack_id, int callers, char *text,
                      size_t size);
/* The site line with no more callers than it takes to tell it apart: what
 * a finding names (frames_site_line with `callers` 0). */
void frames_site_text(const struct report *r, uint32_t stack_id, char *text, size_t size);

#endif
