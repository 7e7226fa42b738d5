/* procaddress.c - cuGetProcAddress, the driver's own symbol lookup.
 *
 * cudart asks cuGetProcAddress_v2 for "cuGetProcAddress" itself (versions
 * 11030 and 12000) and then uses the pointer it gets back for every other
 * lookup, so we hand back our own lookup functions: v1 (4 arguments) for
 * versions before 12000, v2 (5 arguments) from 12000. Every lookup of a name
 * in entrypoints.h returns our wrapper for that name, version and stream
 * flavour, and remembers the real function it stands for. */
#include "log.h"
#include "preload.h"

static void *wrap_lookup(const char *symbol, int version, cuuint64_t flags, void *real)
{
    int name_known;
    int api = entry_for_lookup(symbol, version, flags, &name_known);
    if (api < 0) {
        if (name_known) {
            tracker_lost(LOST_UNWRAPPED);
            log_debug("cuGetProcAddress(%s, %d): version not wrapped, passed through", symbol,
                      version);
        }
        return real;
    }
    real_offer(api, real);
    log_debug("cuGetProcAddress(%s, %d, %llu) -> wrapper of %s", symbol, version,
              (unsigned long long)flags, entries[api].symbol);
    return entries[api].wrapper;
}

PUBLIC CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    CUresult (*real)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        real_function(API_cuGetProcAddress_v2);
    if (!real)
        return driver_unresolved(API_cuGetProcAddress_v2);
    hook_call(API_cuGetProcAddress_v2);
    real_call_begin();
    CUresult result = real(symbol, pfn, version, flags, status);
    real_call_end();
    if (result == CUDA_SUCCESS && pfn && *pfn)
        *pfn = wrap_lookup(symbol, version, flags, *pfn);
    return hook_end(result);
}

PUBLIC CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    CUresult (*real)(const char *, void **, int, cuuint64_t) = real_function(API_cuGetProcAddress);
    if (!real)
        return driver_unresolved(API_cuGetProcAddress);
    hook_call(API_cuGetProcAddress);
    real_call_begin();
    CUresult result = real(symbol, pfn, version, flags);
    real_call_end();
    if (result == CUDA_SUCCESS && pfn && *pfn)
        *pfn = wrap_lookup(symbol, version, flags, *pfn);
    return hook_end(result);
}
