/* all_entry_points.c - call every intercepted allocation entry point once.
 *
 * "keep": nothing is freed, so the exit report lists every block with its
 * entry point, kind and size. "free": everything is freed again (through the
 * matching free of each API), so every counter must come back to zero.
 * It also checks, through the simulator's call counters, that each
 * per-thread-stream (_ptsz) wrapper reached the _ptsz driver function, and
 * prints a checksum of data copied through device memory, which must be the
 * same with and without the tracer. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
cudaError_t cudaMallocAsync_ptsz(void **, size_t, cudaStream_t);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **, size_t, cudaMemPool_t, cudaStream_t);
cudaError_t cudaFreeAsync_ptsz(void *, cudaStream_t);

static int failures;
#define RT(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                            \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define DRV(call)                                                                                  \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s: error %d\n", #call, (int)r_);                                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define KiB 1024
int main(int argc, char **argv)
{
    int keep = argc > 1 && strcmp(argv[1], "keep") == 0;

    /* Runtime entry points. */
    void *rt_device, *rt_managed, *rt_host, *rt_hostalloc, *rt_pitch, *rt_async, *rt_async_ptsz,
        *rt_pool, *rt_pool_ptsz;
    size_t pitch;
    struct cudaPitchedPtr pitched;
    cudaArray_t rt_array;
    struct cudaChannelFormatDesc channel = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaMemPool_t pool;
    struct cudaMemPoolProps pool_props;
    memset(&pool_props, 0, sizeof(pool_props));
    pool_props.allocType = cudaMemAllocationTypePinned;
    pool_props.location.type = cudaMemLocationTypeDevice;
    pool_props.location.id = 0;

    RT(cudaMalloc(&rt_device, 100 * KiB));
    RT(cudaMallocManaged(&rt_managed, 101 * KiB, cudaMemAttachGlobal));
    RT(cudaMallocHost(&rt_host, 102 * KiB));
    RT(cudaHostAlloc(&rt_hostalloc, 103 * KiB, 0));
    RT(cudaMallocPitch(&rt_pitch, &pitch, 1000, 10));
    struct cudaExtent extent = {1000, 4, 3};
    RT(cudaMalloc3D(&pitched, extent));
    RT(cudaMallocArray(&rt_array, &channel, 64, 32, 0));
    RT(cudaMallocAsync(&rt_async, 104 * KiB, 0));
    RT(cudaMallocAsync_ptsz(&rt_async_ptsz, 105 * KiB, 0));
    RT(cudaMemPoolCreate(&pool, &pool_props));
    RT(cudaMallocFromPoolAsync(&rt_pool, 106 * KiB, pool, 0));
    RT(cudaMallocFromPoolAsync_ptsz(&rt_pool_ptsz, 107 * KiB, pool, 0));

    /* Driver entry points, called directly (the runtime made a context current). */
    CUdeviceptr dv, dv_pitch, dv_managed, dv_async, dv_async_ptsz, dv_pool, dv_pool_ptsz, va;
    void *dv_host, *dv_hostalloc;
    static char registered[64 * KiB];
    size_t dv_pitch_bytes;
    CUarray array2d, array3d;
    CUmipmappedArray mipmapped;
    CUDA_ARRAY_DESCRIPTOR desc2d = {64, 16, CU_AD_FORMAT_FLOAT, 1};
    CUDA_ARRAY3D_DESCRIPTOR desc3d = {32, 8, 4, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
    CUmemGenericAllocationHandle physical;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemoryPool dpool = (CUmemoryPool)pool;

    DRV(cuMemAlloc(&dv, 200 * KiB));
    DRV(cuMemAllocPitch(&dv_pitch, &dv_pitch_bytes, 2000, 5, 4));
    DRV(cuMemAllocManaged(&dv_managed, 201 * KiB, CU_MEM_ATTACH_GLOBAL));
    DRV(cuMemAllocHost(&dv_host, 202 * KiB));
    DRV(cuMemHostAlloc(&dv_hostalloc, 203 * KiB, 0));
    DRV(cuMemHostRegister(registered, sizeof(registered), 0));
    DRV(cuMemAllocAsync(&dv_async, 204 * KiB, 0));
    DRV(cuMemAllocAsync_ptsz(&dv_async_ptsz, 205 * KiB, 0));
    DRV(cuMemAllocFromPoolAsync(&dv_pool, 206 * KiB, dpool, 0));
    DRV(cuMemAllocFromPoolAsync_ptsz(&dv_pool_ptsz, 207 * KiB, dpool, 0));
    DRV(cuMemCreate(&physical, 2 << 20, &prop, 0));
    DRV(cuMemAddressReserve(&va, 4 << 20, 0, 0, 0));
    DRV(cuMemMap(va, 2 << 20, 0, physical, 0));
    DRV(cuArrayCreate(&array2d, &desc2d));
    DRV(cuArray3DCreate(&array3d, &desc3d));
    DRV(cuMipmappedArrayCreate(&mipmapped, &desc3d, 2));

    /* Data through device memory: the tracer must not change it. */
    unsigned char in[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    RT(cudaMemcpy(rt_device, in, sizeof(in), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(out, rt_device, sizeof(out), cudaMemcpyDeviceToHost));
    unsigned long checksum = 0;
    for (int i = 0; i < 4096; i++)
        checksum = checksum * 31 + out[i];

    /* The _ptsz wrappers reached the _ptsz driver functions, the others the legacy ones. */
    printf("ptsz calls: alloc %lu/%lu pool %lu/%lu\n", simcuda_call_count("cuMemAllocAsync_ptsz"),
           simcuda_call_count("cuMemAllocAsync"),
           simcuda_call_count("cuMemAllocFromPoolAsync_ptsz"),
           simcuda_call_count("cuMemAllocFromPoolAsync"));

    if (!keep) {
        RT(cudaFree(rt_device));
        RT(cudaFree(rt_managed));
        RT(cudaFreeHost(rt_host));
        RT(cudaFreeHost(rt_hostalloc));
        RT(cudaFree(rt_pitch));
        RT(cudaFree(pitched.ptr));
        RT(cudaFreeArray(rt_array));
        RT(cudaFreeAsync(rt_async, 0));
        RT(cudaFreeAsync_ptsz(rt_async_ptsz, 0));
        RT(cudaFreeAsync(rt_pool, 0));
        RT(cudaFreeAsync_ptsz(rt_pool_ptsz, 0));
        DRV(cuMemFree(dv));
        DRV(cuMemFree(dv_pitch));
        DRV(cuMemFree(dv_managed));
        DRV(cuMemFreeHost(dv_host));
        DRV(cuMemFreeHost(dv_hostalloc));
        DRV(cuMemHostUnregister(registered));
        DRV(cuMemFreeAsync(dv_async, 0));
        DRV(cuMemFreeAsync_ptsz(dv_async_ptsz, 0));
        DRV(cuMemFreeAsync(dv_pool, 0));
        DRV(cuMemFreeAsync_ptsz(dv_pool_ptsz, 0));
        DRV(cuMemUnmap(va, 2 << 20));
        DRV(cuMemRelease(physical));
        DRV(cuMemAddressFree(va, 4 << 20));
        DRV(cuArrayDestroy(array2d));
        DRV(cuArrayDestroy(array3d));
        DRV(cuMipmappedArrayDestroy(mipmapped));
        RT(cudaMemPoolDestroy(pool));
    }
    printf("checksum %lu, failures %d\n", checksum, failures);
    return failures ? 1 : 0;
}
