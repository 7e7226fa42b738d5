/* exec.c - a process that replaces itself writes its report first.
 *
 * exec runs no atexit handler and no destructor: without these wrappers a
 * traced program that execs (a launcher, a shell's `exec`) leaves no
 * report. Each wrapper writes the report ("exec", as the exit report would
 * be) and calls the C library's function; should that return, the exec
 * failed and the process goes on, so the report at exit is written again,
 * in the same place (triggers.h).
 *
 * The C library's variadic execl, execlp and execle call its execve
 * internally, not through ours: they are wrapped too, their arguments
 * gathered into the array the others take. posix_spawn, system and popen
 * never come here (the C library calls its own execve), nor need to: they
 * replace a child, not this process. A vfork child (Python's subprocess)
 * does come here, shares our memory and runs no fork handler: the report is
 * not written there (triggers.c checks the pid), and nothing here looks a
 * function up in it: the C library's are found when the library loads. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include "preload.h"
#include "triggers.h"

/* The exec family, one row each: name, parameters, arguments. */
#define EXEC_FUNCTIONS(X)                                                                          \
    X(execve, (const char *path, char *const argv[], char *const envp[]), (path, argv, envp))      \
    X(execv, (const char *path, char *const argv[]), (path, argv))                                 \
    X(execvp, (const char *file, char *const argv[]), (file, argv))                                \
    X(execvpe, (const char *file, char *const argv[], char *const envp[]), (file, argv, envp))     \
    X(fexecve, (int fd, char *const argv[], char *const envp[]), (fd, argv, envp))                 \
    X(execveat, (int dirfd, const char *path, char *const argv[], char *const envp[], int flags),  \
      (dirfd, path, argv, envp, flags))

#define SLOT(name, params, args) int(*name) params;
static struct {
    EXEC_FUNCTIONS(SLOT)
} real;

#define WRAPPER(name, params, args)                                                                \
    PUBLIC int name params;                                                                        \
    PUBLIC int name params                                                                         \
    {                                                                                              \
        if (!real.name) {                                                                          \
            errno = ENOSYS;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        int written = trigger_exec_report();                                                       \
        int result = real.name args;                                                               \
        trigger_exec_failed(written);                                                              \
        return result;                                                                             \
    }
EXEC_FUNCTIONS(WRAPPER)

void exec_init(void)
{
#define LOOK_UP(name, params, args) *(void **)&real.name = real_dlsym(RTLD_NEXT, #name);
    EXEC_FUNCTIONS(LOOK_UP)
}

/* execl's arguments, `first` (never NULL: the C library says so) and those
 * after it up to the NULL, as the array `argv`, the NULL included; `ap` is
 * then past the NULL. */
#define GATHER(first, ap, argv)                                                                    \
    size_t count = 1;                                                                              \
    va_start(ap, first);                                                                           \
    while (va_arg(ap, char *))                                                                     \
        count++;                                                                                   \
    va_end(ap);                                                                                    \
    char *argv[count + 1];                                                                         \
    argv[0] = (char *)(first);                                                                     \
    va_start(ap, first);                                                                           \
    for (size_t i = 1; i <= count; i++)                                                            \
    argv[i] = va_arg(ap, char *)

PUBLIC int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv);
    va_end(ap);
    return execv(path, argv);
}

PUBLIC int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv);
    va_end(ap);
    return execvp(file, argv);
}

PUBLIC int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
