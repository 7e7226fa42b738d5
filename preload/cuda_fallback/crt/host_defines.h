/* crt/host_defines.h - the fallback for when CUDA's own is absent.
 *
 * pip's CUDA wheels (nvidia/cu13/include, nvidia/cuda_runtime/include) ship
 * cuda.h and cuda_runtime_api.h without the compiler's crt/ headers, which
 * come with nvcc; cuda_runtime_api.h and the type headers include this one
 * (and cuda_runtime.h, which PyTorch's headers include, crt/host_config.h).
 * cumemtrace and its PyTorch tracker include CUDA's headers only for types
 * and prototypes, compiled by a host compiler, where every CUDA keyword is
 * empty and alignment is the compiler's attribute. This folder is searched
 * after all others (-idirafter): a real crt/host_defines.h always wins. */
#ifndef CUMEMTRACE_CRT_HOST_DEFINES_H
#define CUMEMTRACE_CRT_HOST_DEFINES_H

#define __host__
#define __device__
#define __global__
#define __constant__
#define __managed__
#define __shared__
#define __cudart_builtin__
#define __device_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define __launch_bounds__(...)
#define CUDARTAPI
#define CUDART_CB
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __align__(n)
#define __cuda_builtin_vector_align8(tag, members)                                                 \
    struct __device_builtin__ __align__(8) tag                                                     \
    {                                                                                              \
        members                                                                                    \
    }

#endif
