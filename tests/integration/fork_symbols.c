/* fork_symbols.c - a forked child's report and what its parent read.
 *
 *   fork_symbols SNAPSHOT|-
 *
 * The parent keeps a block and, given a path, writes a snapshot there (so
 * its symbolizer has read this process's modules); then it forks a child
 * that keeps a block of its own and exits, writing its exit report. Prints
 * "child PID". */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int __attribute__((noinline)) child_allocates(void)
{
    void *block;
    return cudaMalloc(&block, 3 << 20) == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
    void *kept;
    if (argc != 2 || cudaMalloc(&kept, 1 << 20) != cudaSuccess)
        return 2;
    if (strcmp(argv[1], "-") != 0) {
        int (*snapshot)(const char *) =
            (int (*)(const char *))dlsym(RTLD_DEFAULT, "cumemtrace_snapshot");
        if (!snapshot || snapshot(argv[1]) != 0)
            return 3;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        return child_allocates(); /* exit(): the child's report is written */
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 4;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}
