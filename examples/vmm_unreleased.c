/* vmm_unreleased.c - a virtual-memory physical allocation never released.
 *
 * The driver's VMM API separates physical memory (cuMemCreate) from address
 * space (cuMemAddressReserve) and mappings (cuMemMap). Here one handle is
 * mapped, used, unmapped and released properly; a second one is created for
 * a buffer that is never mapped and never released. compute-sanitizer's leak
 * check missed exactly this case on an H100; the report names create_spare().
 *
 *   LD_PRELOAD=build/libcumemtrace.so ./build/examples/vmm_unreleased
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s failed: %d\n", #call, (int)r_);                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static CUresult __attribute__((noinline))
create_spare(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop)
{
    return cuMemCreate(handle, size, prop, 0); /* never released: the leak */
}

int main(void)
{
    CUdevice device;
    CUcontext context;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&context, device));
    CHECK(cuCtxSetCurrent(context));

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    size_t granularity = 0;
    CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t size = 8 * granularity;

    CUdeviceptr va;
    CUmemGenericAllocationHandle used, spare;
    CHECK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CHECK(cuMemCreate(&used, size, &prop, 0));
    CHECK(cuMemMap(va, size, 0, used, 0));
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, size, &access, 1));
    CHECK(cuMemsetD8(va, 1, size));
    CHECK(create_spare(&spare, 2 * granularity, &prop));
    CHECK(cuMemUnmap(va, size));
    CHECK(cuMemRelease(used));
    CHECK(cuMemAddressFree(va, size));
    printf("vmm_unreleased: mapped and released %zu bytes; %zu bytes still held\n", size,
           2 * granularity);
    return 0;
}
