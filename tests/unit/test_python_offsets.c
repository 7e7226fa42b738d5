/* test_python_offsets.c - reading CPython's published structure offsets
 * (src/record/python_offsets.c) from hand-made records: 3.13's, with the
 * offsets CPython 3.13.0 publishes (the same as python_layout.h's 3.13 row),
 * 3.14's, with its longer record, and records that must be refused: no
 * cookie, another version, an unknown one, a free-threaded build, a 3.14
 * record read as 3.13's, a field outside its structure. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "python_offsets.h"

static unsigned char record[PYTHON_OFFSETS_BYTES];

static void set(unsigned index, uint64_t value)
{
    memcpy(record + 8 * index, &value, sizeof(value));
}

/* The words of a record for 3.`minor`, from its struct _Py_DebugOffsets:
 * the sizes and the offsets python.c reads, every other word left 0. */
static void make_313(void)
{
    memset(record, 0, sizeof(record));
    memcpy(record, "xdebugpy", 8);
    set(1, 0x030d00f0);        /* 3.13.0 final */
    set(19, 368), set(23, 72); /* thread state: size, current_frame */
    set(28, 80), set(29, 8), set(30, 0), set(31, 56), set(33, 70);
    set(34, 208), set(35, 112), set(37, 128), set(39, 68), set(43, 200);
    set(44, 16), set(45, 8); /* PyObject: size, ob_type */
    set(67, 64), set(68, 32), set(69, 16), set(70, 40);
}

static void make_314(void)
{
    memset(record, 0, sizeof(record));
    memcpy(record, "xdebugpy", 8);
    set(1, 0x030e00f0);
    set(22, 400), set(26, 80);
    set(31, 88), set(32, 8), set(33, 0), set(34, 56), set(36, 74);
    set(39, 224), set(40, 112), set(42, 136), set(44, 68), set(48, 216);
    set(50, 16), set(51, 8);
    set(77, 64), set(78, 32), set(79, 16), set(80, 40);
}

int main(void)
{
    struct python_layout l;
    const char *why = NULL;

    make_313();
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), 0);
    CHECK_EQ(l.major, 3);
    CHECK_EQ(l.minor, 13);
    CHECK_EQ(l.tstate_frame, 72);
    CHECK_EQ(l.cframe_frame, 0);
    CHECK_EQ(l.frame_code, 0);
    CHECK_EQ(l.frame_previous, 8);
    CHECK_EQ(l.frame_instruction, 56);
    CHECK_EQ(l.frame_owner, 70);
    CHECK_EQ(l.code_filename, 112);
    CHECK_EQ(l.code_name, 128); /* co_qualname, not co_name */
    CHECK_EQ(l.code_first_line, 68);
    CHECK_EQ(l.code_start, 200);
    CHECK_EQ(l.code_first_traceable, 0); /* not published */
    CHECK_EQ(l.code_version, 0);         /* nor is co_version's */
    CHECK_EQ(l.ascii_size, 40);
    CHECK_EQ(l.compact_size, 56);
    CHECK_EQ(l.compact_utf8, 48);
    CHECK_EQ(l.string_state, 32);
    CHECK_EQ(l.string_length, 16);
    CHECK_EQ(l.code_tag_bits, 0);
    /* The table's 3.13 row, from 3.13.0's headers, says the same. */
    const struct python_layout *row = NULL;
    for (size_t i = 0; i < sizeof(python_layouts) / sizeof(python_layouts[0]); i++)
        if (python_layouts[i].minor == 13)
            row = &python_layouts[i];
    CHECK(row && row->tstate_frame == l.tstate_frame && row->frame_owner == l.frame_owner &&
          row->code_name == l.code_name && row->code_start == l.code_start &&
          row->compact_size == l.compact_size && row->compact_utf8 == l.compact_utf8);

    make_314();
    CHECK_EQ(python_offsets_read(record, 3, 14, &l, &why), 0);
    CHECK_EQ(l.minor, 14);
    CHECK_EQ(l.tstate_frame, 80);
    CHECK_EQ(l.frame_owner, 74);
    CHECK_EQ(l.code_name, 136);
    CHECK_EQ(l.code_start, 216);
    CHECK_EQ(l.code_tag_bits, 3); /* f_executable is a _PyStackRef */

    /* Refused, each with its reason. */
    make_313();
    record[0] = 'X';
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    CHECK(strstr(why, "cookie") != NULL);
    make_313();
    CHECK_EQ(python_offsets_read(record, 3, 12, &l, &why), -1);
    CHECK(strstr(why, "version") != NULL);
    make_313();
    set(1, 0x030f00a1);
    CHECK_EQ(python_offsets_read(record, 3, 15, &l, &why), -1);
    CHECK(strstr(why, "not known here") != NULL);
    make_313();
    set(2, 1);
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    CHECK(strstr(why, "free-threaded") != NULL);
    make_314(); /* a 3.14 record said to be 3.13's: the words are elsewhere */
    set(1, 0x030d00f0);
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    make_313();
    set(37, 208); /* co_qualname at the code object's end */
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    CHECK(strstr(why, "out of bounds") != NULL);
    make_313();
    set(28, 1 << 20); /* an absurd frame size */
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    make_313();
    set(70, 60); /* no room for the compact header in the str object */
    CHECK_EQ(python_offsets_read(record, 3, 13, &l, &why), -1);
    return check_done("python_offsets");
}
