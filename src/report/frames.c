/* frames.c - the site of a stack and its hidden frames (see frames.h),
 * from the origins report_finish gave its frames (origins.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A Python frame of an installed package's or of the standard library's
 * (interpreter frames that are Python's: its library, frozen modules). */
static int folded_python(const struct report *r, uintptr_t address)
{
    int origin = frames_origin(r, address);
    return is_python_frame(address) && (origin == ORIGIN_LIBRARY || origin == ORIGIN_INTERPRETER);
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
    /* The library path: the package or standard-library frames inside the
     * site, outermost and innermost, to the first marker (the frames past
     * it are another thread's). */
    v->library = v->library_call = -1;
    for (long i = 0; i < v->site; i++) {
        if (frames_marker(r, frames[i])) {
            v->library = v->library_call = -1;
            continue;
        }
        if (!folded_python(r, frames[i]))
            continue;
        if (v->library < 0)
            v->library = i;
        v->library_call = i;
    }
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
        (long)index == v->library || (long)index == v->library_call || origin == ORIGIN_USER)
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
    if (s && s->python && s->line == 0) /* a marker frame (python.h): no place in code */
        snprintf(text, size, "%s", s->function ? s->function : "?");
    else if (s && s->python)
        snprintf(text, size, "%s (%s:%d)", s->function ? s->function : "?", s->file ? s->file : "?",
                 s->line);
    else if (s && s->function)
        snprintf(text, size, "%s", s->function);
    else if (s && s->module)
        snprintf(text, size, "%s+0x%lx", output_base_name(s->module),
                 (unsigned long)s->module_offset);
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

/* ---- the site in words, told apart ------------------------------------ */

/* What tells stacks of one site line apart: the frames shown by default
 * (never the --all-frames view: every output names a site alike), the site
 * first, then its callers outwards, then a separator, then the frames inside
 * it from the site inwards (the library path, the framework call, CUDA's).
 * The callers tell it from stacks whose callers differ; the frames inside,
 * from those whose callers are the same. A cache's segments are compared
 * with segments alone: a tensor and the segment it first needed are listed
 * apart anyway. */
#define APART_SEPARATOR (-1)
/* site_apart: the callers named (its low byte), the frames inside named
 * (the next seven bits), and this bit when even all of them leave it the
 * same as another stack's. */
#define APART_CALLERS(a) ((a)&0xffu)
#define APART_INSIDE(a) (((a) >> 8) & 0x7fu)
#define APART_SAME 0x8000u

struct apart {
    uint32_t stack_id, length;
    uint32_t head;            /* elements up to the separator, it included */
    int segment;              /* a cache's segments (report_cache_segment) */
    const int32_t *positions; /* in the stack's frames, or APART_SEPARATOR */
};

/* The elements of stack `s`, at most `room` (depth + 1 is enough); how
 * many. */
static uint32_t apart_elements(const struct report *r, const struct stack *s, int32_t *positions,
                               uint32_t room)
{
    struct frame_view view;
    frames_view(r, s, &view);
    uint32_t n = 0;
    if (view.site < 0 || room < 2)
        return 0;
    positions[n++] = (int32_t)view.site;
    for (uint32_t i = (uint32_t)view.site + 1; i < s->depth && n + 1 < room; i++)
        if (!frames_hidden(r, s, i, &view))
            positions[n++] = (int32_t)i;
    positions[n++] = APART_SEPARATOR;
    for (long i = view.site - 1; i >= 0 && n < room; i--)
        if (!frames_hidden(r, s, (uint32_t)i, &view))
            positions[n++] = (int32_t)i;
    return n;
}

static int compare_text(const char *a, const char *b)
{
    return a && b ? strcmp(a, b) : (a != NULL) - (b != NULL);
}

/* One element of two stacks: the same Python line is the same whatever its
 * address (the live view gives each Python frame its own); native frames
 * by address. */
