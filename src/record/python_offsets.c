/* python_offsets.c - the frame layout CPython publishes about itself.
 *
 * From 3.13 on, _PyRuntime (the interpreter's runtime state, an exported
 * symbol) starts with _Py_DebugOffsets: the cookie "xdebugpy", the version
 * (PY_VERSION_HEX), whether the build is free-threaded, then for each
 * structure a debugger or profiler reads its size and the offsets of its
 * fields, as the interpreter was compiled: thread state, interpreter frame,
 * code object, object header, str. Out-of-process profilers keep up with new
 * releases through it; so does python.c, for the few fields it walks.
 *
 * The record itself is laid out per minor version (3.14 added fields in the
 * middle of it), so where each needed word sits is listed here for the
 * versions whose record we know. Whatever the record says is checked before
 * it is used: the cookie, the version against Py_GetVersion's, the object
 * header's offsets against what every CPython since 3.0 has had (which also
 * tells that the record's words are where we think), each structure's size
 * within reason and each field inside its structure. What the record does
 * not give is derived from what it does, where CPython has not changed it
 * since 3.12: a compact str's UTF-8 pointer and its text follow the ASCII
 * header, one and two words on; from 3.14 the frame's code object is a
 * tagged reference (_PyStackRef), whose low two bits are flags. */
#include <stdint.h>
#include <string.h>

#include "python_offsets.h"

/* Where, in 8-byte words from the record's start, each word we read is. */
struct record_words {
    int minor;
    unsigned tstate_size, tstate_frame;
    unsigned frame_size, frame_previous, frame_executable, frame_instruction, frame_owner;
    unsigned code_size, code_filename, code_qualname, code_first_line, code_adaptive;
    unsigned object_size, object_type;
    unsigned unicode_size, unicode_state, unicode_length, unicode_ascii_size;
};

/* 3.13: runtime state (3 words) and interpreter state (13) before the thread
 * state; 3.14 has 16 of the latter, two more in the frame's entry, one more
 * in the code object's, and a set object's entry before the dict's. */
static const struct record_words records[] = {
    {13, 19, 23, 28, 29, 30, 31, 33, 34, 35, 37, 39, 43, 44, 45, 67, 68, 69, 70},
    {14, 22, 26, 31, 32, 33, 34, 36, 39, 40, 42, 44, 48, 50, 51, 77, 78, 79, 80},
};

static uint64_t word(const unsigned char *published, unsigned index)
{
    uint64_t w;
    memcpy(&w, published + 8 * index, sizeof(w));
    return w;
}

/* Whether a field of `width` bytes at `offset` lies inside a structure of `size`. */
static int inside(uint64_t offset, uint64_t width, uint64_t size)
{
    return offset < size && width <= size - offset;
}

int python_offsets_read(const unsigned char *published, int major, int minor,
                        struct python_layout *out, const char **why)
{
    if (memcmp(published, "xdebugpy", 8) != 0) {
        *why = "no \"xdebugpy\" cookie at the start of _PyRuntime";
        return -1;
    }
    uint64_t version = word(published, 1);
    if ((int)(version >> 24) != major || (int)((version >> 16) & 0xff) != minor) {
        *why = "the version they state is not the interpreter's";
        return -1;
    }
    const struct record_words *r = NULL;
    for (size_t i = 0; i < sizeof(records) / sizeof(records[0]); i++)
        if (major == 3 && records[i].minor == minor)
            r = &records[i];
    if (!r) {
        *why = "their record is laid out in a way not known here (3.13 and 3.14 are)";
        return -1;
    }
    if (word(published, 2) != 0) {
        *why = "a free-threaded build";
        return -1;
    }
    const uint64_t pointer = sizeof(void *);
    if (word(published, r->object_size) != 2 * pointer ||
        word(published, r->object_type) != pointer) {
        *why = "the object header is not two words with the type second";
        return -1;
    }
    uint64_t tstate = word(published, r->tstate_size), frame = word(published, r->frame_size),
             code = word(published, r->code_size), unicode = word(published, r->unicode_size),
             ascii = word(published, r->unicode_ascii_size);
    if (tstate > 65536 || frame > 1024 || code > 4096 || unicode > 1024 || ascii > 1024 ||
        !inside(word(published, r->tstate_frame), pointer, tstate) ||
        !inside(word(published, r->frame_previous), pointer, frame) ||
        !inside(word(published, r->frame_executable), pointer, frame) ||
        !inside(word(published, r->frame_instruction), pointer, frame) ||
        !inside(word(published, r->frame_owner), 1, frame) ||
        !inside(word(published, r->code_filename), pointer, code) ||
        !inside(word(published, r->code_qualname), pointer, code) ||
        !inside(word(published, r->code_first_line), sizeof(int), code) ||
        !inside(word(published, r->code_adaptive), 2, code) ||
        !inside(word(published, r->unicode_state), sizeof(uint32_t), ascii) ||
        !inside(word(published, r->unicode_length), sizeof(int64_t), ascii) ||
        !inside(ascii, 3 * pointer, unicode)) { /* the compact header's two words, the data's */
        *why = "a size or offset out of bounds";
        return -1;
    }
    *out = (struct python_layout){
        .major = major,
        .minor = minor,
        .tstate_frame = word(published, r->tstate_frame),
        .frame_code = word(published, r->frame_executable),
        .frame_previous = word(published, r->frame_previous),
        .frame_instruction = word(published, r->frame_instruction),
        .frame_owner = word(published, r->frame_owner),
        .code_filename = word(published, r->code_filename),
        .code_name = word(published, r->code_qualname),
        .code_first_line = word(published, r->code_first_line),
        .code_start = word(published, r->code_adaptive),
        .ascii_size = ascii,
        .compact_size = ascii + 2 * pointer,
        .compact_utf8 = ascii + pointer,
        .string_state = word(published, r->unicode_state),
        .string_length = word(published, r->unicode_length),
        .code_tag_bits = minor >= 14 ? 3 : 0,
    };
    return 0;
}
