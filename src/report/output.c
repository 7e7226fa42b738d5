/* output.c - report paths and the buffered writer (see output.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

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
            case 'p': snprintf(piece, sizeof(piece), "%d", (int)getpid()); break;
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
            case '%': strcpy(piece, "%"); break;
            default: snprintf(piece, sizeof(piece), "%%%c", *p); break;
            }
        }
        if (append(path, size, &used, piece) < 0)
            return -1;
    }
    size_t n = strlen(suffix);
    if (used >= n && strcmp(path + used - n, suffix) == 0)
        return 0; /* the template already names the extension */
    return append(path, size, &used, suffix);
}

int output_open_regular(const char *path, int flags)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

const char *output_base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

void output_path_normal(const char *path, char *normal, size_t size)
{
    size_t used = 0;
    int absolute = path[0] == '/', kept = 0; /* kept: named parts that ".." can undo */
    if (size < 2) {
        if (size)
            normal[0] = '\0';
        return;
    }
    if (absolute)
        normal[used++] = '/';
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
            /* "." names where it is: nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.' && kept) {
            while (used > (size_t)absolute && normal[used - 1] != '/')
                used--; /* the part before goes */
            if (used > (size_t)absolute)
                used--; /* and its slash */
            kept--;
        } else if (!(n == 2 && p[0] == '.' && p[1] == '.' && absolute)) {
            if (used > (size_t)absolute && used + 1 < size)
                normal[used++] = '/';
            size_t room = size - 1 - used;
            memcpy(normal + used, p, n < room ? n : room);
            used += n < room ? n : room;
            kept += !(n == 2 && p[0] == '.' && p[1] == '.');
        }
        p += n;
    }
    if (used == 0)
        normal[used++] = '.';
    normal[used] = '\0';
}

int output_real_path(const char *file, const char *start_dir, char *path, size_t size)
{
    if (!size)
        return 0;
    snprintf(path, size, "%s", file);
    /* "<string>", "<frozen importlib._bootstrap>", "<eval_with_key>.3":
     * names, not paths. */
    if (!file[0] || file[0] == '<' || (file[0] != '/' && !start_dir))
        return 0;
    char joined[OUTPUT_PATH_MAX], normal[OUTPUT_PATH_MAX], real[PATH_MAX];
    if (file[0] == '/')
        snprintf(joined, sizeof(joined), "%s", file);
    else
        snprintf(joined, sizeof(joined), "%s/%s", start_dir, file);
    output_path_normal(joined, normal, sizeof(normal));
    if (realpath(normal, real))
        snprintf(path, size, "%s", real);
    else if (file[0] == '/') /* a relative name of no file there is no path */
        snprintf(path, size, "%s", normal);
    return strcmp(path, file) != 0;
}

/* The directory part of `path` ("." when it has none), in `dir`. */
static void directory_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

