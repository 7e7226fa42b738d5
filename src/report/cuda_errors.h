/* cuda_errors.h - the names of CUDA's error codes, for reports.
 *
 * A failed allocation records the code its entry point returned: a
 * cudaError_t for the runtime's (cudaMalloc), a CUresult for the driver's
 * (cuMemAlloc); the same number means different things in each. */
#ifndef CUMEMTRACE_CUDA_ERRORS_H
#define CUMEMTRACE_CUDA_ERRORS_H

/* "cudaErrorInsufficientDriver", "CUDA_ERROR_OUT_OF_MEMORY"; NULL when the
 * code is not one an allocation returns, or `api` is not CUDA's. `api` is
 * the entry point's name (cuda* for the runtime, cu* for the driver; a
 * framework's allocator, torch_caching_allocator, has no CUDA code). */
const char *cuda_error_name(const char *api, int code);
/* 1 for the codes that mean no usable driver or device was found. */
int cuda_error_no_driver(const char *api, int code);

#endif
