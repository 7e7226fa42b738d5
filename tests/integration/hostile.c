/* hostile.c - programs that do what the tracer must survive (test_hostile.py).
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
 *   wait-first          prints its pid and waits for a line before its first
 *                       CUDA call; then holds a block, prints "ready" and
 *                       waits for a line again
 *   exit-in-malloc      holds a block; a SIGALRM handler calls exit(3) while
 *                       the program allocates with malloc in a loop
 *   daemon              holds a block, then daemon(0, 0): the parent is gone
 *                       at once, the daemon lives on for 3 s
 *   detach              holds a block, forks; the child calls setsid(), puts
 *                       /dev/null on fds 0-2 and lives on for 3 s; the parent
 *                       exits
 *   close-fds N         holds a block, closes every descriptor above 2, opens
 *                       8 files of its own (own-0 ...), sends itself N
 *                       SIGUSR2 and allocates; prints "bytes B" (what its
 *                       files hold)
 *   fds                 prints "first D E": the first free descriptor before
 *                       its first CUDA call and after it; then takes every
 *                       descriptor there is (RLIMIT_NOFILE 64) and exits
 *   address-cap         holds a block, caps its address space (RLIMIT_AS) a
 *                       little above what it has, mallocs until refused (1
 *                       GiB at most), then exits 0
 *   small-altstack      its own SIGSEGV handler on a 4 KiB alternate stack
 *                       (installed first), then a stack overflow: the handler
 *                       prints "handler ran" and exits 3
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
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

static void *volatile kept;

/* The lowest free descriptor now. */
static int first_free(void)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0)
        close(fd);
    return fd;
}

static void exit_three(int signal)
{
    (void)signal;
    exit(3);
}

static void segv_on_altstack(int signal)
{
    (void)signal;
    static const char line[] = "handler ran\n";
    ssize_t unused = write(1, line, sizeof(line) - 1);
    (void)unused;
    _exit(3);
}

__attribute__((noinline)) static int overflow(int depth)
{
    volatile char pad[512];
    if (depth < 0)
        return 0;
    pad[depth % 512] = (char)depth;
    return overflow(depth + 1) + pad[depth % 512];
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
    } else if (strcmp(mode, "wait-first") == 0) {
        wait_for_line();
        hold(1 << 20);
        printf("ready\n");
        fflush(stdout);
        char line[16];
        if (!fgets(line, sizeof(line), stdin))
            return 5;
    } else if (strcmp(mode, "exit-in-malloc") == 0) {
        hold(1 << 20);
        signal(SIGALRM, exit_three);
        struct itimerval timer = {{0, 0}, {0, 5000}};
        setitimer(ITIMER_REAL, &timer, NULL);
        for (unsigned i = 0;; i++) {
            char *p = malloc(2048 + (i * 7919) % 65536); /* past tcache: the arena, locked */
            if (p)
                p[0] = (char)i;
            kept = p; /* seen: the pair is not optimized away */
            free(kept);
        }
    } else if (strcmp(mode, "daemon") == 0) {
        hold(1 << 20);
        fflush(stdout);
        if (daemon(0, 0) < 0)
            return 11;
        sleep(3);
    } else if (strcmp(mode, "detach") == 0) {
        hold(1 << 20);
        fflush(stdout);
        pid_t child = fork();
        if (child < 0)
            return 11;
        if (child == 0) {
            int null = open("/dev/null", O_RDWR);
            if (setsid() < 0 || null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
                dup2(null, 2) < 0)
                _exit(12);
            sleep(3);
            _exit(0);
        }
    } else if (strcmp(mode, "close-fds") == 0 && argc > 2) {
        hold(1 << 20);
        for (int fd = 3; fd < 65536; fd++)
            close(fd);
        int files[8];
        for (int i = 0; i < 8; i++) {
            char name[16];
            snprintf(name, sizeof(name), "own-%d", i);
            files[i] = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
            if (files[i] < 0)
                return 13;
        }
        int signals = atoi(argv[2]);
        struct timespec pause = {0, 50000};
        for (int i = 0; i < signals; i++) {
            kill(getpid(), SIGUSR2);
            nanosleep(&pause, NULL);
            if (i % 100 == 0)
                cudaFree(hold(4096));
        }
        pause.tv_nsec = 300 * 1000000;
        nanosleep(&pause, NULL);
        long bytes = 0;
        for (int i = 0; i < 8; i++) {
            struct stat st;
            if (fstat(files[i], &st) == 0)
                bytes += st.st_size;
            close(files[i]);
        }
        printf("bytes %ld\n", bytes);
    } else if (strcmp(mode, "fds") == 0) {
        int before = first_free();
        hold(1 << 20);
        printf("first %d %d\n", before, first_free());
        fflush(stdout);
        struct rlimit limit = {64, 64};
        if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
            return 14;
        while (open("/dev/null", O_RDONLY) >= 0)
            ;
    } else if (strcmp(mode, "address-cap") == 0) {
        hold(1 << 20);
        unsigned long pages = 0;
        FILE *statm = fopen("/proc/self/statm", "r");
        if (!statm || fscanf(statm, "%lu", &pages) != 1)
            return 16;
        fclose(statm);
        rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (4 << 20);
        struct rlimit limit = {cap, cap};
        if (setrlimit(RLIMIT_AS, &limit) < 0)
            return 17;
        for (int i = 0; i < 16384 && (kept = malloc(1 << 16)) != NULL; i++)
            ; /* 1 GiB at most, should the cap not bite */
    } else if (strcmp(mode, "small-altstack") == 0) {
        stack_t alternate = {.ss_sp = malloc(4096), .ss_size = 4096, .ss_flags = 0};
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_handler = segv_on_altstack;
        action.sa_flags = SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        if (!alternate.ss_sp || sigaltstack(&alternate, NULL) < 0 ||
            sigaction(SIGSEGV, &action, NULL) < 0)
            return 15;
        hold(1 << 20);
        return overflow(0);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
