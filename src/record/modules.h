/* modules.h - where a loaded object (executable or shared library) lies. */
#ifndef CUMEMTRACE_MODULES_H
#define CUMEMTRACE_MODULES_H

#include <stdint.h>

/* The address range [*low, *high) of the loaded object containing `inside`:
 * 0, or -1 if no object contains it. */
int module_range(const void *inside, uintptr_t *low, uintptr_t *high);

#endif
