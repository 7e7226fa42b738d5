/* dlsym.c - our dlsym, so that lookups of CUDA functions return our wrappers.
 *
 * libcudart (shared and static) dlopens libcuda.so.1 and asks dlsym for
 * "cuGetProcAddress_v2"; from then on it finds every driver function through
 * that pointer. Without this override no driver-level allocation made through
 * cudart is ever seen (DESIGN.md, verified on an H100).
 *
 * Any other name is forwarded to the real dlsym with a tail call: glibc uses
 * the return address to resolve RTLD_NEXT relative to the caller, and a tail
 * call leaves the caller's return address in place. CMake compiles this file
 * with sibling-call optimisation on and without sanitizers; tests check an
 * RTLD_NEXT lookup made through it. */
#include <dlfcn.h>
#include <unistd.h>

#include "log.h"
#include "preload.h"

typedef void *(*dlsym_function)(void *, const char *);
static dlsym_function next_dlsym;

static dlsym_function find_next_dlsym(void)
{
    dlsym_function found = (dlsym_function)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!found)
        found = (dlsym_function)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!found) {
        log_line("cannot find the C library's dlsym; this process cannot be traced");
        _exit(127);
    }
    __atomic_store_n(&next_dlsym, found, __ATOMIC_RELEASE);
    return found;
}

void *real_dlsym(void *handle, const char *name)
{
    dlsym_function real = __atomic_load_n(&next_dlsym, __ATOMIC_ACQUIRE);
    if (!real)
        real = find_next_dlsym();
    return real(handle, name);
}

PUBLIC void *dlsym(void *handle, const char *name)
{
    dlsym_function real = __atomic_load_n(&next_dlsym, __ATOMIC_ACQUIRE);
    if (!real)
        real = find_next_dlsym();
    /* Only names starting with "cu" can be ours. Sanitizer runtimes look up
     * their interceptors through here before they are initialised, so this
     * file is built uninstrumented and calls nothing else for other names. */
    int api = name[0] == 'c' && name[1] == 'u' ? entry_by_symbol(name) : -1;
    if (api < 0)
        return real(handle, name);          /* a tail call: see the top */
    void *function = real(handle, name);
    if (!function)
        return NULL;
    real_offer(api, function);
    log_debug("dlsym(%s) -> wrapper", name);
    return entries[api].wrapper;
}
