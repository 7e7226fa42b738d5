/* output.c - report paths and the buffered writer (see output.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output.h"

static int append(char *path, size_t size, size_t *used, const char *text)
{
    size_t n = strlen(text);
    if (*used + n >= size)
        return -1;
    memcpy(path + *used, text, n + 1);
    *used += n;
    return 0;
}

int output_path(const char *template_, const char *suffix, char *path, size_t size)
{
    size_t used = 0;
    char piece[256];
    path[0] = '\0';
    for (const char *p = template_; *p; p++) {
        if (*p != '%' || p[1] == '\0') {
            piece[0] = *p;
            piece[1] = '\0';
        } else {
            p++;
            const char *rank;
            switch (*p) {
            case 'p':
                snprintf(piece, sizeof(piece), "%d", (int)getpid());
                break;
            case 'r':
                rank = getenv("RANK");
                if (!rank || !*rank)
                    rank = getenv("LOCAL_RANK");
                snprintf(piece, sizeof(piece), "%s", rank && *rank ? rank : "0");
                break;
            case 'h':
                if (gethostname(piece, sizeof(piece)) < 0)
                    strcpy(piece, "host");
                piece[sizeof(piece) - 1] = '\0';
                break;
            case '%':
                strcpy(piece, "%");
                break;
            default:
                snprintf(piece, sizeof(piece), "%%%c", *p);
                break;
            }
        }
        if (append(path, size, &used, piece) < 0)
            return -1;
    }
    size_t n = strlen(suffix);
    if (used >= n && strcmp(path + used - n, suffix) == 0)
        return 0;           /* the template already names the extension */
    return append(path, size, &used, suffix);
}

static uint64_t path_hash(const char *path)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *path; path++)
        h = (h ^ (unsigned char)*path) * 1099511628211ULL;
    return h;
}

int output_claim(char *path, size_t size)
{
    static pid_t owner;
    static uint64_t written[256];
    static unsigned count;
    pid_t pid = getpid();
    if (owner != pid) {          /* a new process (fork): nothing is ours yet */
        owner = pid;
        count = 0;
    }
    uint64_t h = path_hash(path);
    for (unsigned i = 0; i < count; i++)
        if (written[i] == h)
            return 0;
    if (access(path, F_OK) == 0) {
        char *dot = strrchr(path, '.');
        char *slash = strrchr(path, '/');
        if (!dot || (slash && dot < slash))
            dot = path + strlen(path);
        char extension[64];
        snprintf(extension, sizeof(extension), "%s", dot);
        int n = snprintf(dot, size - (size_t)(dot - path), "-%d%s", (int)pid, extension);
        if (n < 0 || (size_t)n >= size - (size_t)(dot - path))
            return -1;
        h = path_hash(path);
    }
    if (count < sizeof(written) / sizeof(written[0]))
        written[count++] = h;
    return 0;
}

int out_open(struct out *out, const char *path)
{
    char temporary[4200];
    snprintf(temporary, sizeof(temporary), "%s.tmp.%d", path, (int)getpid());
    out->used = 0;
    out->failed = 0;
    out->escape_html = 0;
    out->socket = 0;
    out->fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return out->fd < 0 ? -1 : 0;
}

void out_fd(struct out *out, int fd)
{
    out->fd = fd;
    out->used = 0;
    out->failed = 0;
    out->escape_html = 0;
    out->socket = 0;
}

void out_flush(struct out *out)
{
    size_t done = 0;
    while (done < out->used) {
        ssize_t n = out->socket
                        ? send(out->fd, out->buffer + done, out->used - done, MSG_NOSIGNAL)
                        : write(out->fd, out->buffer + done, out->used - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            out->failed = 1;
            break;
        }
        done += n;
    }
    out->used = 0;
}

int out_close(struct out *out, const char *path)
{
    char temporary[4200];
    snprintf(temporary, sizeof(temporary), "%s.tmp.%d", path, (int)getpid());
    out_flush(out);
    int failed = out->failed;
    if (close(out->fd) < 0)
        failed = 1;
    if (!failed && rename(temporary, path) < 0)
        failed = 1;
    if (failed) {
        int saved = errno;
        unlink(temporary);
        errno = saved ? saved : EIO;
        return -1;
    }
    return 0;
}

static void write_escaped(struct out *out, const char *data, size_t n)
{
    out->escape_html = 0;
    for (;;) {
        const char *angle = memchr(data, '<', n);
        size_t plain = angle ? (size_t)(angle - data) : n;
        out_write(out, data, plain);
        if (!angle)
            break;
        out_write(out, "\\u003c", 6);
        data += plain + 1;
        n -= plain + 1;
    }
    out->escape_html = 1;
}

void out_write(struct out *out, const char *data, size_t n)
{
    if (out->escape_html && memchr(data, '<', n)) {
        write_escaped(out, data, n);
        return;
    }
    while (n > 0) {
        if (out->used == sizeof(out->buffer))
            out_flush(out);
        size_t room = sizeof(out->buffer) - out->used;
        size_t take = n < room ? n : room;
        memcpy(out->buffer + out->used, data, take);
        out->used += take;
        data += take;
        n -= take;
    }
}

void out_str(struct out *out, const char *s)
{
    out_write(out, s, strlen(s));
}

void out_printf(struct out *out, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    out_write(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void out_json_string(struct out *out, const char *s)
{
    if (!s) {
        out_str(out, "null");
        return;
    }
    out_write(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char escaped[8];
        if (*p == '"' || *p == '\\') {
            escaped[0] = '\\';
            escaped[1] = *p;
            out_write(out, escaped, 2);
        } else if (*p < 0x20) {
            snprintf(escaped, sizeof(escaped), "\\u%04x", *p);
            out_write(out, escaped, 6);
        } else {
            out_write(out, (const char *)p, 1);
        }
    }
    out_write(out, "\"", 1);
}

void format_bytes(uint64_t bytes, char *text, size_t size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        unit++;
    }
    if (unit == 0)
        snprintf(text, size, "%llu B", (unsigned long long)bytes);
    else
        snprintf(text, size, "%.*f %s", value < 10 ? 2 : value < 100 ? 1 : 0, value, units[unit]);
}

void out_bytes(struct out *out, uint64_t bytes)
{
    char text[32];
    format_bytes(bytes, text, sizeof(text));
    out_str(out, text);
}
