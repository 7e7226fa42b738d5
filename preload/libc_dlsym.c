/* libc_dlsym.c - the C library's own dlsym, found once.
 *
 * Our dlsym (dlsym.c) shadows the C library's in the whole process, so every
 * look-up the tracer makes itself, and every one our dlsym passes on, goes to
 * the function found here: glibc's dlsym of the newest version we know, else
 * the old one. dlsym.c calls this before a sanitizer runtime is initialised
 * (the runtime looks its own interceptors up through dlsym), so this file is
 * built uninstrumented, as dlsym.c is, and calls nothing else on that path. */
#include <dlfcn.h>
#include <unistd.h>

#include "log.h"
#include "preload.h"

static dlsym_function found;

static dlsym_function find(void)
{
    dlsym_function next = (dlsym_function)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!next)
        next = (dlsym_function)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!next) {
        log_line("cannot find the C library's dlsym; this process cannot be traced");
        _exit(127);
    }
    __atomic_store_n(&found, next, __ATOMIC_RELEASE);
    return next;
}

dlsym_function libc_dlsym(void)
{
    dlsym_function next = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
    return next ? next : find();
}

void *real_dlsym(void *handle, const char *name)
{
    return libc_dlsym()(handle, name);
}
