/* fake_nccl.c - built as libnccl-sim.so (a name starting with libnccl, not
 * the real libnccl.so.2 a CUDA toolkit may have): allocates as NCCL does with
 * NCCL_CUMEM_ENABLE, so that reports can be checked to label its buffers.
 *
 * nccl_buffer(device, size): physical memory on `device` (cuMemCreate), an
 * address range, a mapping, access for device 0 - the shape of NCCL's
 * communication buffers, including a peer's memory mapped into this one's
 * address space when `device` is not the current device. */
#include <cuda.h>
#include <string.h>

__attribute__((visibility("default"))) CUdeviceptr nccl_buffer(int device, size_t size)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle handle;
    CUdeviceptr address;
    if (cuMemCreate(&handle, size, &prop, 0) != CUDA_SUCCESS ||
        cuMemAddressReserve(&address, size, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(address, size, 0, handle, 0) != CUDA_SUCCESS)
        return 0;
    CUmemAccessDesc access;
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(address, size, &access, 1) == CUDA_SUCCESS ? address : 0;
}
