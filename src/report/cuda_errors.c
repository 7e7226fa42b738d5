/* cuda_errors.c - names of CUDA's error codes (see cuda_errors.h).
 *
 * CUDA's headers are preload/'s alone (tests/check_layers.cmake), so the
 * numbers are written here; they are part of CUDA's ABI and never change,
 * and tests/unit/test_cuda_errors.c checks each against the headers. */
#include <stddef.h>
#include <string.h>

#include "cuda_errors.h"

struct named {
    int code;
    const char *name;
};

static const struct named runtime_errors[] = {
    /* cudaError_t */
    {1, "cudaErrorInvalidValue"},
    {2, "cudaErrorMemoryAllocation"},
    {3, "cudaErrorInitializationError"},
    {4, "cudaErrorCudartUnloading"},
    {34, "cudaErrorStubLibrary"},
    {35, "cudaErrorInsufficientDriver"},
    {46, "cudaErrorDevicesUnavailable"},
    {100, "cudaErrorNoDevice"},
    {101, "cudaErrorInvalidDevice"},
    {201, "cudaErrorDeviceUninitialized"},
    {400, "cudaErrorInvalidResourceHandle"},
    {700, "cudaErrorIllegalAddress"},
    {709, "cudaErrorContextIsDestroyed"},
    {800, "cudaErrorNotPermitted"},
    {801, "cudaErrorNotSupported"},
    {803, "cudaErrorSystemDriverMismatch"},
    {999, "cudaErrorUnknown"},
};

static const struct named driver_errors[] = {
    /* CUresult */
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

/* cudaMalloc, cudaMallocAsync_ptsz: the runtime's; cuMemAlloc_v2: the driver's. */
static int is_runtime(const char *api)
{
    return api && strncmp(api, "cuda", 4) == 0;
}

const char *cuda_error_name(const char *api, int code)
{
    if (!api || strncmp(api, "cu", 2) != 0)
        return NULL; /* a framework's allocator: its codes are not CUDA's */
    const struct named *table = is_runtime(api) ? runtime_errors : driver_errors;
    size_t count = is_runtime(api) ? sizeof(runtime_errors) / sizeof(runtime_errors[0])
                                   : sizeof(driver_errors) / sizeof(driver_errors[0]);
    for (size_t i = 0; i < count; i++)
        if (table[i].code == code)
            return table[i].name;
    return NULL;
}

/* No driver for the runtime, no device, the stub library, a driver older
 * than the runtime: nothing was ever going to be allocated. */
int cuda_error_no_driver(const char *api, int code)
{
    const char *name = cuda_error_name(api, code);
    static const char *const meaning[] = {
        "cudaErrorInsufficientDriver",       "cudaErrorNoDevice",    "cudaErrorStubLibrary",
        "cudaErrorSystemDriverMismatch",     "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_STUB_LIBRARY",
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    };
    for (size_t i = 0; name && i < sizeof(meaning) / sizeof(meaning[0]); i++)
        if (strcmp(name, meaning[i]) == 0)
            return 1;
    return 0;
}
