/* log.c - one-line messages to stderr (see log.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static int debugging;            /* CUMEMTRACE_DEBUG, set by config_load */
static int kept = STDERR_FILENO; /* where lines go; -1: nowhere */
static int checked;              /* kept is our duplicate: check it is still */
static dev_t kept_device;
static ino_t kept_inode;

int log_move_high(int fd)
{
    struct rlimit limit;
    int floor = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 2048
                    ? (int)(limit.rlim_cur / 2)
                    : 1024;
    int high = floor > 3 ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

int log_descriptors_spare(int count)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) < 0 || limit.rlim_cur == RLIM_INFINITY)
        return 1;
    int found = 0;
    for (rlim_t fd = 0; fd < limit.rlim_cur && found < count; fd++)
        found += fcntl((int)fd, F_GETFD) < 0 && errno == EBADF;
    return found >= count;
}

/* The tracer keeps up to three (the stderr copy, the dump made ahead, the
 * live view's socket); a GPU driver opens a dozen or more of its own (its
 * devices, eventfds, pipes) when it starts, and the program more. Below
 * TRACER_SPARE free the tracer keeps none but the stderr copy. */
#define TRACER_SPARE 24

static int short_of_descriptors;

void log_descriptors_check(void)
{
    struct rlimit limit;
    if (log_descriptors_spare(TRACER_SPARE) || getrlimit(RLIMIT_NOFILE, &limit) < 0)
        return;
    short_of_descriptors = 1;
    log_line("fewer than %d descriptors free under RLIMIT_NOFILE %llu: the crash dump made "
             "ahead and the live view are off, so that the program keeps them",
             TRACER_SPARE, (unsigned long long)limit.rlim_cur);
}

int log_descriptors_short(void)
{
    return short_of_descriptors;
}

/* The descriptor kept for the reports (log_reserve), -1 when none is. */
static int reserve = -1;

void log_reserve(void)
{
    if (reserve >= 0 || short_of_descriptors)
        return;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        reserve = log_move_high(fd);
}

int log_release_reserve(void)
{
    int fd = __atomic_exchange_n(&reserve, -1, __ATOMIC_ACQ_REL);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

void log_keep_stderr(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) < 0) {
        kept = -1; /* no stderr: whatever takes fd 2 later is not ours */
        return;
    }
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0)
        fd = log_move_high(fd);
    else
        fd = STDERR_FILENO; /* no descriptor to spare: fd 2, while it is the same */
    kept_device = st.st_dev;
    kept_inode = st.st_ino;
    kept = fd;
    checked = 1;
}

void log_release_stderr(void)
{
    if (!checked || kept < 0 || kept == STDERR_FILENO)
        return;
    int copy = kept;
    kept = STDERR_FILENO; /* checked against the same identity */
    close(copy);
}

int log_fd(void)
{
    struct stat st;
    if (!checked || kept < 0)
        return kept;
    if (fstat(kept, &st) < 0 || st.st_dev != kept_device || st.st_ino != kept_inode)
        return -1;
    return kept;
}

void log_set_debug(int on)
{
    debugging = on;
}

/* While log_once_per_line(1): a hash of each line said, so that the same
 * line is said once (the settings, read at load and again at the first CUDA
 * call). Only the thread that starts the tracer says lines then. */
static int remembering;
static uint64_t said[32];
static unsigned said_count;

void log_once_per_line(int on)
{
    remembering = on;
}

/* 0 when `line` was said before while remembering; else 1, and remembered. */
static int first_saying(const char *line, int n)
{
    uint64_t hash = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        hash = (hash ^ (unsigned char)line[i]) * 1099511628211ull;
    for (unsigned i = 0; i < said_count; i++)
        if (said[i] == hash)
            return 0;
    if (said_count < sizeof(said) / sizeof(said[0]))
        said[said_count++] = hash;
    return 1;
}

static void log_vline(const char *fmt, va_list ap)
{
    char line[1024];
    int saved_errno = errno;
    int n = snprintf(line, sizeof(line), "cumemtrace: ");
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof(line) - 2)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    if (remembering && !first_saying(line, n)) {
        errno = saved_errno;
        return;
    }
    int fd = log_fd();
    if (fd >= 0) {
        ssize_t unused = write(fd, line, n);
        (void)unused;
    }
    errno = saved_errno;
}

void log_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vline(fmt, ap);
    va_end(ap);
}

void log_debug(const char *fmt, ...)
{
    if (!debugging)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vline(fmt, ap);
    va_end(ap);
}
