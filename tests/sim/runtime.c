/* runtime.c - the simulated CUDA runtime (libcudart.so.13 and a static
 * archive), test infrastructure.
 *
 * It reaches the driver exactly as the real cudart does (docs/DESIGN.md): dlopen
 * libcuda.so.1, dlsym "cuGetProcAddress_v2", ask that for "cuGetProcAddress"
 * at versions 11030 and 12000, and find every other driver function through
 * the 12000 pointer, with the per-thread-default-stream flag for the _ptsz
 * entry points. The primary context of the current device is retained on first
 * use and made current in each thread that calls in. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef cuGetProcAddress

#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*lookup_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

/* Driver functions, legacy flavour, and the per-thread flavour of a few. */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get_count)(int *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_reset)(CUdevice);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
    CUresult (*host_alloc)(void **, size_t, unsigned);
    CUresult (*free_host)(void *);
    CUresult (*host_register)(void *, size_t, unsigned);
    CUresult (*host_unregister)(void *);
    CUresult (*alloc_async[2])(CUdeviceptr *, size_t, CUstream);
    CUresult (*alloc_from_pool[2])(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*free_async[2])(CUdeviceptr, CUstream);
    CUresult (*pool_create)(CUmemoryPool *, const CUmemPoolProps *);
    CUresult (*pool_destroy)(CUmemoryPool);
    CUresult (*pool_trim)(CUmemoryPool, size_t);
    CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*array_destroy)(CUarray);
    CUresult (*copy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*copy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*copy_dtod)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*ctx_synchronize)(void);
} driver;

enum { LEGACY, PER_THREAD };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_error = cudaSuccess;
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[16];
static __thread int current_device;
static __thread cudaError_t last_error = cudaSuccess;

static cudaError_t to_runtime(CUresult result)
{
    switch (result) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
    default: return cudaErrorUnknown;
    }
}

static cudaError_t note(cudaError_t error)
{
    if (error != cudaSuccess)
        last_error = error;
    return error;
}

static lookup_fn get_proc;

static void *find(const char *name, cuuint64_t flags)
{
    void *function = NULL;
    CUdriverProcAddressQueryResult status;
    if (get_proc(name, &function, 12000, flags, &status) != CUDA_SUCCESS)
        return NULL;
    return function;
}

#define FIND(field, name) (*(void **)&driver.field = find(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM))
#define FIND_BOTH(field, name)                                                                     \
    (*(void **)&driver.field[LEGACY] = find(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM),              \
     *(void **)&driver.field[PER_THREAD] =                                                         \
         find(name, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))

/* Held across fork, as the driver's lock is (driver.c), and taken before
 * it: a child forked while another thread made its primary context current
 * would otherwise hang at its first call. */
static void lock_for_fork(void)
{
    pthread_mutex_lock(&primary_lock);
}

static void unlock_after_fork(void)
{
    pthread_mutex_unlock(&primary_lock);
}

static void load_driver(void)
{
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!libcuda) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    lookup_fn first = (lookup_fn)dlsym(libcuda, "cuGetProcAddress_v2");
    void *v1 = NULL, *v2 = NULL;
    CUdriverProcAddressQueryResult status;
    if (!first || first("cuGetProcAddress", &v1, 11030, 0, NULL) != CUDA_SUCCESS ||
        first("cuGetProcAddress", &v2, 12000, 0, &status) != CUDA_SUCCESS || !v1 || !v2) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    get_proc = (lookup_fn)v2;
    FIND(init, "cuInit");
    FIND(device_get_count, "cuDeviceGetCount");
    FIND(primary_retain, "cuDevicePrimaryCtxRetain");
    FIND(primary_reset, "cuDevicePrimaryCtxReset");
    FIND(ctx_get_current, "cuCtxGetCurrent");
    FIND(ctx_set_current, "cuCtxSetCurrent");
    FIND(mem_alloc, "cuMemAlloc");
    FIND(mem_alloc_pitch, "cuMemAllocPitch");
    FIND(mem_free, "cuMemFree");
    FIND(mem_get_info, "cuMemGetInfo");
    FIND(alloc_managed, "cuMemAllocManaged");
    FIND(host_alloc, "cuMemHostAlloc");
    FIND(free_host, "cuMemFreeHost");
    FIND(host_register, "cuMemHostRegister");
    FIND(host_unregister, "cuMemHostUnregister");
    FIND_BOTH(alloc_async, "cuMemAllocAsync");
    FIND_BOTH(alloc_from_pool, "cuMemAllocFromPoolAsync");
    FIND_BOTH(free_async, "cuMemFreeAsync");
    FIND(pool_create, "cuMemPoolCreate");
    FIND(pool_destroy, "cuMemPoolDestroy");
    FIND(pool_trim, "cuMemPoolTrimTo");
    FIND(array_create, "cuArrayCreate");
    FIND(array_destroy, "cuArrayDestroy");
    FIND(copy_htod, "cuMemcpyHtoD");
    FIND(copy_dtoh, "cuMemcpyDtoH");
    FIND(copy_dtod, "cuMemcpyDtoD");
    FIND(memset_d8, "cuMemsetD8");
    FIND(stream_create, "cuStreamCreate");
    FIND(stream_destroy, "cuStreamDestroy");
    FIND(stream_synchronize, "cuStreamSynchronize");
    FIND(ctx_synchronize, "cuCtxSynchronize");
    if (!driver.init || driver.init(0) != CUDA_SUCCESS)
        init_error = cudaErrorInitializationError;
    /* After the driver's: fork handlers prepare in reverse order, so this
     * lock is taken first, as ready() takes it. */
    pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

