/* python_layouts.c - the CPython versions whose frame layouts are known
 * (python_layout.h's table): a version's row for the walker (python.c),
 * and what is known of a version for `cumemtrace doctor`, which links no
 * walker. The table is included here alone. */
#include <stdio.h>

#include "python.h"
#include "python_layout.h"

const struct python_layout *python_layout_row(int major, int minor)
{
    for (size_t i = 0; i < sizeof(python_layouts) / sizeof(python_layouts[0]); i++)
        if (python_layouts[i].major == major && python_layouts[i].minor == minor)
            return &python_layouts[i];
    return NULL;
}

int python_layout_known(int major, int minor, char *known, size_t size)
{
    const size_t count = sizeof(python_layouts) / sizeof(python_layouts[0]);
    snprintf(known, size,
             "%d.%d to %d.%d by their known layouts, 3.13 on by the offsets the "
             "interpreter publishes",
             python_layouts[0].major, python_layouts[0].minor, python_layouts[count - 1].major,
             python_layouts[count - 1].minor);
    if (major > 3 || (major == 3 && minor >= 13))
        return 2; /* as choose_layout() reads them: checked when it starts */
    for (size_t i = 0; i < count; i++)
        if (python_layouts[i].major == major && python_layouts[i].minor == minor)
            return 1;
    return 0;
}