static int compare_element(const struct report *r, const struct stack *a, int32_t x,
                           const struct stack *b, int32_t y)
{
    if (x == APART_SEPARATOR || y == APART_SEPARATOR)
        return (x != APART_SEPARATOR) - (y != APART_SEPARATOR);
    uintptr_t p = r->frames[a->first_frame + (uint32_t)x],
              q = r->frames[b->first_frame + (uint32_t)y];
    if (p == q)
        return 0;
    if (is_python_frame(p) != is_python_frame(q))
        return is_python_frame(p) ? -1 : 1;
    const struct symbol *s = symbol_of(r, p), *t = symbol_of(r, q);
    if (is_python_frame(p) && s && t) {
        int c = compare_text(s->file, t->file);
        if (!c)
            c = compare_text(s->function, t->function);
        return c ? c : (s->line > t->line) - (s->line < t->line);
    }
    return p < q ? -1 : 1;
}

/* How many leading elements two sequences share (none across the
 * segments' line). */
static uint32_t shared(const struct report *r, const struct apart *a, const struct apart *b)
{
    const struct stack *s = &r->stacks[a->stack_id - 1], *t = &r->stacks[b->stack_id - 1];
    uint32_t n = 0;
    while (a->segment == b->segment && n < a->length && n < b->length &&
           compare_element(r, s, a->positions[n], t, b->positions[n]) == 0)
        n++;
    return n;
}

static int by_elements(const void *x, const void *y, void *context)
{
    const struct report *r = context;
    const struct apart *a = x, *b = y;
    if (a->segment != b->segment)
        return a->segment - b->segment;
    uint32_t n = shared(r, a, b);
    if (n < a->length && n < b->length)
        return compare_element(r, &r->stacks[a->stack_id - 1], a->positions[n],
                               &r->stacks[b->stack_id - 1], b->positions[n]);
    if (a->length != b->length)
        return a->length < b->length ? -1 : 1;
    return (a->stack_id > b->stack_id) - (a->stack_id < b->stack_id);
}

/* Sorted, the stacks of one site and the same callers are a run; the
 * callers a run names are those up to the first that differs from the
 * nearest stack outside it, on either side (sharing its site: `outside`
 * elements or more); each of the run names the frames inside up to the
 * first that differs from its neighbours in the run. */
static void tell_run(const struct report *r, const struct apart *list, uint32_t first, uint32_t end,
                     uint32_t count, uint16_t *apart)
{
    uint32_t outside = 0, head = list[first].head;
    if (first > 0)
        outside = shared(r, &list[first - 1], &list[first]);
    if (end < count) {
        uint32_t after = shared(r, &list[end - 1], &list[end]);
        outside = after > outside ? after : outside;
    }
    uint32_t callers = head - 2; /* the site and the separator apart */
    callers = outside == 0 ? 0 : outside < callers ? outside : callers;
    for (uint32_t i = first; i < end; i++) {
        const struct apart *a = &list[i];
        uint32_t before = i > first ? shared(r, &list[i - 1], a) : 0;
        uint32_t after = i + 1 < end ? shared(r, a, &list[i + 1]) : 0;
        uint32_t most = before > after ? before : after, inside = 0;
        if (most >= head)
            inside = most < a->length ? most - head + 1 : a->length - head;
        int same = (before == a->length && list[i - 1].length == a->length) ||
                   (after == a->length && list[i + 1].length == a->length);
        apart[a->stack_id - 1] =
            (uint16_t)((callers < 0xff ? callers : 0xff) | (inside < 0x7f ? inside : 0x7f) << 8 |
                       (same ? APART_SAME : 0));
    }
}

