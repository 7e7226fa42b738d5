/* test_cuda_errors.c - src/report/cuda_errors.c's numbers are CUDA's: each
 * name looked up by its value in the toolkit's headers gives itself back.
 * (The report layer may not see CUDA's headers; this test may.) */
#include <cuda.h>
#include <driver_types.h>
#include <string.h>

#include "check.h"
#include "cuda_errors.h"

#define SAME(api, code)                                                                            \
    CHECK(cuda_error_name(api, code) && strcmp(cuda_error_name(api, code), #code) == 0)

int main(void)
{
    SAME("cudaMalloc", cudaErrorInvalidValue);
    SAME("cudaMalloc", cudaErrorMemoryAllocation);
    SAME("cudaMalloc", cudaErrorInitializationError);
    SAME("cudaMalloc", cudaErrorCudartUnloading);
    SAME("cudaMalloc", cudaErrorStubLibrary);
    SAME("cudaMalloc", cudaErrorInsufficientDriver);
    SAME("cudaMalloc", cudaErrorDevicesUnavailable);
    SAME("cudaMalloc", cudaErrorNoDevice);
    SAME("cudaMalloc", cudaErrorInvalidDevice);
    SAME("cudaMalloc", cudaErrorDeviceUninitialized);
    SAME("cudaMalloc", cudaErrorInvalidResourceHandle);
    SAME("cudaMalloc", cudaErrorIllegalAddress);
    SAME("cudaMalloc", cudaErrorContextIsDestroyed);
    SAME("cudaMalloc", cudaErrorNotPermitted);
    SAME("cudaMalloc", cudaErrorNotSupported);
    SAME("cudaMalloc", cudaErrorSystemDriverMismatch);
    SAME("cudaMalloc", cudaErrorUnknown);
    SAME("cuMemAlloc_v2", CUDA_ERROR_INVALID_VALUE);
    SAME("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY);
    SAME("cuMemAlloc_v2", CUDA_ERROR_NOT_INITIALIZED);
    SAME("cuMemAlloc_v2", CUDA_ERROR_DEINITIALIZED);
    SAME("cuMemAlloc_v2", CUDA_ERROR_STUB_LIBRARY);
    SAME("cuMemAlloc_v2", CUDA_ERROR_DEVICE_UNAVAILABLE);
    SAME("cuMemAlloc_v2", CUDA_ERROR_NO_DEVICE);
    SAME("cuMemAlloc_v2", CUDA_ERROR_INVALID_DEVICE);
    SAME("cuMemAlloc_v2", CUDA_ERROR_INVALID_CONTEXT);
    SAME("cuMemAlloc_v2", CUDA_ERROR_INVALID_HANDLE);
    SAME("cuMemAlloc_v2", CUDA_ERROR_ILLEGAL_ADDRESS);
    SAME("cuMemAlloc_v2", CUDA_ERROR_CONTEXT_IS_DESTROYED);
    SAME("cuMemAlloc_v2", CUDA_ERROR_NOT_PERMITTED);
    SAME("cuMemAlloc_v2", CUDA_ERROR_NOT_SUPPORTED);
    SAME("cuMemAlloc_v2", CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
    SAME("cuMemAlloc_v2", CUDA_ERROR_UNKNOWN);
    /* The same number, two meanings: the entry point decides. */
    CHECK(strcmp(cuda_error_name("cuMemAllocAsync", 2), "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    CHECK(strcmp(cuda_error_name("cudaMallocAsync_ptsz", 2), "cudaErrorMemoryAllocation") == 0);
    CHECK(cuda_error_name("cudaMalloc", 12345) == NULL);
    /* A framework's allocator giving up is not a CUDA error. */
    CHECK(cuda_error_name("torch_caching_allocator", 2) == NULL);
    CHECK(cuda_error_name(NULL, 2) == NULL);
    CHECK(cuda_error_no_driver("cudaMalloc", cudaErrorInsufficientDriver));
    CHECK(cuda_error_no_driver("cuMemAlloc_v2", CUDA_ERROR_NO_DEVICE));
    CHECK(!cuda_error_no_driver("cudaMalloc", cudaErrorMemoryAllocation));
    return check_done("cuda_errors");
}
