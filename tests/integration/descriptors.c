/* descriptors.c - programs that count on their descriptors being theirs
 * (test_descriptors.py). A report is made with a cudaMalloc the simulator
 * refuses (1 TiB: out of memory, an OOM report at once); LIBRARY is one the
 * program has not loaded, so that the set of modules changes.
 *
 *   reuse LIBRARY      an OOM report, then closes 3..63 (as daemons do),
 *                      opens data.txt (fd 3), writes "part1", loads
 *                      LIBRARY, a second OOM report, writes "part2";
 *                      prints "write part2 ok" or why not
 *   squat LIBRARY      an OOM report, then closes every descriptor from 3
 *                      to 2047, opens data.txt and puts it at each of those
 *                      numbers, loads LIBRARY, a second OOM report, then
 *                      writes one byte through each; prints "lost N": the
 *                      numbers no longer open
 *   exit-stdio LIBRARY an OOM report, closes 3..63, writes its results to
 *                      results.txt through stdio (buffered until exit),
 *                      loads LIBRARY, allocates, returns
 *   exec N             one CUDA call and an OOM report, then execs itself
 *                      with N-1; the last prints "fds" and the numbers open
 *   system             one CUDA call and an OOM report, then system() of a
 *                      shell that prints "child fds" and its numbers open
 *   nofile N           RLIMIT_NOFILE N, then its first cudaMalloc: prints
 *                      "cudaMalloc E" and holds the block; exits 1 if E != 0
 *   exhaust            RLIMIT_NOFILE 64, a 1 MiB block held, then every
 *                      descriptor left taken (/dev/null); prints "taken N"
 *                      and returns with them all open
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void oom_report(void)
{
    void *p;
    if (cudaMalloc(&p, (size_t)1 << 40) == cudaSuccess)
        cudaFree(p);
}

static void *hold(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        exit(20);
    return p;
}

static void load(const char *library)
{
    if (!dlopen(library, RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "cannot load %s: %s\n", library, dlerror());
        exit(21);
    }
}

/* The descriptors open, in one line after `label`. */
static void print_open(const char *label)
{
    printf("%s", label);
    for (int fd = 0; fd < 65536; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            printf(" %d", fd);
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "reuse") == 0 && argc > 2) {
        hold(1 << 20);
        oom_report();
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        int fd = open("data.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, "part1\n", 6) != 6)
            return 22;
        load(argv[2]);
        oom_report();
        if (write(fd, "part2\n", 6) != 6)
            perror("write part2");
        else
            printf("write part2 ok (fd %d)\n", fd);
    } else if (strcmp(mode, "squat") == 0 && argc > 2) {
        hold(1 << 20);
        oom_report();
        for (int fd = 3; fd < 2048; fd++)
            close(fd);
        int data = open("data.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (data != 3)
            return 22;
        for (int fd = 4; fd < 2048; fd++)
            if (dup2(data, fd) != fd)
                return 23;
        load(argv[2]);
        oom_report();
        int lost = 0;
        for (int fd = 3; fd < 2048; fd++)
            lost += write(fd, "x", 1) != 1;
        printf("lost %d\n", lost);
    } else if (strcmp(mode, "exit-stdio") == 0 && argc > 2) {
        oom_report();
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        FILE *out = fopen("results.txt", "w");
        if (!out)
            return 22;
        fprintf(out, "results of the run\n"); /* buffered until exit */
        load(argv[2]);
        hold(1 << 20);
    } else if (strcmp(mode, "exec") == 0 && argc > 2) {
        int n = atoi(argv[2]);
        hold(1 << 20);
        oom_report();
        if (n > 0) {
            char next[16];
            snprintf(next, sizeof(next), "%d", n - 1);
            execl("/proc/self/exe", argv[0], "exec", next, (char *)NULL);
            perror("exec");
            return 24;
        }
        print_open("fds");
    } else if (strcmp(mode, "system") == 0) {
        hold(1 << 20);
        oom_report();
        fflush(stdout);
        return system("printf 'child-fds'; for f in /proc/$$/fd/*; do printf ' %s' "
                      "\"${f##*/}\"; done; echo");
    } else if (strcmp(mode, "nofile") == 0 && argc > 2) {
        struct rlimit limit = {(rlim_t)atoi(argv[2]), (rlim_t)atoi(argv[2])};
        if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
            return 25;
        void *p;
        int e = cudaMalloc(&p, 1 << 20);
        printf("cudaMalloc %d\n", e);
        return e != 0;
    } else if (strcmp(mode, "exhaust") == 0) {
        struct rlimit limit = {64, 64};
        if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
            return 25;
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
            return 1;
        int taken = 0;
        while (open("/dev/null", O_RDONLY) >= 0)
            taken++;
        printf("taken %d\n", taken);
    } else {
        fprintf(stderr, "usage: descriptors reuse|squat|exit-stdio LIBRARY | exec N | system | "
                        "nofile N | exhaust\n");
        return 2;
    }
    return 0;
}
