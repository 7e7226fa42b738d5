/* dlsym.c - our dlsym, so that lookups of CUDA functions return our wrappers.
 *
 * libcudart (shared and static) dlopens libcuda.so.1 and asks dlsym for
 * "cuGetProcAddress_v2"; from then on it finds every driver function through
 * that pointer. Without this override no driver-level allocation made through
 * cudart is ever seen (docs/DESIGN.md, verified on an H100).
 *
 * Any other name is forwarded to the real dlsym with a tail call: glibc uses
 * the return address to resolve RTLD_NEXT relative to the caller, and a tail
 * call leaves the caller's return address in place. CMake compiles this file
 * with sibling-call optimisation on and without sanitizers; tests check an
 * RTLD_NEXT lookup made through it. */
#include "log.h"
#include "preload.h"

PUBLIC void *dlsym(void *handle, const char *name)
{
    dlsym_function real = libc_dlsym();
    /* Only names starting with "cu" can be ours. Sanitizer runtimes look up
     * their interceptors through here before they are initialised, so this
     * file is built uninstrumented and, for other names, calls nothing but
     * libc_dlsym (uninstrumented too). */
    int api = name[0] == 'c' && name[1] == 'u' ? entry_by_symbol(name) : -1;
    if (api < 0)
        return real(handle, name); /* a tail call: see the top */
    void *function = real(handle, name);
    if (!function)
        return NULL;
    real_offer(api, function);
    log_debug("dlsym(%s) -> wrapper", name);
    return entries[api].wrapper;
}
