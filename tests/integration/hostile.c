/* hostile.c - programs that do what the tracer must survive (hostile.py).
 *
 *   leak [ARGS...]      one 1 MiB block held at exit (ARGS only show in the
 *                       report's command line)
 *   wait                one block held, prints its pid, waits for a line on
 *                       stdin, then exits (the test plants files meanwhile)
 *   wait-segv           the same, then dies of SIGSEGV
 *   stderr-data FILE    closes fd 2, opens FILE (it gets fd 2), writes 13
 *                       bytes of its own data there, holds a block, exits
 *   raise SIGNAL        holds a block, then raise(SIGNAL)
 *   exec PROGRAM ARGS   holds a block, then execv(PROGRAM, ARGS)
 *   execlp PROGRAM      holds a block, then execlp(PROGRAM, PROGRAM, NULL)
 *   huge                cudaMalloc(SIZE_MAX) (the simulator's answer is
 *                       printed), then 1 MiB more
 *   oom-retry N         (SIMCUDA_MEMORY=64M) N times: 32 MiB fails beside a
 *                       48 MiB block, the block is freed, the same 32 MiB
 *                       asked again succeeds (PyTorch's retry), all freed
 *   fork-threads        holds a block, forks; the child prints its threads
 *                       ("child threads N M": before and after a CUDA call
 *                       of its own), the parent waits for it
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *hold(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stdout, "cudaMalloc(%zu) failed\n", bytes);
        exit(4);
    }
    return p;
}

/* Threads of this process: the entries of /proc/self/task. */
static int threads(void)
{
    char line[256];
    int count = 0;
    FILE *status = fopen("/proc/self/status", "r");
    while (status && fgets(line, sizeof(line), status))
        if (strncmp(line, "Threads:", 8) == 0)
            count = atoi(line + 8);
    if (status)
        fclose(status);
    return count;
}

static void wait_for_line(void)
{
    printf("%d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        exit(5);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "leak";
    if (strcmp(mode, "leak") == 0) {
        hold(1 << 20);
    } else if (strcmp(mode, "wait") == 0 || strcmp(mode, "wait-segv") == 0) {
        hold(1 << 20);
        wait_for_line();
        if (strcmp(mode, "wait-segv") == 0)
            raise(SIGSEGV);
    } else if (strcmp(mode, "stderr-data") == 0 && argc > 2) {
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd != 2)
            return 6;
        if (write(fd, "program data\n", 13) != 13)
            return 7;
        hold(1 << 20);
    } else if (strcmp(mode, "raise") == 0 && argc > 2) {
        hold(1 << 20);
        raise(atoi(argv[2]));
        printf("survived signal %s\n", argv[2]);
    } else if (strcmp(mode, "exec") == 0 && argc > 2) {
        hold(2 << 20);
        fflush(stdout);
        execv(argv[2], argv + 2);
        perror("execv");
        return 8;
    } else if (strcmp(mode, "execlp") == 0 && argc > 2) {
        hold(2 << 20);
        execlp(argv[2], argv[2], (char *)NULL);
        perror("execlp");
        return 8;
    } else if (strcmp(mode, "huge") == 0) {
        void *p = NULL;
        cudaError_t error = cudaMalloc(&p, SIZE_MAX);
        printf("SIZE_MAX: %s\n", cudaGetErrorName(error));
        hold(1 << 20);
    } else if (strcmp(mode, "oom-retry") == 0 && argc > 2) {
        int rounds = atoi(argv[2]), retried = 0;
        void *filler = hold(48 << 20), *p;
        for (int i = 0; i < rounds; i++) {
            if (cudaMalloc(&p, 32 << 20) == cudaSuccess)
                return 9;
            cudaFree(filler);
            if (cudaMalloc(&p, 32 << 20) == cudaSuccess)
                retried++;
            cudaFree(p);
            filler = hold(48 << 20);
        }
        printf("retries %d of %d\n", retried, rounds);
    } else if (strcmp(mode, "fork-threads") == 0) {
        hold(1 << 20);
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            int before = threads();
            void *p = hold(1 << 20);
            cudaFree(p);
            printf("child threads %d %d\n", before, threads());
            exit(0);
        }
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || status != 0)
            return 10;
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
