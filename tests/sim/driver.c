/* driver.c - the simulated CUDA driver (libcuda.so.1), test infrastructure.
 *
 * Enough of the driver API for cumemtrace's hook paths to be exercised on a
 * machine without a GPU: devices with a fixed amount of memory handed out by a
 * first-fit allocator (so fragmentation is real), contexts that free their
 * memory when destroyed, pinned and managed host memory, stream-ordered pools,
 * virtual memory management, arrays, and cuGetProcAddress with distinct
 * per-thread-default-stream (_ptsz) functions, as the real driver has.
 *
 * Settings: SIMCUDA_DEVICES (default 2), SIMCUDA_MEMORY (one size, or one per
 * device separated by commas; K/M/G suffixes; default 8G), SIMCUDA_TRACE=1
 * (one line per call on stderr), SIMCUDA_FAIL_EVERY=N (every Nth device
 * allocation fails with CUDA_ERROR_OUT_OF_MEMORY), SIMCUDA_ABORT_AT=N (the Nth
 * device allocation calls abort(), inside the driver), SIMCUDA_BUMP=1 (for
 * benchmarks: cuMemAlloc/cuMemFree in O(1), addresses handed out in order and
 * never reused, memory not usable; with a million live blocks the first-fit
 * list would measure the simulator, not the tracer; each thread bumps
 * through 1 MiB chunks of its own and no call counts are kept, so that
 * threads share no cache line and the simulator scales with threads),
 * SIMCUDA_ALLOC_DELAY_US=N (every cuMemAlloc_v2 sleeps N us: a slow driver).
 *
 * Device memory is real memory (an mmap with MAP_NORESERVE per device), so
 * copies work and device addresses never collide with host addresses.
 * One mutex guards everything: simple, and fast enough for tests. */
#include <cuda.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "simcuda.h"

#undef cuGetProcAddress

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 8
#define ALIGN 512
#define GRANULARITY (2u << 20)
#define POOL_CHUNK (32u << 20)
#define BUMP_CHUNK (1u << 20) /* SIMCUDA_BUMP: what a thread takes at a time */

/* ---- call counters ------------------------------------------------------ */

/* clang-format off */
#define SIM_FUNCTIONS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)     \
    X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)                \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState) \
    X(cuCtxCreate_v4) X(cuCtxDestroy_v2) X(cuCtxGetCurrent) X(cuCtxSetCurrent)               \
    X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuCtxGetDevice) X(cuCtxSynchronize)        \
    X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuGetErrorString)        \
    X(cuGetErrorName) X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemFree_v2)                  \
    X(cuMemAllocManaged) X(cuMemAllocHost_v2) X(cuMemHostAlloc) X(cuMemFreeHost)              \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync)              \
    X(cuMemFreeAsync_ptsz) X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolTrimTo)          \
    X(cuMemPoolGetAttribute) X(cuDeviceGetDefaultMemPool) X(cuMemCreate) X(cuMemRelease)      \
    X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)    \
    X(cuMemGetAllocationGranularity) X(cuMemGetAllocationPropertiesFromHandle)                \
    X(cuArrayCreate_v2) X(cuArray3DCreate_v2)                                                 \
    X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy) X(cuMemGetInfo_v2) \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) X(cuMemsetD8_v2)                 \
    X(cuGetProcAddress) X(cuGetProcAddress_v2)
/* clang-format on */

enum {
#define ENUM(name) F_##name,
    SIM_FUNCTIONS(ENUM) /* F_name, one a function */
#undef ENUM
    F_COUNT
};
static const char *const function_names[F_COUNT] = {
#define NAME(name) #name,
    SIM_FUNCTIONS(NAME)
#undef NAME
};
static unsigned long calls[F_COUNT];
static int bump_mode;       /* SIMCUDA_BUMP */
static long alloc_delay_us; /* SIMCUDA_ALLOC_DELAY_US */
static int trace;

static void called(int function)
{
    if (!bump_mode) /* benchmark mode keeps no counts: threads would share them */
        __atomic_fetch_add(&calls[function], 1, __ATOMIC_RELAXED);
    if (trace)
        fprintf(stderr, "simcuda: %s\n", function_names[function]);
}

EXPORT unsigned long simcuda_call_count(const char *name)
{
    for (int i = 0; i < F_COUNT; i++)
        if (strcmp(function_names[i], name) == 0)
            return __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
    return 0;
}

/* ---- state ---------------------------------------------------------------- */

enum owner { DEVICE_MEMORY, ASYNC_MEMORY, VMM_PHYSICAL, ARRAY_MEMORY };

/* A piece of a device's memory, free or used; the list covers it all, in order. */
struct segment {
    uint64_t start, size;
    int used;
    int owner;
    struct context *context; /* NULL for memory that outlives contexts */
    struct pool *pool;
    struct segment *next;
};

struct context {
    int device;
    int alive;
    int primary;
};

struct pool {
    int device;
    uint64_t used, used_high, reserved, reserved_high;
    struct pool *next;
};

