/* entrypoints.h - every CUDA function cumemtrace intercepts, listed once.
 *
 * Each row names an exported symbol and says what the call does to memory.
 * The including file defines the row macros it cares about; the rest default
 * to nothing. driver.c and runtime.c turn rows into wrapper functions,
 * real.c into the tables that dlsym and cuGetProcAddress hand wrappers out of.
 *
 * Driver rows: symbol, the base name cuGetProcAddress is asked for, the lowest
 * cudaVersion that name maps to this symbol, and which stream flavour the
 * symbol is (per-thread default stream "_ptsz" functions are distinct
 * functions and get distinct wrappers):
 *
 *  DRIVER_ALLOC(symbol, base, version, flavour, (params), (args),
 *               kind, address, size, stream_or_pool, device)
 *      On success records a block; on failure records a failed allocation.
 *      `device` is DEVICE_OF_CONTEXT for the current context's device.
 *  DRIVER_FREE(symbol, base, version, flavour, (params), (args), space, address)
 *      Takes the block out of the registry before the real call; puts it
 *      back if the call fails.
 *  DRIVER_UNMAP(symbol, base, version, flavour, (params), (args), space, address, size)
 *      After a successful call, drops every block of `space` in the range.
 *  DRIVER_CALL(symbol, base, version, flavour, (params), (args), after)
 *      Calls through, then runs `after` (an expression that may use `result`).
 *  DRIVER_LOOKUP(symbol, base, version, flavour)
 *      Written by hand (cuGetProcAddress itself).
 *
 * Runtime rows only label: the driver wrapper underneath records the block
 * with the runtime's name. If no driver wrapper saw the call (a driver path we
 * do not know), the runtime wrapper records it itself.
 *
 *  RUNTIME_ALLOC(symbol, (params), (args), kind, address, size, stream_or_pool)
 *  RUNTIME_FREE(symbol, (params), (args), space, address)
 *  RUNTIME_CALL(symbol, (params), (args))
 *
 * Frameworks' allocators whose blocks are recorded inside their caches
 * (frameworks.c): no CUDA function and no wrapper, only the name such a
 * block carries where a CUDA block carries its entry point's.
 *
 *  CACHE_ALLOCATOR(name)
 */

#ifndef DRIVER_ALLOC
#define DRIVER_ALLOC(...)
#endif
#ifndef DRIVER_FREE
#define DRIVER_FREE(...)
#endif
#ifndef DRIVER_UNMAP
#define DRIVER_UNMAP(...)
#endif
#ifndef DRIVER_CALL
#define DRIVER_CALL(...)
#endif
#ifndef DRIVER_LOOKUP
#define DRIVER_LOOKUP(...)
#endif
#ifndef RUNTIME_ALLOC
#define RUNTIME_ALLOC(...)
#endif
#ifndef RUNTIME_FREE
#define RUNTIME_FREE(...)
#endif
#ifndef RUNTIME_CALL
#define RUNTIME_CALL(...)
#endif
#ifndef CACHE_ALLOCATOR
#define CACHE_ALLOCATOR(...)
#endif

/* ---- driver: lookups ---------------------------------------------------- */
/* One row per symbol, its arguments grouped as the table above says. */
/* clang-format off */
DRIVER_LOOKUP(cuGetProcAddress, "cuGetProcAddress", 11030, ANY)
DRIVER_LOOKUP(cuGetProcAddress_v2, "cuGetProcAddress", 12000, ANY)

/* ---- driver: device, managed and pinned memory -------------------------- */
DRIVER_ALLOC(cuMemAlloc_v2, "cuMemAlloc", 3020, ANY,
             (CUdeviceptr *dptr, size_t bytesize), (dptr, bytesize),
             KIND_DEVICE, *dptr, bytesize, 0, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, ANY,
             (CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int element),
             (dptr, pitch, width, height, element),
             KIND_DEVICE, *dptr, pitch_bytes(result == CUDA_SUCCESS, pitch, width, height), 0,
             DEVICE_OF_CONTEXT)
DRIVER_FREE(cuMemFree_v2, "cuMemFree", 3020, ANY,
            (CUdeviceptr dptr), (dptr), SPACE_MEMORY, dptr)
DRIVER_ALLOC(cuMemAllocManaged, "cuMemAllocManaged", 6000, ANY,
             (CUdeviceptr *dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags),
             KIND_MANAGED, *dptr, bytesize, 0, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemAllocHost_v2, "cuMemAllocHost", 3020, ANY,
             (void **pp, size_t bytesize), (pp, bytesize),
             KIND_PINNED_HOST, *pp, bytesize, 0, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemHostAlloc, "cuMemHostAlloc", 2020, ANY,
             (void **pp, size_t bytesize, unsigned int flags), (pp, bytesize, flags),
             KIND_PINNED_HOST, *pp, bytesize, 0, DEVICE_OF_CONTEXT)
DRIVER_FREE(cuMemFreeHost, "cuMemFreeHost", 2000, ANY,
            (void *p), (p), SPACE_MEMORY, p)
