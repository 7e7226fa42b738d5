/* log.c - one-line messages to stderr (see log.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

static int debugging;   /* CUMEMTRACE_DEBUG, set by config_load */

void log_set_debug(int on)
{
    debugging = on;
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
    ssize_t unused = write(STDERR_FILENO, line, n);
    (void)unused;
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