/* Host memory: pinned, managed, registered. */
enum host_kind { PINNED, MANAGED, REGISTERED };
struct host_block {
    void *address;
    size_t size;
    int registered; /* enum host_kind */
    struct context *context;
    struct host_block *next;
};

struct vmm_handle {
    uint64_t id;
    int device;
    uint64_t physical; /* its segment's start */
    int mappings;
    int released;
    struct vmm_handle *next;
};

struct reservation {
    uint64_t start, size;
    struct reservation *next;
};

struct mapping {
    uint64_t start, size;
    struct vmm_handle *handle;
    struct mapping *next;
};

struct array {
    uint64_t memory;
    struct context *context;
};

struct device {
    char *base;
    uint64_t size, used;
    uint64_t bump; /* SIMCUDA_BUMP: next free offset */
    struct segment *segments;
    struct context primary;
    int primary_references;
    struct pool default_pool;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int initialized;
static int device_count = 2;
static struct device devices[MAX_DEVICES];
static struct pool *pools;
static struct host_block *host_blocks;
static struct vmm_handle *vmm_handles;
static uint64_t next_vmm_id = 0x10000000;
static struct reservation *reservations;
static struct mapping *mappings;
static unsigned long fail_every, abort_at, device_allocations;
static __thread struct context *current;
static __thread struct context *stack[16];
static __thread int stack_depth;

static uint64_t parse_size(const char *text, int *ok)
{
    char *end;
    unsigned long long value = strtoull(text, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    *ok = end != text && (*end == '\0' || *end == ',') && value > 0;
    return (uint64_t)value << shift;
}

/* Held across fork, so that a child forked while another thread was inside
 * the simulator finds its state whole and its lock free. (A real driver
 * refuses a child the parent's CUDA state; the simulator keeps it usable so
 * that tests can check what the tracer does in such a child.) */
static void lock_for_fork(void)
{
    pthread_mutex_lock(&lock);
}

static void unlock_after_fork(void)
{
    pthread_mutex_unlock(&lock);
}

static void setup(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
    const char *text = getenv("SIMCUDA_DEVICES");
    if (text) {
        int n = atoi(text);
        if (n >= 1 && n <= MAX_DEVICES)
            device_count = n;
        else
            fprintf(stderr, "simcuda: SIMCUDA_DEVICES='%s' is not 1 to %d; using 2\n", text,
                    MAX_DEVICES);
    }
    trace = getenv("SIMCUDA_TRACE") && strcmp(getenv("SIMCUDA_TRACE"), "1") == 0;
    if (getenv("SIMCUDA_FAIL_EVERY"))
        fail_every = strtoul(getenv("SIMCUDA_FAIL_EVERY"), NULL, 10);
    bump_mode = getenv("SIMCUDA_BUMP") && strcmp(getenv("SIMCUDA_BUMP"), "1") == 0;
    if (getenv("SIMCUDA_ALLOC_DELAY_US"))
        alloc_delay_us = atol(getenv("SIMCUDA_ALLOC_DELAY_US"));
    if (getenv("SIMCUDA_ABORT_AT"))
        abort_at = strtoul(getenv("SIMCUDA_ABORT_AT"), NULL, 10);
    const char *memory = getenv("SIMCUDA_MEMORY");
    uint64_t size = 8ull << 30;
    for (int d = 0; d < device_count; d++) {
        if (memory && *memory) {
            int ok;
            uint64_t parsed = parse_size(memory, &ok);
            if (ok)
                size = (parsed + ALIGN - 1) / ALIGN * ALIGN;
            else
                fprintf(stderr, "simcuda: SIMCUDA_MEMORY='%s' is not a size; using %llu\n", memory,
                        (unsigned long long)size);
            const char *comma = strchr(memory, ',');
            memory = comma ? comma + 1 : NULL;
        }
        struct device *dev = &devices[d];
        dev->base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (dev->base == MAP_FAILED) {
            fprintf(stderr, "simcuda: cannot map %llu bytes for device %d\n",
                    (unsigned long long)size, d);
            abort();
        }
        dev->size = size;
        dev->segments = calloc(1, sizeof(struct segment));
        dev->segments->start = (uint64_t)(uintptr_t)dev->base;
        dev->segments->size = size;
        dev->primary.device = d;
        dev->primary.primary = 1;
        dev->default_pool.device = d;
    }
}

/* ---- device memory: first fit over the segment list (lock held) ------------ */

static uint64_t device_alloc(int device, uint64_t bytes, int owner, struct context *context,
                             struct pool *pool)
{
    struct device *dev = &devices[device];
    uint64_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (need == 0)
        need = ALIGN;
    ++device_allocations;
    if (abort_at && device_allocations == abort_at)
        abort(); /* SIMCUDA_ABORT_AT: a crash inside the driver */
    if (owner != VMM_PHYSICAL && fail_every && device_allocations % fail_every == 0)
        return 0;
    for (struct segment *s = dev->segments; s; s = s->next) {
        if (s->used || s->size < need)
            continue;
        if (s->size > need) {
            struct segment *rest = calloc(1, sizeof(*rest));
            rest->start = s->start + need;
            rest->size = s->size - need;
            rest->next = s->next;
            s->next = rest;
            s->size = need;
        }
        s->used = 1;
        s->owner = owner;
        s->context = context;
        s->pool = pool;
        dev->used += need;
        return s->start;
    }
    return 0;
}

static struct segment *find_segment(uint64_t address, int *device)
{
    for (int d = 0; d < device_count; d++) {
        uint64_t base = (uint64_t)(uintptr_t)devices[d].base;
        if (address < base || address >= base + devices[d].size)
            continue;
        for (struct segment *s = devices[d].segments; s; s = s->next)
            if (s->used && s->start == address) {
                *device = d;
                return s;
            }
    }
    return NULL;
}

/* Lock held. Merge neighbouring free segments. */
static void coalesce(struct device *dev)
{
    for (struct segment *p = dev->segments; p && p->next;) {
        struct segment *n = p->next;
        if (!p->used && !n->used) {
            p->size += n->size;
            p->next = n->next;
            free(n);
        } else {
            p = n;
        }
    }
}

/* Lock held. Mark a segment free; the caller coalesces. */
static void mark_free(int device, struct segment *s)
{
    devices[device].used -= s->size;
    if (s->pool)
        s->pool->used -= s->size;
    s->used = 0;
    s->context = NULL;
    s->pool = NULL;
}

static void device_free_segment(int device, struct segment *s)
{
    mark_free(device, s);
    coalesce(&devices[device]);
}

EXPORT size_t simcuda_used_bytes(int device)
{
    pthread_once(&setup_once, setup);
    return device >= 0 && device < device_count ? devices[device].used : 0;
}

EXPORT size_t simcuda_largest_free_block(int device)
{
    size_t largest = 0;
    pthread_once(&setup_once, setup);
    pthread_mutex_lock(&lock);
    if (device >= 0 && device < device_count)
        for (struct segment *s = devices[device].segments; s; s = s->next)
            if (!s->used && s->size > largest)
                largest = s->size;
    pthread_mutex_unlock(&lock);
    return largest;
}

/* ---- entry and contexts ---------------------------------------------------- */

#define ENTER(name)                                                                                \
    called(F_##name);                                                                              \
    if (!initialized && F_##name != F_cuInit)                                                      \
    return CUDA_ERROR_NOT_INITIALIZED

#define NEED_CONTEXT()                                                                             \
    if (!current || !current->alive)                                                               \
    return CUDA_ERROR_INVALID_CONTEXT

EXPORT CUresult cuInit(unsigned int flags)
{
    called(F_cuInit);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&setup_once, setup);
    initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    called(F_cuDriverGetVersion);
    *version = 13000;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    ENTER(cuDeviceGetCount);
    *count = device_count;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    ENTER(cuDeviceGet);
    if (ordinal < 0 || ordinal >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int length, CUdevice device)
{
    ENTER(cuDeviceGetName);
    snprintf(name, length, "cumemtrace simulated device %d", device);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device)
{
    ENTER(cuDeviceTotalMem_v2);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = devices[device].size;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice device)
{
    ENTER(cuDeviceGetAttribute);
    (void)device;
    *value = attribute == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED ? 1 : 0;
    return CUDA_SUCCESS;
}

/* Free what a dying context owns: device, pinned, managed, registered, arrays. */
static void context_teardown(struct context *context)
{
    struct device *dev = &devices[context->device];
    for (struct segment *s = dev->segments; s; s = s->next)
        if (s->used && s->context == context)
            mark_free(context->device, s);
    coalesce(dev);
    for (struct host_block **p = &host_blocks; *p;) {
        struct host_block *h = *p;
        if (h->context == context) {
            *p = h->next;
            if (h->registered != REGISTERED)
                munmap(h->address, h->size);
            free(h);
        } else {
            p = &h->next;
        }
    }
    context->alive = 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device)
{
    ENTER(cuDevicePrimaryCtxRetain);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    devices[device].primary.alive = 1;
    devices[device].primary_references++;
    pthread_mutex_unlock(&lock);
    *context = (CUcontext)&devices[device].primary;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device)
{
    ENTER(cuDevicePrimaryCtxRelease_v2);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    CUresult result = CUDA_SUCCESS;
    if (devices[device].primary_references == 0)
        result = CUDA_ERROR_INVALID_CONTEXT;
    else if (--devices[device].primary_references == 0)
        context_teardown(&devices[device].primary);
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice device)
{
    ENTER(cuDevicePrimaryCtxReset_v2);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    context_teardown(&devices[device].primary);
    devices[device].primary_references = 0;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int *flags, int *active)
{
    ENTER(cuDevicePrimaryCtxGetState);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = devices[device].primary.alive;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                               CUdevice device)
{
    ENTER(cuCtxCreate_v4);
    (void)params;
    (void)flags;
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    struct context *context = calloc(1, sizeof(*context));
    context->device = device;
    context->alive = 1;
    current = context;
    *pctx = (CUcontext)context;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    ENTER(cuCtxDestroy_v2);
    struct context *context = (struct context *)ctx;
    if (!context || !context->alive || context->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    context_teardown(context);
    pthread_mutex_unlock(&lock);
    if (current == context)
        current = NULL;
    return CUDA_SUCCESS; /* the struct is kept: a stale handle stays harmless */
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    ENTER(cuCtxGetCurrent);
    *ctx = (CUcontext)current;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    ENTER(cuCtxSetCurrent);
    current = (struct context *)ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    ENTER(cuCtxPushCurrent_v2);
    if (stack_depth == 16)
        return CUDA_ERROR_INVALID_VALUE;
    stack[stack_depth++] = current;
    current = (struct context *)ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
    ENTER(cuCtxPopCurrent_v2);
    if (stack_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx)
        *ctx = (CUcontext)current;
    current = stack[--stack_depth];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    ENTER(cuCtxGetDevice);
    NEED_CONTEXT();
    *device = current->device;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    ENTER(cuCtxSynchronize);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
    ENTER(cuStreamCreate);
    (void)flags;
    *stream = (CUstream)calloc(1, 16);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream)
{
    ENTER(cuStreamDestroy_v2);
    free(stream);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream)
{
    ENTER(cuStreamSynchronize);
    (void)stream;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **text)
{
    called(F_cuGetErrorString);
    switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
    default: *text = "unknown error"; break;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **text)
{
    called(F_cuGetErrorName);
    switch (error) {
    case CUDA_SUCCESS: *text = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "CUDA_ERROR_INVALID_VALUE"; break;
    default: *text = "CUDA_ERROR_UNKNOWN"; break;
    }
    return CUDA_SUCCESS;
}

/* ---- device memory ---------------------------------------------------------- */

static CUresult allocate(CUdeviceptr *dptr, size_t bytes, int owner, struct pool *pool)
{
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > SIZE_MAX - ALIGN) /* rounded up to ALIGN, it would wrap to nothing */
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (bump_mode && owner == DEVICE_MEMORY) { /* no lock: threads must not queue here */
        /* Each thread takes 1 MiB chunks of the device's range and hands out
         * its own chunk; the shared offset moves once a chunk, so threads
         * do not all write one cache line on every call. */
        static __thread struct {
            int device;
            uint64_t next, end;
        } chunk = {-1, 0, 0};
        struct device *dev = &devices[current->device];
        uint64_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN;
        if (chunk.device != current->device || chunk.next + need > chunk.end) {
            uint64_t size = need > BUMP_CHUNK ? need : BUMP_CHUNK;
            uint64_t at = __atomic_fetch_add(&dev->bump, size, __ATOMIC_RELAXED);
            if (at + size > dev->size)
                return CUDA_ERROR_OUT_OF_MEMORY;
            chunk.device = current->device;
            chunk.next = at;
            chunk.end = at + size;
        }
        *dptr = (CUdeviceptr)(uintptr_t)(dev->base + chunk.next);
        chunk.next += need;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&lock);
    int device = pool ? pool->device : current->device;
    uint64_t address =
        device_alloc(device, bytes, owner, owner == ASYNC_MEMORY ? NULL : current, pool);
    if (address && pool) {
        pool->used += (bytes + ALIGN - 1) / ALIGN * ALIGN;
        if (pool->used > pool->used_high)
            pool->used_high = pool->used;
        uint64_t reserve = (pool->used + POOL_CHUNK - 1) / POOL_CHUNK * POOL_CHUNK;
        if (reserve > pool->reserved)
            pool->reserved = reserve;
        if (pool->reserved > pool->reserved_high)
            pool->reserved_high = pool->reserved;
    }
    pthread_mutex_unlock(&lock);
    if (!address)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)address;
    return CUDA_SUCCESS;
}

static CUresult host_release(void *p, int kind);

static CUresult release(CUdeviceptr dptr, int async_only)
{
    int device;
    for (int d = 0; bump_mode && !async_only && d < device_count; d++)
        if (dptr >= (CUdeviceptr)(uintptr_t)devices[d].base &&
            dptr < (CUdeviceptr)(uintptr_t)(devices[d].base +
                                            __atomic_load_n(&devices[d].bump, __ATOMIC_RELAXED)))
            return CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    struct segment *s = find_segment((uint64_t)dptr, &device);
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    if (s && (s->owner == DEVICE_MEMORY || s->owner == ASYNC_MEMORY) &&
        (!async_only || s->owner == ASYNC_MEMORY)) {
        device_free_segment(device, s);
        result = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    ENTER(cuMemAlloc_v2);
    NEED_CONTEXT();
    if (alloc_delay_us > 0) { /* a slow driver: time the tracer must not count */
        struct timespec delay = {alloc_delay_us / 1000000, alloc_delay_us % 1000000 * 1000};
        nanosleep(&delay, NULL);
    }
    return allocate(dptr, bytes, DEVICE_MEMORY, NULL);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int element)
{
    ENTER(cuMemAllocPitch_v2);
    NEED_CONTEXT();
    if (element != 4 && element != 8 && element != 16)
        return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (width + ALIGN - 1) / ALIGN * ALIGN;
    CUresult result = allocate(dptr, rounded * height, DEVICE_MEMORY, NULL);
    if (result == CUDA_SUCCESS)
        *pitch = rounded;
    return result;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    ENTER(cuMemFree_v2);
    CUresult result = release(dptr, 0);
    if (result != CUDA_SUCCESS)
        result = host_release((void *)(uintptr_t)dptr, MANAGED);
    return result;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    ENTER(cuMemGetInfo_v2);
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    struct device *dev = &devices[current->device];
    *free_bytes = dev->size - dev->used;
    *total = dev->size;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* ---- host memory -------------------------------------------------------------- */

static CUresult host_alloc(void **pp, size_t bytes, int kind)
{
    if (!pp || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct host_block *h = calloc(1, sizeof(*h));
    h->address = p;
    h->size = bytes;
    h->registered = kind;
    h->context = current;
    pthread_mutex_lock(&lock);
    h->next = host_blocks;
    host_blocks = h;
    pthread_mutex_unlock(&lock);
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult host_release(void *p, int kind)
{
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (struct host_block **q = &host_blocks; *q; q = &(*q)->next) {
        struct host_block *h = *q;
        if (h->address == p && h->registered == kind) {
            *q = h->next;
            if (kind != REGISTERED)
                munmap(h->address, h->size);
            free(h);
            result = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags)
{
    ENTER(cuMemAllocManaged);
    NEED_CONTEXT();
    (void)flags;
    void *p;
    CUresult result = host_alloc(&p, bytes, MANAGED);
    if (result == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)(uintptr_t)p;
    return result;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes)
{
    ENTER(cuMemAllocHost_v2);
    NEED_CONTEXT();
    return host_alloc(pp, bytes, PINNED);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    ENTER(cuMemHostAlloc);
    NEED_CONTEXT();
    (void)flags;
    return host_alloc(pp, bytes, PINNED);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    ENTER(cuMemFreeHost);
    return host_release(p, PINNED);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)
{
    ENTER(cuMemHostRegister_v2);
    NEED_CONTEXT();
    (void)flags;
    if (!p || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (struct host_block *h = host_blocks; h; h = h->next)
        if (h->registered == REGISTERED && h->address == p) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    struct host_block *h = calloc(1, sizeof(*h));
    h->address = p;
    h->size = bytes;
    h->registered = REGISTERED;
    h->context = current;
    h->next = host_blocks;
    host_blocks = h;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    ENTER(cuMemHostUnregister);
    CUresult result = host_release(p, REGISTERED);
    return result == CUDA_SUCCESS ? result : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ---- stream-ordered memory ------------------------------------------------------ */

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    ENTER(cuMemAllocAsync);
    NEED_CONTEXT();
    (void)stream;
    return allocate(dptr, bytes, ASYNC_MEMORY, &devices[current->device].default_pool);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    ENTER(cuMemAllocAsync_ptsz);
    NEED_CONTEXT();
    (void)stream;
    return allocate(dptr, bytes, ASYNC_MEMORY, &devices[current->device].default_pool);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                        CUstream stream)
{
    ENTER(cuMemAllocFromPoolAsync);
    (void)stream;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return allocate(dptr, bytes, ASYNC_MEMORY, (struct pool *)pool);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                             CUstream stream)
{
    ENTER(cuMemAllocFromPoolAsync_ptsz);
    (void)stream;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return allocate(dptr, bytes, ASYNC_MEMORY, (struct pool *)pool);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    ENTER(cuMemFreeAsync);
    (void)stream;
    return release(dptr, 1);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    ENTER(cuMemFreeAsync_ptsz);
    (void)stream;
    return release(dptr, 1);
}

EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    ENTER(cuMemPoolCreate);
    if (!pool || !props || props->location.id < 0 || props->location.id >= device_count)
        return CUDA_ERROR_INVALID_VALUE;
    struct pool *p = calloc(1, sizeof(*p));
    p->device = props->location.id;
    pthread_mutex_lock(&lock);
    p->next = pools;
    pools = p;
    pthread_mutex_unlock(&lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    ENTER(cuMemPoolDestroy);
    pthread_mutex_lock(&lock);
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    for (struct pool **q = &pools; *q; q = &(*q)->next)
        if (*q == (struct pool *)pool) {
            *q = (*q)->next; /* outstanding blocks stay valid, as in real CUDA */
            result = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    ENTER(cuMemPoolTrimTo);
    struct pool *p = (struct pool *)pool;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    uint64_t floor = (p->used + POOL_CHUNK - 1) / POOL_CHUNK * POOL_CHUNK;
    uint64_t target = keep > floor ? (keep + POOL_CHUNK - 1) / POOL_CHUNK * POOL_CHUNK : floor;
    if (target < p->reserved)
        p->reserved = target;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void *value)
{
    ENTER(cuMemPoolGetAttribute);
    struct pool *p = (struct pool *)pool;
    if (!p || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *out = value;
    switch (attribute) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p->used_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice device)
{
    ENTER(cuDeviceGetDefaultMemPool);
    if (device < 0 || device >= device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&devices[device].default_pool;
    return CUDA_SUCCESS;
}

/* ---- virtual memory management ------------------------------------------------- */

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    ENTER(cuMemGetAllocationGranularity);
    (void)prop;
    (void)option;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

static struct vmm_handle *vmm_find(uint64_t id)
{
    for (struct vmm_handle *h = vmm_handles; h; h = h->next)
        if (h->id == id && !h->released)
            return h;
    return NULL;
}

static CUresult create_handle(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop)
{
    if (!handle || !prop || size == 0 || size % GRANULARITY ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
        prop->location.id >= device_count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    uint64_t physical = device_alloc(prop->location.id, size, VMM_PHYSICAL, NULL, NULL);
    CUresult result = CUDA_ERROR_OUT_OF_MEMORY;
    if (physical) {
        struct vmm_handle *h = calloc(1, sizeof(*h));
        h->id = next_vmm_id;
        next_vmm_id += 0x10;
        h->device = prop->location.id;
        h->physical = physical;
        h->next = vmm_handles;
        vmm_handles = h;
        *handle = h->id;
        result = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    ENTER(cuMemCreate);
    (void)flags;
    return create_handle(handle, size, prop);
}

/* What real CUDA answers for any handle, one imported from another process
 * included: where its memory is. */
EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle)
{
    ENTER(cuMemGetAllocationPropertiesFromHandle);
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct vmm_handle *h = vmm_find(handle);
    if (h) {
        memset(prop, 0, sizeof(*prop));
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = h->device;
    }
    pthread_mutex_unlock(&lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A handle the tracer never saw created, as one imported from another
 * process (cuMemImportFromShareableHandle) would be: made by an internal
 * call, not through the exported, interposed cuMemCreate. */
EXPORT int simcuda_foreign_handle(CUmemGenericAllocationHandle *handle, size_t size, int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    pthread_once(&setup_once, setup);
    return create_handle(handle, size, &prop) == CUDA_SUCCESS ? 0 : -1;
}

/* Lock held. Drop a handle once it is released and no longer mapped. */
static void vmm_maybe_free(struct vmm_handle *h)
{
    if (!h->released || h->mappings > 0)
        return;
    int device;
    struct segment *s = find_segment(h->physical, &device);
    if (s)
        device_free_segment(device, s);
    for (struct vmm_handle **q = &vmm_handles; *q; q = &(*q)->next)
        if (*q == h) {
            *q = h->next;
            break;
        }
    free(h);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    ENTER(cuMemRelease);
    pthread_mutex_lock(&lock);
    struct vmm_handle *h = vmm_find(handle);
    if (h) {
        h->released = 1;
        vmm_maybe_free(h);
    }
    pthread_mutex_unlock(&lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    ENTER(cuMemAddressReserve);
    (void)addr;
    (void)flags;
    if (!ptr || size == 0 || size % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULARITY)
        alignment = GRANULARITY;
    size_t span = size + alignment;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t start = ((uint64_t)(uintptr_t)p + alignment - 1) / alignment * alignment;
    if (start > (uint64_t)(uintptr_t)p)
        munmap(p, start - (uint64_t)(uintptr_t)p);
    uint64_t end = (uint64_t)(uintptr_t)p + span;
    if (end > start + size)
        munmap((void *)(uintptr_t)(start + size), end - (start + size));
    struct reservation *r = calloc(1, sizeof(*r));
    r->start = start;
    r->size = size;
    pthread_mutex_lock(&lock);
    r->next = reservations;
    reservations = r;
    pthread_mutex_unlock(&lock);
    *ptr = (CUdeviceptr)start;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    ENTER(cuMemAddressFree);
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (struct reservation **q = &reservations; *q; q = &(*q)->next) {
        struct reservation *r = *q;
        if (r->start == (uint64_t)ptr && r->size == size) {
            *q = r->next;
            munmap((void *)(uintptr_t)r->start, r->size);
            free(r);
            result = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    ENTER(cuMemMap);
    (void)offset;
    (void)flags;
    CUresult result = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct vmm_handle *h = vmm_find(handle);
    int inside = 0;
    for (struct reservation *r = reservations; r; r = r->next)
        if ((uint64_t)ptr >= r->start && (uint64_t)ptr + size <= r->start + r->size)
            inside = 1;
    if (h && inside && size % GRANULARITY == 0) {
        struct mapping *m = calloc(1, sizeof(*m));
        m->start = (uint64_t)ptr;
        m->size = size;
        m->handle = h;
        m->next = mappings;
        mappings = m;
        h->mappings++;
        mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE);
        result = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    ENTER(cuMemUnmap);
    uint64_t start = (uint64_t)ptr, end = start + size;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (struct mapping **q = &mappings; *q;) {
        struct mapping *m = *q;
        if (m->start >= start && m->start + m->size <= end) {
            *q = m->next;
            mprotect((void *)(uintptr_t)m->start, m->size, PROT_NONE);
            m->handle->mappings--;
            vmm_maybe_free(m->handle);
            free(m);
            found = 1;
        } else {
            q = &m->next;
        }
    }
    pthread_mutex_unlock(&lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    ENTER(cuMemSetAccess);
    (void)ptr;
    (void)size;
    return desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- arrays ----------------------------------------------------------------- */

static size_t format_bytes(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static CUresult array_create(void **handle, size_t bytes)
{
    NEED_CONTEXT();
    if (!handle || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr memory;
    CUresult result = allocate(&memory, bytes, ARRAY_MEMORY, NULL);
    if (result != CUDA_SUCCESS)
        return result;
    struct array *a = calloc(1, sizeof(*a));
    a->memory = memory;
    a->context = current;
    *handle = a;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(void *handle)
{
    struct array *a = handle;
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    int device;
    pthread_mutex_lock(&lock);
    struct segment *s = find_segment(a->memory, &device);
    if (s && s->owner == ARRAY_MEMORY)
        device_free_segment(device, s);
    pthread_mutex_unlock(&lock);
    free(a);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static size_t extent(size_t n)
{
    return n ? n : 1;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    ENTER(cuArrayCreate_v2);
    size_t bytes =
        desc->Width * extent(desc->Height) * desc->NumChannels * format_bytes(desc->Format);
    return array_create((void **)array, bytes);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    ENTER(cuArray3DCreate_v2);
    size_t bytes = desc->Width * extent(desc->Height) * extent(desc->Depth) * desc->NumChannels *
                   format_bytes(desc->Format);
    return array_create((void **)array, bytes);
}

EXPORT CUresult cuArrayDestroy(CUarray array)
{
    ENTER(cuArrayDestroy);
    return array_destroy(array);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                       unsigned int levels)
{
    ENTER(cuMipmappedArrayCreate);
    size_t width = desc->Width, height = desc->Height, depth = desc->Depth, bytes = 0;
    for (unsigned level = 0; level < (levels ? levels : 1); level++) {
        bytes += extent(width) * extent(height) * extent(depth) * desc->NumChannels *
                 format_bytes(desc->Format);
        width = width > 1 ? width / 2 : 1;
        height = height > 1 ? height / 2 : height;
        depth = depth > 1 ? depth / 2 : depth;
    }
    return array_create((void **)array, bytes);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array)
{
    ENTER(cuMipmappedArrayDestroy);
    return array_destroy(array);
}

/* ---- copies ------------------------------------------------------------------- */

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
    ENTER(cuMemcpyHtoD_v2);
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)
{
    ENTER(cuMemcpyDtoH_v2);
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    ENTER(cuMemcpyDtoD_v2);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count)
{
    ENTER(cuMemsetD8_v2);
    memset((void *)(uintptr_t)dst, value, count);
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress --------------------------------------------------------- */

/* Base names as callers ask for them; the per-thread flavour where one exists. */
static const struct {
    const char *name;
    void *legacy;
    void *per_thread;
    int version;
} lookups[] = {
    {"cuInit", (void *)cuInit, NULL, 2000},
    {"cuDriverGetVersion", (void *)cuDriverGetVersion, NULL, 2020},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount, NULL, 2000},
    {"cuDeviceGet", (void *)cuDeviceGet, NULL, 2000},
    {"cuDeviceGetName", (void *)cuDeviceGetName, NULL, 2000},
    {"cuDeviceTotalMem", (void *)cuDeviceTotalMem_v2, NULL, 3020},
    {"cuDeviceGetAttribute", (void *)cuDeviceGetAttribute, NULL, 2000},
    {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain, NULL, 7000},
    {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2, NULL, 11000},
    {"cuDevicePrimaryCtxReset", (void *)cuDevicePrimaryCtxReset_v2, NULL, 11000},
    {"cuDevicePrimaryCtxGetState", (void *)cuDevicePrimaryCtxGetState, NULL, 7000},
    {"cuCtxCreate", (void *)cuCtxCreate_v4, NULL, 12050},
    {"cuCtxDestroy", (void *)cuCtxDestroy_v2, NULL, 4000},
    {"cuCtxGetCurrent", (void *)cuCtxGetCurrent, NULL, 4000},
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent, NULL, 4000},
    {"cuCtxPushCurrent", (void *)cuCtxPushCurrent_v2, NULL, 4000},
    {"cuCtxPopCurrent", (void *)cuCtxPopCurrent_v2, NULL, 4000},
    {"cuCtxGetDevice", (void *)cuCtxGetDevice, NULL, 2000},
    {"cuCtxSynchronize", (void *)cuCtxSynchronize, NULL, 2000},
    {"cuStreamCreate", (void *)cuStreamCreate, NULL, 2000},
    {"cuStreamDestroy", (void *)cuStreamDestroy_v2, NULL, 4000},
    {"cuStreamSynchronize", (void *)cuStreamSynchronize, NULL, 2000},
    {"cuGetErrorString", (void *)cuGetErrorString, NULL, 6000},
    {"cuGetErrorName", (void *)cuGetErrorName, NULL, 6000},
    {"cuMemAlloc", (void *)cuMemAlloc_v2, NULL, 3020},
    {"cuMemAllocPitch", (void *)cuMemAllocPitch_v2, NULL, 3020},
    {"cuMemFree", (void *)cuMemFree_v2, NULL, 3020},
    {"cuMemGetInfo", (void *)cuMemGetInfo_v2, NULL, 3020},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged, NULL, 6000},
    {"cuMemAllocHost", (void *)cuMemAllocHost_v2, NULL, 3020},
    {"cuMemHostAlloc", (void *)cuMemHostAlloc, NULL, 2020},
    {"cuMemFreeHost", (void *)cuMemFreeHost, NULL, 2000},
    {"cuMemHostRegister", (void *)cuMemHostRegister_v2, NULL, 6050},
    {"cuMemHostUnregister", (void *)cuMemHostUnregister, NULL, 4000},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz, 11020},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync,
     (void *)cuMemAllocFromPoolAsync_ptsz, 11020},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz, 11020},
    {"cuMemPoolCreate", (void *)cuMemPoolCreate, NULL, 11020},
    {"cuMemPoolDestroy", (void *)cuMemPoolDestroy, NULL, 11020},
    {"cuMemPoolTrimTo", (void *)cuMemPoolTrimTo, NULL, 11020},
    {"cuMemPoolGetAttribute", (void *)cuMemPoolGetAttribute, NULL, 11020},
    {"cuDeviceGetDefaultMemPool", (void *)cuDeviceGetDefaultMemPool, NULL, 11020},
    {"cuMemCreate", (void *)cuMemCreate, NULL, 10020},
    {"cuMemGetAllocationPropertiesFromHandle", (void *)cuMemGetAllocationPropertiesFromHandle, NULL,
     10020},
    {"cuMemRelease", (void *)cuMemRelease, NULL, 10020},
    {"cuMemAddressReserve", (void *)cuMemAddressReserve, NULL, 10020},
    {"cuMemAddressFree", (void *)cuMemAddressFree, NULL, 10020},
    {"cuMemMap", (void *)cuMemMap, NULL, 10020},
    {"cuMemUnmap", (void *)cuMemUnmap, NULL, 10020},
    {"cuMemSetAccess", (void *)cuMemSetAccess, NULL, 10020},
    {"cuMemGetAllocationGranularity", (void *)cuMemGetAllocationGranularity, NULL, 10020},
    {"cuArrayCreate", (void *)cuArrayCreate_v2, NULL, 3020},
    {"cuArray3DCreate", (void *)cuArray3DCreate_v2, NULL, 3020},
    {"cuArrayDestroy", (void *)cuArrayDestroy, NULL, 2000},
    {"cuMipmappedArrayCreate", (void *)cuMipmappedArrayCreate, NULL, 5000},
    {"cuMipmappedArrayDestroy", (void *)cuMipmappedArrayDestroy, NULL, 5000},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2, NULL, 3020},
    {"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2, NULL, 3020},
    {"cuMemcpyDtoD", (void *)cuMemcpyDtoD_v2, NULL, 3020},
    {"cuMemsetD8", (void *)cuMemsetD8_v2, NULL, 3020},
};

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *function = NULL;
    if (symbol && strcmp(symbol, "cuGetProcAddress") == 0) {
        function = version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
        found = version >= 11030 ? CU_GET_PROC_ADDRESS_SUCCESS
                                 : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    }
    for (size_t i = 0; symbol && !function && i < sizeof(lookups) / sizeof(lookups[0]); i++) {
        if (strcmp(lookups[i].name, symbol) != 0)
            continue;
        if (version < lookups[i].version) {
            found = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            break;
        }
        function = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && lookups[i].per_thread
                       ? lookups[i].per_thread
                       : lookups[i].legacy;
        found = CU_GET_PROC_ADDRESS_SUCCESS;
    }
    if (found != CU_GET_PROC_ADDRESS_SUCCESS)
        function = NULL;
    if (status)
        *status = found;
    if (pfn)
        *pfn = function;
    return function ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    called(F_cuGetProcAddress);
    return lookup(symbol, pfn, version, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status)
{
    called(F_cuGetProcAddress_v2);
    return lookup(symbol, pfn, version, flags, status);
}