int frames_tell_apart(struct report *r)
{
    size_t elements = 0;
    for (uint32_t i = 0; i < r->shown_count; i++)
        elements += r->stacks[r->shown[i] - 1].depth + 1;
    /* One mapping for the result and the work: a report has few to give. */
    size_t result = ((r->stack_count + 1) * sizeof(uint16_t) + 7) & ~(size_t)7;
    size_t items = ((size_t)r->shown_count + 1) * sizeof(struct apart);
    uint8_t *memory = report_alloc(r, result + items + (elements + 1) * sizeof(int32_t));
    if (!memory) {
        log_debug("frames: no memory to tell sites apart: each names its line alone");
        return 0;
    }
    struct apart *list = (struct apart *)(memory + result);
    int32_t *positions = (int32_t *)(memory + result + items);
    uint32_t count = 0;
    for (uint32_t i = 0; i < r->shown_count; i++) {
        const struct stack *s = &r->stacks[r->shown[i] - 1];
        struct apart *a = &list[count];
        a->stack_id = r->shown[i];
        a->positions = positions;
        a->length = apart_elements(r, s, positions, s->depth + 1);
        a->segment = report_cache_segment(r, r->shown[i]) != 0;
        for (a->head = 0; a->head < a->length && positions[a->head] != APART_SEPARATOR;)
            a->head++;
        a->head++;
        positions += a->length;
        count += a->length > 0;
    }
    qsort_r(list, count, sizeof(*list), by_elements, r);
    uint16_t *apart = (uint16_t *)memory;
    for (uint32_t first = 0, end; first < count; first = end) {
        for (end = first + 1; end < count && list[end].head == list[first].head &&
                              shared(r, &list[end - 1], &list[end]) >= list[first].head;)
            end++;
        tell_run(r, list, first, end, count, apart);
    }
    r->site_apart = apart;
    return 0;
}

/* A frame named in a site line: "function:line" where it has a line, else
 * its (short) function, else frames_name. */
static void chain_name(const struct symbol *s, uintptr_t address, char *text, size_t size)
{
    char name[256];
    if (s && s->function && s->file)
        snprintf(text, size, "%s:%d",
                 s->python ? s->function : frames_short_name(s->function, name, sizeof(name)),
                 s->line);
    else if (s && s->function && !s->python)
        snprintf(text, size, "%s", frames_short_name(s->function, name, sizeof(name)));
    else
        frames_name(s, address, text, size);
}

/* Appends to text (`used` of `size` bytes): what snprintf would, cut. */
static size_t append(char *text, size_t size, size_t used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *text, size_t size, size_t used, const char *format, ...)
{
    if (used + 1 >= size)
        return used;
    va_list arguments;
    va_start(arguments, format);
    int n = vsnprintf(text + used, size - used, format, arguments);
    va_end(arguments);
    return n < 0 ? used : (size_t)n < size - used ? used + (size_t)n : size - 1;
}

/* The package a folded frame (or a framework's Python frame) belongs to,
 * in `name`: its folder in site-packages, "stdlib" for the standard
 * library's; 0 for none (a framework's source checkout). */
static int package_of(const struct report *r, uintptr_t address, char *name, size_t size)
{
    const struct symbol *symbol = symbol_of(r, address);
    int origin = frames_origin(r, address);
    if (!symbol || !is_python_frame(address) || frames_marker(r, address))
        return 0;
    if (origin == ORIGIN_INTERPRETER) {
        snprintf(name, size, "stdlib");
        return 1;
    }
    return (origin == ORIGIN_LIBRARY || origin == ORIGIN_FRAMEWORK) &&
           origin_package(symbol->file, name, size);
}

/* " (via transformers, torch: generate -> DynamicLayer.update:147)": the
 * packages the site's call went through, outermost first (the standard
 * library's as "stdlib", a framework's Python frames on the way too), the
 * library frame it called and the innermost, where the library asked for
 * the memory. `inside` (`count` elements of apart_elements, from the site
 * inwards) are the frames inside the site it takes to tell it apart: those
 * of the library path between its ends go between them, those inside its
 * innermost frame after it. Without a library path, they follow the site
 * (" -> at::_ops::cat::call(...)"). */