/* Load the driver once, and make the current device's primary context
 * current in this thread if it has none. */
static cudaError_t ready(void)
{
    pthread_once(&once, load_driver);
    if (init_error != cudaSuccess)
        return note(init_error);
    CUcontext context = NULL;
    driver.ctx_get_current(&context);
    if (context)
        return cudaSuccess;
    pthread_mutex_lock(&primary_lock);
    CUresult result = CUDA_SUCCESS;
    if (!primary[current_device])
        result = driver.primary_retain(&primary[current_device], current_device);
    context = primary[current_device];
    pthread_mutex_unlock(&primary_lock);
    if (result != CUDA_SUCCESS)
        return note(to_runtime(result));
    return note(to_runtime(driver.ctx_set_current(context)));
}

#define READY()                                                                                    \
    do {                                                                                           \
        cudaError_t ready_ = ready();                                                              \
        if (ready_ != cudaSuccess)                                                                 \
            return ready_;                                                                         \
    } while (0)

static cudaError_t call(CUresult result)
{
    return note(to_runtime(result));
}

/* ---- memory ------------------------------------------------------------------ */

EXPORT cudaError_t cudaMalloc(void **ptr, size_t size)
{
    READY();
    if (!ptr)
        return note(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return call(driver.mem_alloc((CUdeviceptr *)ptr, size));
}

EXPORT cudaError_t cudaFree(void *ptr)
{
    READY();
    return ptr ? call(driver.mem_free((CUdeviceptr)ptr)) : cudaSuccess;
}

EXPORT cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    READY();
    (void)flags;
    return call(driver.alloc_managed((CUdeviceptr *)ptr, size, CU_MEM_ATTACH_GLOBAL));
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    READY();
    return call(driver.host_alloc(ptr, size, 0));
}

EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    READY();
    return call(driver.host_alloc(ptr, size, flags));
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
    READY();
    return call(driver.free_host(ptr));
}

EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    READY();
    return call(driver.host_register(ptr, size, flags));
}

EXPORT cudaError_t cudaHostUnregister(void *ptr)
{
    READY();
    return call(driver.host_unregister(ptr));
}

EXPORT cudaError_t cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    READY();
    return call(driver.mem_alloc_pitch((CUdeviceptr *)ptr, pitch, width, height, 4));
}

EXPORT cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitched, struct cudaExtent extent)
{
    READY();
    size_t pitch = 0;
    CUdeviceptr ptr = 0;
    size_t rows = extent.height * (extent.depth ? extent.depth : 1);
    CUresult result = driver.mem_alloc_pitch(&ptr, &pitch, extent.width, rows, 4);
    if (result == CUDA_SUCCESS) {
        pitched->ptr = (void *)(uintptr_t)ptr;
        pitched->pitch = pitch;
        pitched->xsize = extent.width;
        pitched->ysize = extent.height;
    }
    return call(result);
}

EXPORT cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                   size_t width, size_t height, unsigned int flags)
{
    READY();
    (void)flags;
    int channels = (desc->x > 0) + (desc->y > 0) + (desc->z > 0) + (desc->w > 0);
    int bits = desc->x;
    CUDA_ARRAY_DESCRIPTOR d;
    d.Width = width;
    d.Height = height;
    d.NumChannels = channels ? channels : 1;
    if (desc->f == cudaChannelFormatKindFloat)
        d.Format = bits == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
    else if (desc->f == cudaChannelFormatKindSigned)
        d.Format = bits == 8    ? CU_AD_FORMAT_SIGNED_INT8
                   : bits == 16 ? CU_AD_FORMAT_SIGNED_INT16
                                : CU_AD_FORMAT_SIGNED_INT32;
    else
        d.Format = bits == 8    ? CU_AD_FORMAT_UNSIGNED_INT8
                   : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
                                : CU_AD_FORMAT_UNSIGNED_INT32;
    return call(driver.array_create((CUarray *)array, &d));
}