DRIVER_ALLOC(cuMemHostRegister_v2, "cuMemHostRegister", 6050, ANY,
             (void *p, size_t bytesize, unsigned int flags), (p, bytesize, flags),
             KIND_REGISTERED_HOST, p, bytesize, 0, DEVICE_OF_CONTEXT)
DRIVER_FREE(cuMemHostUnregister, "cuMemHostUnregister", 4000, ANY,
            (void *p), (p), SPACE_REGISTERED, p)

/* ---- driver: stream-ordered memory and pools ---------------------------- */
DRIVER_ALLOC(cuMemAllocAsync, "cuMemAllocAsync", 11020, LEGACY,
             (CUdeviceptr *dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream),
             KIND_STREAM_ORDERED, *dptr, bytesize, stream, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, PER_THREAD,
             (CUdeviceptr *dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream),
             KIND_STREAM_ORDERED, *dptr, bytesize, stream, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, LEGACY,
             (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
             (dptr, bytesize, pool, stream),
             KIND_STREAM_ORDERED, *dptr, bytesize, pool, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, PER_THREAD,
             (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream),
             (dptr, bytesize, pool, stream),
             KIND_STREAM_ORDERED, *dptr, bytesize, pool, DEVICE_OF_CONTEXT)
DRIVER_FREE(cuMemFreeAsync, "cuMemFreeAsync", 11020, LEGACY,
            (CUdeviceptr dptr, CUstream stream), (dptr, stream), SPACE_MEMORY, dptr)
DRIVER_FREE(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, PER_THREAD,
            (CUdeviceptr dptr, CUstream stream), (dptr, stream), SPACE_MEMORY, dptr)
DRIVER_CALL(cuMemPoolCreate, "cuMemPoolCreate", 11020, ANY,
            (CUmemoryPool *pool, const CUmemPoolProps *props), (pool, props),
            pool_created(result, pool, props))
DRIVER_CALL(cuMemPoolDestroy, "cuMemPoolDestroy", 11020, ANY,
            (CUmemoryPool pool), (pool), pool_destroyed(result, pool))
DRIVER_CALL(cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, ANY,
            (CUmemoryPool pool, size_t keep), (pool, keep), 0)

/* ---- driver: virtual memory management ---------------------------------- */
DRIVER_ALLOC(cuMemCreate, "cuMemCreate", 10020, ANY,
             (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
              unsigned long long flags), (handle, size, prop, flags),
             KIND_VMM_PHYSICAL, *handle, size, 0, device_of_location(prop))
DRIVER_FREE(cuMemRelease, "cuMemRelease", 10020, ANY,
            (CUmemGenericAllocationHandle handle), (handle), SPACE_VMM_HANDLE, handle)
DRIVER_ALLOC(cuMemAddressReserve, "cuMemAddressReserve", 10020, ANY,
             (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
              unsigned long long flags), (ptr, size, alignment, addr, flags),
             KIND_VMM_RESERVATION, *ptr, size, 0, DEVICE_NONE)
DRIVER_FREE(cuMemAddressFree, "cuMemAddressFree", 10020, ANY,
            (CUdeviceptr ptr, size_t size), (ptr, size), SPACE_VMM_RESERVATION, ptr)
DRIVER_ALLOC(cuMemMap, "cuMemMap", 10020, ANY,
             (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
              unsigned long long flags), (ptr, size, offset, handle, flags),
             KIND_VMM_MAPPING, ptr, size, 0, device_of_vmm_handle(handle))
DRIVER_UNMAP(cuMemUnmap, "cuMemUnmap", 10020, ANY,
             (CUdeviceptr ptr, size_t size), (ptr, size), SPACE_VMM_MAPPING, ptr, size)

/* ---- driver: arrays ----------------------------------------------------- */
DRIVER_ALLOC(cuArrayCreate_v2, "cuArrayCreate", 3020, ANY,
             (CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc), (array, desc),
             KIND_ARRAY, *array, array_bytes(desc->Format, desc->NumChannels, desc->Width,
                                             desc->Height, 1, 1), 0, DEVICE_OF_CONTEXT)
DRIVER_ALLOC(cuArray3DCreate_v2, "cuArray3DCreate", 3020, ANY,
             (CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc), (array, desc),
             KIND_ARRAY, *array, array_bytes(desc->Format, desc->NumChannels, desc->Width,
                                             desc->Height, desc->Depth, 1), 0, DEVICE_OF_CONTEXT)
DRIVER_FREE(cuArrayDestroy, "cuArrayDestroy", 2000, ANY,
            (CUarray array), (array), SPACE_ARRAY, array)
DRIVER_ALLOC(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, ANY,
             (CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels),
             (array, desc, levels),
             KIND_ARRAY, *array, array_bytes(desc->Format, desc->NumChannels, desc->Width,
                                             desc->Height, desc->Depth, levels),
             0, DEVICE_OF_CONTEXT)
DRIVER_FREE(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, ANY,
            (CUmipmappedArray array), (array), SPACE_ARRAY, array)

/* ---- driver: contexts, whose teardown frees memory implicitly ----------- */
DRIVER_CALL(cuCtxDestroy_v2, "cuCtxDestroy", 4000, ANY,
            (CUcontext ctx), (ctx), context_destroyed(result, ctx))
DRIVER_CALL(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, ANY,
            (CUcontext *ctx, CUdevice device), (ctx, device),
            context_primary_retained(result, ctx, device))
DRIVER_CALL(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset", 7000, ANY,
            (CUdevice device), (device), context_primary_reset(result, device))
DRIVER_CALL(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, ANY,
            (CUdevice device), (device), context_primary_reset(result, device))
DRIVER_CALL(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 7000, ANY,
            (CUdevice device), (device), context_primary_released(result, device))
DRIVER_CALL(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, ANY,
            (CUdevice device), (device), context_primary_released(result, device))
DRIVER_CALL(cuMemGetInfo_v2, "cuMemGetInfo", 3020, ANY,
            (size_t *free_bytes, size_t *total_bytes), (free_bytes, total_bytes), 0)

/* ---- runtime ------------------------------------------------------------ */
RUNTIME_ALLOC(cudaMalloc, (void **ptr, size_t size), (ptr, size),
              KIND_DEVICE, *ptr, size, 0)
RUNTIME_ALLOC(cudaMallocManaged, (void **ptr, size_t size, unsigned int flags),
              (ptr, size, flags), KIND_MANAGED, *ptr, size, 0)
RUNTIME_ALLOC(cudaMallocHost, (void **ptr, size_t size), (ptr, size),
              KIND_PINNED_HOST, *ptr, size, 0)
RUNTIME_ALLOC(cudaHostAlloc, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags),
              KIND_PINNED_HOST, *ptr, size, 0)
