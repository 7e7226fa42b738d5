/* fork_pool.c - a child of a traced process creates a stream-ordered pool.
 * The parent starts the tracer (one block) and forks; the child creates a
 * pool, allocates 1 MiB from it and exits. The child's report lists the pool
 * it created, as the parent's would: the interposer's view of the pools
 * survives fork, only the parent's pools are forgotten. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    void *parent_block;
    if (cudaMalloc(&parent_block, 1 << 20) != cudaSuccess)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof(props));
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = 0;
        cudaMemPool_t pool;
        void *block;
        if (cudaMemPoolCreate(&pool, &props) != cudaSuccess ||
            cudaMallocFromPoolAsync(&block, 1 << 20, pool, 0) != cudaSuccess)
            _exit(2);
        printf("child %d pool %p\n", (int)getpid(), (void *)pool);
        fflush(stdout);
        return 0;
    }
    int status;
    waitpid(child, &status, 0);
    printf("parent %d child-status %d\n", (int)getpid(), WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