EXPORT cudaError_t cudaFreeArray(cudaArray_t array)
{
    READY();
    return array ? call(driver.array_destroy((CUarray)array)) : cudaSuccess;
}

static cudaError_t malloc_async(int flavour, void **ptr, size_t size, cudaStream_t stream)
{
    READY();
    return call(driver.alloc_async[flavour]((CUdeviceptr *)ptr, size, (CUstream)stream));
}

static cudaError_t malloc_from_pool(int flavour, void **ptr, size_t size, cudaMemPool_t pool,
                                    cudaStream_t stream)
{
    READY();
    return call(driver.alloc_from_pool[flavour]((CUdeviceptr *)ptr, size, (CUmemoryPool)pool,
                                                (CUstream)stream));
}

static cudaError_t free_async(int flavour, void *ptr, cudaStream_t stream)
{
    READY();
    return call(driver.free_async[flavour]((CUdeviceptr)ptr, (CUstream)stream));
}

EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(LEGACY, ptr, size, stream);
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    return malloc_async(PER_THREAD, ptr, size, stream);
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream)
{
    return malloc_from_pool(LEGACY, ptr, size, pool, stream);
}

EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream)
{
    return malloc_from_pool(PER_THREAD, ptr, size, pool, stream);
}

EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    return free_async(LEGACY, ptr, stream);
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    return free_async(PER_THREAD, ptr, stream);
}

EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    READY();
    CUmemPoolProps p;
    memset(&p, 0, sizeof(p));
    p.allocType = (CUmemAllocationType)props->allocType;
    p.handleTypes = (CUmemAllocationHandleType)props->handleTypes;
    p.location.type = (CUmemLocationType)props->location.type;
    p.location.id = props->location.id;
    return call(driver.pool_create((CUmemoryPool *)pool, &p));
}

EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
    READY();
    return call(driver.pool_destroy((CUmemoryPool)pool));
}

EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    READY();
    return call(driver.pool_trim((CUmemoryPool)pool, keep));
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    READY();
    return call(driver.mem_get_info(free_bytes, total));
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    READY();
    switch (kind) {
    case cudaMemcpyHostToDevice: return call(driver.copy_htod((CUdeviceptr)dst, src, count));
    case cudaMemcpyDeviceToHost: return call(driver.copy_dtoh(dst, (CUdeviceptr)src, count));
    case cudaMemcpyDeviceToDevice:
        return call(driver.copy_dtod((CUdeviceptr)dst, (CUdeviceptr)src, count));
    default:
        memmove(dst, src, count); /* unified addressing: plain memory either way */
        return cudaSuccess;
    }
}

EXPORT cudaError_t cudaMemset(void *ptr, int value, size_t count)
{
    READY();
    return call(driver.memset_d8((CUdeviceptr)ptr, (unsigned char)value, count));
}

/* ---- devices, streams, errors ---------------------------------------------------- */

EXPORT cudaError_t cudaSetDevice(int device)
{
    pthread_once(&once, load_driver);
    if (init_error != cudaSuccess)
        return note(init_error);
    int count = 0;
    driver.device_get_count(&count);
    if (device < 0 || device >= count)
        return note(cudaErrorInvalidDevice);
    current_device = device;
    pthread_mutex_lock(&primary_lock);
    CUresult result = CUDA_SUCCESS;
    if (!primary[device])
        result = driver.primary_retain(&primary[device], device);
    CUcontext context = primary[device];
    pthread_mutex_unlock(&primary_lock);
    if (result != CUDA_SUCCESS)
        return call(result);
    return call(driver.ctx_set_current(context));
}

EXPORT cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    pthread_once(&once, load_driver);
    if (init_error != cudaSuccess)
        return note(init_error);
    return call(driver.device_get_count(count));
}

EXPORT cudaError_t cudaDeviceReset(void)
{
    READY();
    pthread_mutex_lock(&primary_lock);
    CUresult result = driver.primary_reset(current_device);
    primary[current_device] = NULL;
    pthread_mutex_unlock(&primary_lock);
    driver.ctx_set_current(NULL);
    return call(result);
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    READY();
    return call(driver.ctx_synchronize());
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    READY();
    return call(driver.stream_create((CUstream *)stream, 0));
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    READY();
    return call(driver.stream_destroy((CUstream)stream));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    READY();
    return call(driver.stream_synchronize((CUstream)stream));
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInsufficientDriver: return "CUDA driver (simulator) not found";
    default: return "unknown error";
    }
}

EXPORT const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    default: return "cudaErrorUnknown";
    }
}

EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

EXPORT cudaError_t cudaDriverGetVersion(int *version)
{
    *version = 13000;
    return cudaSuccess;
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return cudaSuccess;
}
