/* python_offsets.h - the frame layout CPython publishes about itself (see python_offsets.c). */
#ifndef CUMEMTRACE_PYTHON_OFFSETS_H
#define CUMEMTRACE_PYTHON_OFFSETS_H

#include "python_layout.h"

/* How many bytes from the start of _PyRuntime python_offsets_read reads. */
#define PYTHON_OFFSETS_BYTES (81 * 8)

/* From `published` (the first PYTHON_OFFSETS_BYTES of _PyRuntime), the
 * layout of the running CPython, whose Py_GetVersion says `major`.`minor`.
 * Returns 0 with *out filled, where every offset was found in bounds; else
 * -1 with *why a phrase saying what is not as expected. Fields the
 * interpreter does not publish (code_first_traceable, code_version) are
 * left 0. */
int python_offsets_read(const unsigned char *published, int major, int minor,
                        struct python_layout *out, const char **why);

#endif
