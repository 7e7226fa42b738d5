/* driver_api.c - the driver API used directly, VMM included, for the GPU suite.
 * Prints what it allocated and what it left live as one JSON line. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    CUdevice device;
    CUcontext context;
    int failures = 0;
    failures += cuInit(0) != CUDA_SUCCESS;
    failures += cuDeviceGet(&device, 0) != CUDA_SUCCESS;
    failures += cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS;
    failures += cuCtxSetCurrent(context) != CUDA_SUCCESS;

    CUdeviceptr a, b;
    failures += cuMemAlloc(&a, 8 << 20) != CUDA_SUCCESS;
    failures += cuMemAlloc(&b, 4 << 20) != CUDA_SUCCESS;
    failures += cuMemFree(a) != CUDA_SUCCESS;

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    failures += cuMemGetAllocationGranularity(&granularity, &prop,
                                              CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS;
    CUdeviceptr va;
    CUmemGenericAllocationHandle mapped, spare;
    size_t size = 4 * granularity;
    failures += cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS;
    failures += cuMemCreate(&mapped, size, &prop, 0) != CUDA_SUCCESS;
    failures += cuMemMap(va, size, 0, mapped, 0) != CUDA_SUCCESS;
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    failures += cuMemSetAccess(va, size, &access, 1) != CUDA_SUCCESS;
    failures += cuMemsetD8(va, 7, size) != CUDA_SUCCESS;
    failures += cuMemCreate(&spare, granularity, &prop, 0) != CUDA_SUCCESS; /* leaked */
    failures += cuMemUnmap(va, size) != CUDA_SUCCESS;
    failures += cuMemRelease(mapped) != CUDA_SUCCESS;
    failures += cuMemAddressFree(va, size) != CUDA_SUCCESS;
    /* allocations: 2 cuMemAlloc + 2 cuMemCreate (+ reservation and mapping, not memory) */
    printf("{\"allocations\": 4, \"live_bytes\": %zu, \"live_blocks\": 2, \"failures\": %d}\n",
           (size_t)(4 << 20) + granularity, failures);
    return failures != 0;
}
