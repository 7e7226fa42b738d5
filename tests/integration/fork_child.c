/* fork_child.c - a traced process that forks.
 * The parent keeps one block; a child keeps two of its own and exits; a
 * second child makes no CUDA call. Each process that made CUDA calls writes
 * its own report (%p), holding only its own blocks; the quiet child writes none. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    void *parent_block, *child_a, *child_b;
    if (cudaMalloc(&parent_block, 1 << 20) != cudaSuccess)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        if (cudaMalloc(&child_a, 3 << 20) != cudaSuccess ||
            cudaMalloc(&child_b, 3 << 20) != cudaSuccess)
            _exit(2);
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        return 0; /* exit(): atexit handlers run, the report is written */
    }
    pid_t quiet = fork();
    if (quiet == 0)
        return 0;
    int status_child, status_quiet;
    waitpid(child, &status_child, 0);
    waitpid(quiet, &status_quiet, 0);
    printf("parent %d child-status %d quiet %d\n", (int)getpid(), WEXITSTATUS(status_child),
           (int)quiet);
    return WEXITSTATUS(status_child);
}
