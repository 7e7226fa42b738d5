/* torch_classes.h - what PyTorch's live tensors are (torch_figures.h's
 * struct torch_classes), asked of Python at a report's moment
 * (torch_classes.c). A reading made for a report lists the tensors the
 * program's modules and optimizers hold, by address; the report matches
 * them to its blocks (src/report/classes.c). Nothing is done per tensor as
 * the program runs. */
#ifndef CUMEMTRACE_TORCH_CLASSES_H
#define CUMEMTRACE_TORCH_CLASSES_H

#include "torch_figures.h"

/* With the GIL: the modules and optimizers the program holds, read now,
 * and (CUMEMTRACE_HOLDERS) who holds the frameworks' arrays: PyTorch's,
 * CuPy's, JAX's, whichever are imported. NULL when out of memory. Released
 * with torch_classes_free. */
struct torch_classes *torch_classes_read(void);
void torch_classes_free(struct torch_classes *c); /* takes NULL */
/* With the GIL: who holds the frameworks' arrays, walked now within
 * CUMEMTRACE_HOLDERS_MS, whatever the setting says (the caller asks it).
 * NULL when out of memory. Released with torch_holders_free. */
struct torch_holders *torch_holders_read(void);
void torch_holders_free(struct torch_holders *h); /* takes NULL */

#endif