int output_check(const char *template_, char *why, size_t size)
{
    char path[OUTPUT_PATH_MAX], dir[OUTPUT_PATH_MAX];
    struct stat st;
    if (output_path(template_, "", path, sizeof(path)) < 0) {
        snprintf(why, size, "the name is too long");
        return -1;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(why, size,
                 "'%s' is a directory (end it with '/' to write the reports "
                 "inside it)",
                 path);
        return -1;
    }
    directory_of(path, dir, sizeof(dir));
    if (stat(dir, &st) < 0) {
        snprintf(why, size, "%s '%s'", errno == ENOENT ? "no directory" : strerror(errno), dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, size, "'%s' is not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) < 0) {
        snprintf(why, size, "cannot write in '%s': %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Where O_TMPFILE's file can be named: through /proc/self/fd, or as root
 * with AT_EMPTY_PATH. */
static int can_link_unnamed(void)
{
    return access("/proc/self/fd", X_OK) == 0 || geteuid() == 0;
}

/* open(2), and once more after the tracer's kept descriptor is given up
 * where the process has none left: a program that took every descriptor
 * it may still gets its report. */
static int open_for_report(const char *path, int flags, int mode)
{
    int fd = open(path, flags, mode);
    if (fd < 0 && errno == EMFILE && log_release_reserve())
        fd = open(path, flags, mode);
    return fd;
}

int out_create(struct out *out, const char *path, int mode)
{
    char dir[OUTPUT_PATH_MAX];
    out->used = 0;
    out->failed = 0;
    out->escape_html = 0;
    out->socket = 0;
    out->error = 0;
    out->created = 1;
    out->temporary[0] = '\0';
    directory_of(path, dir, sizeof(dir));
    if (can_link_unnamed()) {
        out->fd = open_for_report(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
        if (out->fd >= 0)
            return 0;
        if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EROFS)
            return -1;
    }
    /* No O_TMPFILE here (EOPNOTSUPP, EISDIR from a kernel without it): a
     * temporary of a name no one can guess, made with O_EXCL|O_NOFOLLOW. */
    static unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        snprintf(out->temporary, sizeof(out->temporary), "%s.tmp.%d.%08lx", path, (int)getpid(),
                 (unsigned long)((ts.tv_nsec ^ (n * 2654435761u)) & 0xffffffff));
        out->fd = open_for_report(out->temporary,
                                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (out->fd >= 0 || errno != EEXIST)
            break;
    }
    if (out->fd < 0)
        out->temporary[0] = '\0';
    return out->fd < 0 ? -1 : 0;
}

/* Give the new file the name `name`, which must be free: link(2) never
 * replaces and never follows a link at `name`. Through /proc/self/fd the
 * very file we wrote is linked, whatever happened to its temporary name. */
static int link_new(struct out *out, const char *name)
{
    char proc[40];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out->fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != ENOENT || access("/proc/self/fd", X_OK) == 0)
        return -1;
    if (out->temporary[0])
        return linkat(AT_FDCWD, out->temporary, AT_FDCWD, name, 0);
    return linkat(out->fd, "", AT_FDCWD, name, AT_EMPTY_PATH);
}

/* Every end of a new file: its temporary name removed, closed (a failed
 * close undoes the naming), and `named`, the name it was given or NULL,
 * copied to `path`. Returns `result`, or -1 with errno set. */
static int settle(struct out *out, int result, const char *named, char *path, size_t size)
{
    int saved = result < 0 ? (errno ? errno : EIO) : 0;
    if (out->temporary[0])
        unlink(out->temporary);
    out->temporary[0] = '\0';
    if (close(out->fd) < 0 && result == 0) {
        saved = errno;
        unlink(named);
        result = -1;
    }
    out->fd = -1;
    out->created = 0;
    if (result == 0 && named != path)
        snprintf(path, size, "%s", named);
    errno = saved;
    return result;
}

static void identify(int fd, struct out_identity *id)
{
    struct stat st;
    if (id && fstat(fd, &st) == 0) {
        id->device = st.st_dev;
        id->inode = st.st_ino;
    }
}

/* The n-th name tried for a file: path itself, then "-PID" (n = 1) or
 * "-PID-n" before the extension. */
static int candidate(const char *path, const char *extension, int n, char *name, size_t size)
{
    if (n == 0)
        return snprintf(name, size, "%s", path) < (int)size ? 0 : -1;
    size_t length = strlen(path), tail = strlen(extension);
    if (tail > length || strcmp(path + length - tail, extension) != 0)
        tail = 0;
    int written = n == 1 ? snprintf(name, size, "%.*s-%d%s", (int)(length - tail), path,
                                    (int)getpid(), path + length - tail)
                         : snprintf(name, size, "%.*s-%d-%d%s", (int)(length - tail), path,
                                    (int)getpid(), n, path + length - tail);
    return written >= 0 && written < (int)size ? 0 : -1;
}

/* Flush and fill in the identity; -1 with the writing's errno if it failed. */
static int written(struct out *out, struct out_identity *id)
{
    out_flush(out);
    identify(out->fd, id);
    errno = out->error;
    return out->failed ? -1 : 0;
}

int out_publish(struct out *out, char *path, size_t size, const char *extension,
                struct out_identity *id)
{
    char name[OUTPUT_PATH_MAX + 32];
    int result = -1;
    for (int n = 0; written(out, id) == 0 && n < 100; n++) {
        if (candidate(path, extension, n, name, sizeof(name)) < 0) {
            errno = ENAMETOOLONG;
            break;
        }
        if (link_new(out, name) == 0) {
            result = 0;
            break;
        }
        if (errno != EEXIST)
            break;
    }
    return settle(out, result, name, path, size);
}

int out_replace(struct out *out, char *path, size_t size, const char *extension,
                const struct out_identity *previous, struct out_identity *id)
{
    struct stat st;
    int there = lstat(path, &st) == 0;
    if (previous && (!there || !S_ISREG(st.st_mode) || st.st_dev != previous->device ||
                     st.st_ino != previous->inode))
        return out_publish(out, path, size, extension, id); /* not ours any more */
    if (written(out, id) < 0)
        return settle(out, -1, NULL, path, size);
    if (!there) /* nothing to replace: this name, if still free */
        return settle(out, link_new(out, path), path, path, size);
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EEXIST;
        return settle(out, -1, NULL, path, size);
    }
    /* A name of our own beside it, then rename(2) over it: atomic for
     * readers, and a link at `path` is itself replaced, never followed. */
    char temporary[OUTPUT_PATH_MAX + 48], base[OUTPUT_PATH_MAX + 8];
    snprintf(base, sizeof(base), "%s.tmp", path);
    int result = -1;
    if (out->temporary[0]) {
        snprintf(temporary, sizeof(temporary), "%s", out->temporary);
        out->temporary[0] = '\0'; /* renamed below, not removed */
        result = 0;
    }
    for (int n = 1; result < 0 && n < 100; n++) {
        if (candidate(base, "", n, temporary, sizeof(temporary)) < 0) {
            errno = ENAMETOOLONG;
            break;
        }
        if (link_new(out, temporary) == 0)
            result = 0;
        else if (errno != EEXIST)
            break;
    }
    if (result == 0 && rename(temporary, path) < 0) {
        int saved = errno;
        unlink(temporary);
        errno = saved;
        result = -1;
    }
    return settle(out, result, path, path, size);
}

void out_fd(struct out *out, int fd)
{
    out->fd = fd;
    out->used = 0;
    out->failed = 0;
    out->escape_html = 0;
    out->socket = 0;
    out->error = 0;
    out->created = 0;
    out->temporary[0] = '\0';
}

void out_flush(struct out *out)
{
    size_t done = 0;
    while (done < out->used) {
        ssize_t n = out->socket ? send(out->fd, out->buffer + done, out->used - done, MSG_NOSIGNAL)
                                : write(out->fd, out->buffer + done, out->used - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            out->error = n < 0 ? errno : EIO;
            out->failed = 1;
            break;
        }
        done += n;
    }
    out->used = 0;
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

/* The length of the well-formed UTF-8 sequence that starts at p, 1 to 4
 * (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF); 0
 * when the byte at p starts none. p is NUL-terminated. */
static size_t utf8_length(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    int n = c >= 0xc2 && c <= 0xdf   ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
    if (!n)
        return 0;
    unsigned char low = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned char high = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (p[1] < low || p[1] > high)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return (size_t)n;
}

/* A byte that starts no UTF-8 sequence is taken as the character of the
 * same number (Latin-1), as everywhere below: the JSON report writes it
 * \u00XX, the text writes that character (or \xNN, a control). */
void out_json_string(struct out *out, const char *s)
{
    if (!s) {
        out_str(out, "null");
        return;
    }
    out_write(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char escaped[8];
        size_t n = utf8_length(p);
        if (*p == '"' || *p == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)*p;
            out_write(out, escaped, 2);
        } else if (*p < 0x20 || n == 0) {
            snprintf(escaped, sizeof(escaped), "\\u%04x", *p);
            out_write(out, escaped, 6);
        } else {
            out_write(out, (const char *)p, n);
            p += n;
            continue;
        }
        p++;
    }
    out_write(out, "\"", 1);
}

const char *output_text(const char *s, char *text, size_t size)
{
    size_t used = 0;
    if (!s)
        s = "?"; /* a name a report read back lacks (a Python frame without its file) */
    for (const unsigned char *p = (const unsigned char *)s; *p && used + 5 < size;) {
        size_t n = utf8_length(p);
        unsigned code = n == 2 ? ((p[0] & 0x1fu) << 6 | (p[1] & 0x3fu)) : *p;
        if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) {
            used += (size_t)snprintf(text + used, size - used, "\\x%02x", code);
        } else if (n == 0) { /* Latin-1: two bytes of UTF-8 */
            text[used++] = (char)(0xc0 | code >> 6);
            text[used++] = (char)(0x80 | (code & 0x3f));
        } else {
            memcpy(text + used, p, n);
            used += n;
        }
        p += n ? n : 1;
    }
    text[used] = '\0';
    return text;
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
