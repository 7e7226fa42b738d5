/* pools.c - the stream-ordered pools, as reports show them.
 *
 * What a pool reserves beyond what it hands out is memory the driver holds
 * for that pool and nobody else can have: a report shows each device's
 * default pool (cudaMallocAsync) and every pool the program created
 * (cuMemPoolCreate, cudaMemPoolCreate) with their reserved and used bytes. */
#include <pthread.h>

#include "preload.h"

/* Pools the program created, in order. */
#define MAX_CREATED_POOLS 64
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUmemoryPool handle;
    int device;
} created_pools[MAX_CREATED_POOLS];
static int created_pool_count;

/* A pool's reserved and used bytes, now and at their peaks
 * (cuMemPoolGetAttribute). */
static int read_figures(CUmemoryPool pool, struct pool_figures *figures)
{
    CUresult (*attribute)(CUmemoryPool, CUmemPool_attribute, void *) =
        (CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))real_driver_symbol(
            "cuMemPoolGetAttribute");
    const struct {
        CUmemPool_attribute attribute;
        uint64_t *figure;
    } wanted[] = {
        {CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &figures->reserved},
        {CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &figures->reserved_peak},
        {CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &figures->used},
        {CU_MEMPOOL_ATTR_USED_MEM_HIGH, &figures->used_peak},
    };
    if (!attribute)
        return -1;
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
        cuuint64_t value = 0;
        if (attribute(pool, wanted[i].attribute, &value) != CUDA_SUCCESS)
            return -1;
        *wanted[i].figure = value;
    }
    return 0;
}

/* The device's default stream-ordered pool (cudaMallocAsync). */
int pool_default_info(int device, struct pool_figures *figures)
{
    CUresult (*default_pool)(CUmemoryPool *, CUdevice) =
        (CUresult(*)(CUmemoryPool *, CUdevice))real_driver_symbol("cuDeviceGetDefaultMemPool");
    CUmemoryPool pool;
    if (!default_pool || default_pool(&pool, device) != CUDA_SUCCESS)
        return -1;
    return read_figures(pool, figures);
}

int pool_created(CUresult result, CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (result != CUDA_SUCCESS || !pool)
        return 0;
    pthread_mutex_lock(&pools_lock);
    if (created_pool_count < MAX_CREATED_POOLS) {
        created_pools[created_pool_count].handle = *pool;
        created_pools[created_pool_count].device =
            props && props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? props->location.id : -1;
        created_pool_count++;
    }
    pthread_mutex_unlock(&pools_lock);
    return 0;
}

int pool_destroyed(CUresult result, CUmemoryPool pool)
{
    if (result != CUDA_SUCCESS)
        return 0;
    pthread_mutex_lock(&pools_lock);
    for (int i = 0; i < created_pool_count; i++)
        if (created_pools[i].handle == pool) {
            created_pools[i] = created_pools[--created_pool_count];
            break;
        }
    pthread_mutex_unlock(&pools_lock);
    return 0;
}

int pool_created_info(int index, uint64_t *handle, int *device, struct pool_figures *figures)
{
    pthread_mutex_lock(&pools_lock);
    int found = index >= 0 && index < created_pool_count;
    CUmemoryPool pool = found ? created_pools[index].handle : NULL;
    if (found) {
        *handle = (uint64_t)(uintptr_t)pool;
        *device = created_pools[index].device;
    }
    pthread_mutex_unlock(&pools_lock);
    if (!found)
        return -1;
    if (read_figures(pool, figures) < 0)
        figures->reserved = figures->reserved_peak = figures->used = figures->used_peak =
            POOL_FIGURE_UNKNOWN;
    return 0;
}

/* In the child: the pools the parent created are the parent's. */
void pools_after_fork(void)
{
    pthread_mutex_init(&pools_lock, NULL);
    created_pool_count = 0;
}