RUNTIME_ALLOC(cudaMallocPitch, (void **ptr, size_t *pitch, size_t width, size_t height),
              (ptr, pitch, width, height), KIND_DEVICE, *ptr,
              pitch_bytes(result == cudaSuccess, pitch, width, height), 0)
RUNTIME_ALLOC(cudaMalloc3D, (struct cudaPitchedPtr *pitched, struct cudaExtent extent),
              (pitched, extent), KIND_DEVICE, pitched->ptr,
              pitch_bytes(result == cudaSuccess, &pitched->pitch, extent.width,
                          extent.height * (extent.depth ? extent.depth : 1)), 0)
RUNTIME_ALLOC(cudaMallocArray,
              (cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t width,
               size_t height, unsigned int flags), (array, desc, width, height, flags),
              KIND_ARRAY, *array, channel_bytes(desc) * width * (height ? height : 1), 0)
RUNTIME_ALLOC(cudaMallocAsync, (void **ptr, size_t size, cudaStream_t stream),
              (ptr, size, stream), KIND_STREAM_ORDERED, *ptr, size, stream)
RUNTIME_ALLOC(cudaMallocAsync_ptsz, (void **ptr, size_t size, cudaStream_t stream),
              (ptr, size, stream), KIND_STREAM_ORDERED, *ptr, size, stream)
RUNTIME_ALLOC(cudaMallocFromPoolAsync,
              (void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream),
              (ptr, size, pool, stream), KIND_STREAM_ORDERED, *ptr, size, pool)
RUNTIME_ALLOC(cudaMallocFromPoolAsync_ptsz,
              (void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream),
              (ptr, size, pool, stream), KIND_STREAM_ORDERED, *ptr, size, pool)
RUNTIME_FREE(cudaFree, (void *ptr), (ptr), SPACE_MEMORY, ptr)
RUNTIME_FREE(cudaFreeHost, (void *ptr), (ptr), SPACE_MEMORY, ptr)
RUNTIME_FREE(cudaFreeArray, (cudaArray_t array), (array), SPACE_ARRAY, array)
RUNTIME_FREE(cudaFreeAsync, (void *ptr, cudaStream_t stream), (ptr, stream), SPACE_MEMORY, ptr)
RUNTIME_FREE(cudaFreeAsync_ptsz, (void *ptr, cudaStream_t stream), (ptr, stream),
             SPACE_MEMORY, ptr)
RUNTIME_CALL(cudaDeviceReset, (void), ())

/* ---- frameworks' caches --------------------------------------------------- */
CACHE_ALLOCATOR(torch_caching_allocator)
CACHE_ALLOCATOR(cupy_memory_pool)
CACHE_ALLOCATOR(jax_array)
/* clang-format on */

#undef DRIVER_ALLOC
#undef DRIVER_FREE
#undef DRIVER_UNMAP
#undef DRIVER_CALL
#undef DRIVER_LOOKUP
#undef RUNTIME_ALLOC
#undef RUNTIME_FREE
#undef RUNTIME_CALL
#undef CACHE_ALLOCATOR
