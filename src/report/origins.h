/* origins.h - where a frame's code comes from: the user's own code, CUDA's
 * libraries, a framework (PyTorch, CuPy, JAX, NumPy, Triton, NCCL and the
 * CUDA math libraries; pytest; the code Inductor, Triton and torch.fx
 * generate, and Dynamo, which runs it), another installed package's Python
 * (transformers, accelerate: a library), the Python interpreter (its
 * executable and libpython, libffi, the standard library, frozen modules),
 * the C runtime, or process and thread start-up. frames.h decides from it
 * what a stack shows. */
#ifndef CUMEMTRACE_ORIGINS_H
#define CUMEMTRACE_ORIGINS_H

#include "symbolize.h"

enum frame_origin {
    ORIGIN_USER,
    ORIGIN_CUDA,
    ORIGIN_FRAMEWORK,
    ORIGIN_INTERPRETER,
    ORIGIN_SYSTEM,  /* the C and C++ runtimes, the dynamic loader, the tracer */
    ORIGIN_STARTUP, /* _start, __libc_start_main, start_thread, clone */
    ORIGIN_LIBRARY, /* Python of a package installed in site-packages */
    ORIGIN_COUNT
};

/* "user", "cuda", "framework", "interpreter", "system", "startup",
 * "library". */
const char *origin_name(int origin);
/* The origin of one symbolized frame; NULL (nothing known) is the user's.
 * `user_packages` (NULL or "": none) is a comma-separated list of packages
 * installed in site-packages whose Python is the user's own all the same
 * (CUMEMTRACE_USER_PACKAGES: someone debugging transformers itself). */
int origin_of(const struct symbol *s, const char *user_packages);
/* The package of a Python file installed in site-packages or dist-packages:
 * its folder (or its module's name, without ".py") right under it, at most
 * `size` - 1 bytes into `name`; 0 if `file` is not installed there. */
int origin_package(const char *file, char *name, size_t size);

#endif