static size_t append_inside(const struct report *r, const struct stack *s,
                            const struct frame_view *view, const int32_t *inside, uint32_t count,
                            char *text, size_t size, size_t used)
{
    const uintptr_t *frames = r->frames + s->first_frame;
    char name[512];
    if (view->library < 0) {
        for (uint32_t k = 0; k < count; k++) {
            chain_name(symbol_of(r, frames[inside[k]]), frames[inside[k]], name, sizeof(name));
            used = append(text, size, used, " -> %s", name);
        }
        return used;
    }
    char packages[3][64];
    int named = 0;
    for (long i = view->library_call; i >= 0 && named < 3 && !frames_marker(r, frames[i]); i--) {
        char package[64];
        if (!package_of(r, frames[i], package, sizeof(package)))
            continue;
        int known = 0;
        for (int k = 0; k < named; k++)
            known |= strcmp(packages[k], package) == 0;
        if (!known)
            snprintf(packages[named++], sizeof(packages[0]), "%s", package);
    }
    used = append(text, size, used, " (via");
    for (int k = 0; k < named; k++)
        used = append(text, size, used, "%s %s", k ? "," : "", packages[k]);
    used = append(text, size, used, ":");
    if (view->library_call != view->library) {
        const struct symbol *outer = symbol_of(r, frames[view->library_call]);
        used = append(text, size, used, " %s ->", outer && outer->function ? outer->function : "?");
    }
    /* Between the ends, only the frame that tells it apart (the last). */
    if (count && inside[count - 1] < view->library_call && inside[count - 1] > view->library) {
        chain_name(symbol_of(r, frames[inside[count - 1]]), frames[inside[count - 1]], name,
                   sizeof(name));
        used = append(text, size, used, " %s ->", name);
    }
    chain_name(symbol_of(r, frames[view->library]), frames[view->library], name, sizeof(name));
    used = append(text, size, used, " %s", name);
    for (uint32_t k = 0; k < count; k++) {
        if (inside[k] >= view->library)
            continue;
        chain_name(symbol_of(r, frames[inside[k]]), frames[inside[k]], name, sizeof(name));
        used = append(text, size, used, " -> %s", name);
    }
    return append(text, size, used, ")");
}

void frames_site_line(const struct report *r, uint32_t stack_id, int callers, char *text,
                      size_t size)
{
    const struct stack *s =
        stack_id >= 1 && stack_id <= r->stack_count ? &r->stacks[stack_id - 1] : NULL;
    text[0] = '\0';
    if (!s || !s->depth || !size)
        return;
    struct frame_view view;
    frames_view(r, s, &view);
    const uintptr_t *frames = r->frames + s->first_frame;
    uintptr_t address = frames[view.site];
    const struct symbol *symbol = symbol_of(r, address);
    char name[512];
    if (symbol && symbol->file && (symbol->python || symbol->function))
        snprintf(text, size, "%s:%d in %s", symbol->file, symbol->line,
                 symbol->python ? (symbol->function ? symbol->function : "?")
                                : frames_short_name(symbol->function, name, sizeof(name)));
    else
        frames_name(symbol, address, text, size);
    size_t used = strlen(text);
    unsigned apart = r->site_apart ? r->site_apart[stack_id - 1] : 0;
    uint32_t named = APART_CALLERS(apart), inside = APART_INSIDE(apart);
    if ((uint32_t)callers > named)
        named = (uint32_t)callers;
    int32_t positions[1024];
    uint32_t length = 0, element = 1;
    if (named || inside)
        length = apart_elements(r, s, positions, sizeof(positions) / sizeof(positions[0]));
    /* The callers: as many as asked, and those that tell it apart. */
    for (; element < length && positions[element] != APART_SEPARATOR && element <= named;
         element++) {
        uintptr_t caller = frames[positions[element]];
        chain_name(symbol_of(r, caller), caller, name, sizeof(name));
        used = append(text, size, used, " < %s", name);
    }
    /* Inside it, where the callers are the same. */
    while (element < length && positions[element] != APART_SEPARATOR)
        element++;
    uint32_t first = element + 1 < length ? element + 1 : length;
    uint32_t count = first + inside <= length ? inside : length - first;
    used = append_inside(r, s, &view, positions + first, count, text, size, used);
    if (apart & APART_SAME)
        append(text, size, used, " (stack %u)", stack_id);
}

void frames_site_text(const struct report *r, uint32_t stack_id, char *text, size_t size)
{
    frames_site_line(r, stack_id, 0, text, size);
}
