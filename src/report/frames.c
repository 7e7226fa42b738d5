/* frames.c - the site of a stack and its hidden frames (see frames.h),
 * from the origins report_finish gave its frames (origins.h). */
#include <stdio.h>
#include <string.h>

#include "frames.h"
#include "log.h"
#include "python.h"
#include "report.h"

int frames_origin(const struct report *r, uintptr_t address)
{
    long i = report_frame_index(r, address);
    return i >= 0 && r->origins ? r->origins[i] : ORIGIN_USER;
}

static const struct symbol *symbol_of(const struct report *r, uintptr_t address)
{
    long i = report_frame_index(r, address);
    return i >= 0 ? &r->symbols[i] : NULL;
}

static long find_site(const struct report *r, const struct stack *s)
{
    const uintptr_t *frames = r->frames + s->first_frame;
    long native = -1, outside = -1, outside_cuda = -1;
    for (uint32_t i = 0; i < s->depth; i++) {
        int origin = frames_origin(r, frames[i]);
        if (is_python_frame(frames[i])) {
            const struct symbol *symbol = symbol_of(r, frames[i]);
            /* line 0: a marker, not a line of code (python.h) */
            if (origin == ORIGIN_USER && symbol && symbol->line > 0)
                return i;
        } else if (origin == ORIGIN_USER && native < 0) {
            native = i;
        }
        /* Without code of the user's: the innermost frame that says what
         * ran, a framework's or the interpreter's, rather than the runtimes'
         * (a framework's block starts in the tracer's own hook). */
        if (origin != ORIGIN_CUDA && origin != ORIGIN_SYSTEM && origin != ORIGIN_STARTUP &&
            outside < 0)
            outside = i;
        if (origin != ORIGIN_CUDA && outside_cuda < 0)
            outside_cuda = i;
    }
    if (native >= 0)
        return native;
    if (outside >= 0)
        return outside;
    if (outside_cuda >= 0)
        return outside_cuda;
    return s->depth ? 0 : -1;
}

void frames_view(const struct report *r, const struct stack *s, struct frame_view *v)
{
    const uintptr_t *frames = r->frames + s->first_frame;
    v->site = find_site(r, s);
    v->call = -1;
    long python = -1, native = -1;
    for (long i = 0; i < v->site; i++) {
        if (frames_origin(r, frames[i]) != ORIGIN_FRAMEWORK)
            continue;
        if (!is_python_frame(frames[i]))
            native = i;
        else if (python < 0)
            python = i;
    }
    v->call = python >= 0 ? python : native;
    v->operation = -1;
    for (long i = 1; i < (long)s->depth; i++) {
        const struct symbol *marker = symbol_of(r, frames[i]);
        if (is_python_frame(frames[i]) && marker && marker->line == 0) {
            if (!is_python_frame(frames[i - 1]) &&
                frames_origin(r, frames[i - 1]) == ORIGIN_FRAMEWORK)
                v->operation = i - 1;
            break;
        }
    }
}

int frames_marker(const struct report *r, uintptr_t address)
{
    const struct symbol *s = symbol_of(r, address);
    return is_python_frame(address) && s && s->python && s->line == 0;
}

int frames_hidden(const struct report *r, const struct stack *s, uint32_t index,
                  const struct frame_view *v)
{
    const uintptr_t *frames = r->frames + s->first_frame;
    int origin = frames_origin(r, frames[index]);
    if ((long)index == v->site || (long)index == v->call || (long)index == v->operation ||
        origin == ORIGIN_USER)
        return frames_marker(r, frames[index]);
    if (origin == ORIGIN_CUDA)
        return index + 1 < s->depth && frames_origin(r, frames[index + 1]) == ORIGIN_CUDA;
    return 1;
}

int frames_left_out(const struct report *r, const struct stack *s, uint32_t index,
                    const struct frame_view *v)
{
    return (!r->all_frames && frames_hidden(r, s, index, v)) ||
           frames_marker(r, r->frames[s->first_frame + index]);
}

int frames_read_lines(struct report *r)
{
    if (!symbolizer_has_lines(r->symbolizer))
        return 0;
    uint8_t *shown = report_alloc(r, r->address_count);
    if (!shown)
        return -1;
    memset(shown, r->all_frames, r->address_count);
    for (uint32_t i = 0; !r->all_frames && i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        struct frame_view view;
        frames_view(r, s, &view);
        for (uint32_t f = 0; f < s->depth; f++) {
            long index = report_frame_index(r, r->frames[s->first_frame + f]);
            if (index >= 0 && !frames_hidden(r, s, f, &view))
                shown[index] = 1;
        }
    }
    size_t native = 0, read = 0;
    for (size_t i = 0; i < r->address_count; i++) {
        if (r->symbols[i].python)
            continue;
        native++;
        if (shown[i]) {
            symbolize_line(r->symbolizer, 1, &r->symbols[i]);
            read++;
        }
    }
    log_debug("symbolizer: file and line looked up for %zu of %zu native frames", read, native);
    return 0;
}

void frames_name(const struct symbol *s, uintptr_t address, char *text, size_t size)
{
    if (s && s->python && s->line == 0)      /* a marker frame (python.h): no place in code */
        snprintf(text, size, "%s", s->function ? s->function : "?");
    else if (s && s->python)
        snprintf(text, size, "%s (%s:%d)", s->function ? s->function : "?",
                 s->file ? s->file : "?", s->line);
    else if (s && s->function)
        snprintf(text, size, "%s", s->function);
    else if (s && s->module)
        snprintf(text, size, "%s+0x%lx", output_base_name(s->module), (unsigned long)s->module_offset);
    else
        snprintf(text, size, "0x%lx", (unsigned long)address);
}

const char *frames_short_name(const char *name, char *buffer, size_t size)
{
    size_t used = 0;
    int depth = 0;
    for (const char *c = name; *c && used + 5 < size; c++) {
        int opens = (*c == '<' || *c == '(') && strncmp(c, "<lambda", 7) != 0;
        int closes = (*c == '>' || *c == ')') && depth > 0;
        if (depth == 0 || (depth == 1 && closes))
            buffer[used++] = *c;
        if (opens && depth++ == 0) {
            memcpy(buffer + used, "...", 3);
            used += 3;
        } else if (closes) {
            depth--;
        }
    }
    buffer[used] = '\0';
    return buffer;
}

void frames_site_text(const struct report *r, uint32_t stack_id, char *text, size_t size)
{
    const struct stack *s = stack_id >= 1 && stack_id <= r->stack_count
                                ? &r->stacks[stack_id - 1] : NULL;
    text[0] = '\0';
    if (!s || !s->depth)
        return;
    struct frame_view view;
    frames_view(r, s, &view);
    uintptr_t address = r->frames[s->first_frame + view.site];
    const struct symbol *symbol = symbol_of(r, address);
    char name[256];
    if (symbol && symbol->file && (symbol->python || symbol->function))
        snprintf(text, size, "%s:%d in %s", symbol->file, symbol->line,
                 symbol->python ? (symbol->function ? symbol->function : "?")
                                : frames_short_name(symbol->function, name, sizeof(name)));
    else
        frames_name(symbol, address, text, size);
}
