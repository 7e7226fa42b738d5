/* dlopen_driver.c - a program that finds the driver itself, as frameworks do:
 * dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2"), then every function
 * through it, including "cuGetProcAddress" (v1, version 11030) and the
 * per-thread-stream flavour of cuMemAllocAsync. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

int main(void)
{
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libcuda)
        return 1;
    gpa_v2_fn gpa = (gpa_v2_fn)dlsym(libcuda, "cuGetProcAddress_v2");
    unsigned long (*calls)(const char *) =
        (unsigned long (*)(const char *))dlsym(libcuda, "simcuda_call_count");
    CUdriverProcAddressQueryResult status;
    CUresult (*init)(unsigned), (*get)(CUdevice *, int), (*retain)(CUcontext *, CUdevice),
        (*set_current)(CUcontext), (*mem_alloc)(CUdeviceptr *, size_t),
        (*alloc_async)(CUdeviceptr *, size_t, CUstream), (*mem_free)(CUdeviceptr);
    gpa_v1_fn gpa_v1;
    if (gpa("cuInit", (void **)&init, 12000, 0, &status) ||
        gpa("cuDeviceGet", (void **)&get, 12000, 0, &status) ||
        gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, &status) ||
        gpa("cuCtxSetCurrent", (void **)&set_current, 12000, 0, &status) ||
        gpa("cuMemAlloc", (void **)&mem_alloc, 12000, 0, &status) ||
        gpa("cuMemAllocAsync", (void **)&alloc_async, 12000,
            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status) ||
        gpa("cuGetProcAddress", (void **)&gpa_v1, 11030, 0, &status))
        return 2;
    if (gpa_v1("cuMemFree", (void **)&mem_free, 11030, 0))
        return 3;
    CUdevice device;
    CUcontext context;
    CUdeviceptr a, b, c, d;
    if (init(0) || get(&device, 0) || retain(&context, device) || set_current(context))
        return 4;
    if (mem_alloc(&a, 1 << 20) || mem_alloc(&b, 1 << 20) || mem_alloc(&c, 1 << 20) ||
        alloc_async(&d, 1 << 20, 0))
        return 5;
    if (mem_free(a))
        return 6;
    printf("dlopen driver: async ptsz calls %lu, legacy %lu\n", calls("cuMemAllocAsync_ptsz"),
           calls("cuMemAllocAsync"));
    return 0;
}
