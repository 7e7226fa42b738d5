/* output.h - where reports go, how their files are made, and a small
 * buffered writer.
 *
 * output_path() expands CUMEMTRACE_OUTPUT: %p the pid, %r the rank (RANK, else
 * LOCAL_RANK, else 0), %h the host name, %% a percent sign; then adds the
 * format's extension.
 *
 * Files. Every file is made new and unnamed (O_TMPFILE, or where the file
 * system has none an O_EXCL|O_NOFOLLOW temporary of an unpredictable name),
 * in the mode asked for, written whole, and only then given its name with
 * link(2), which never follows a symbolic link and never replaces what is
 * there. So a reader never sees half a file, a link planted at any name
 * cannot redirect the writing, and two processes that pick the same name
 * each keep their own file: out_publish() takes the first free name of
 * PATH, PATH-PID, PATH-PID-2, ... (the pid before the extension). Replacing
 * a file is out_replace()'s, by rename(2), and only for a file this process
 * published itself (its identity must still be there) or, for the command's
 * -o, a regular file or link the user named. */
#ifndef CUMEMTRACE_OUTPUT_H
#define CUMEMTRACE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#define OUTPUT_PATH_MAX 4096
#define OUTPUT_DEFAULT_MODE 0600

struct out {
    int fd;
    int failed;      /* a write failed: the file is incomplete */
    int error;       /* its errno */
    int escape_html; /* write '<' as \u003c: JSON inside an HTML <script> */
    int socket;      /* fd is a socket: a peer gone is a failed write, not SIGPIPE */
    int created;     /* fd is a new file of ours that has no name yet */
    char temporary[OUTPUT_PATH_MAX + 48]; /* its temporary name; "" for O_TMPFILE */
    size_t used;
    char buffer[16384];
};

/* Which file a name held when this process published it. */
struct out_identity {
    uint64_t device, inode;
};

int output_path(const char *template_, const char *suffix, char *path, size_t size);
/* Whether reports can be written where `template_` (CUMEMTRACE_OUTPUT, a
 * directory's default name already added) names them: the directory is
 * there and writable, and the name itself is not a directory. 0, or -1 with
 * `why` saying what is wrong, naming the path ("no directory '/x/y'").
 * Allocates nothing. */
int output_check(const char *template_, char *why, size_t size);
/* The last part of `path`, after its last '/' ("libc.so.6" of
 * "/lib/x86_64-linux-gnu/libc.so.6"); NULL for NULL. */
const char *output_base_name(const char *path);
/* `path` with "." and ".." parts and repeated slashes resolved by name
 * (symbolic links are not followed), in `normal`: a relative path stays
 * relative, and keeps the ".." that lead out of it. */
void output_path_normal(const char *path, char *normal, size_t size);
/* A Python frame's file as a report names it, in `path`: its real path
 * (symbolic links resolved) where the file exists, a relative one joined to
 * `start_dir` first (the working directory the program started in, which
 * Python names the files it compiled from a relative path relative to;
 * NULL: not known); else an absolute one normalized by name
 * (output_path_normal) and a relative one as it is (a name, say Cython's
 * "pkg/mod.pyx", not a path from here). Names that are not paths
 * ("<string>", "<frozen ...>", "<eval_with_key>.N") stay as they are. 1 if
 * `path` differs from `file`. */
int output_real_path(const char *file, const char *start_dir, char *path, size_t size);
/* `path` opened for reading, with `flags` added (O_NOFOLLOW, say), if it is
 * a regular file: a FIFO or a device is never waited on or read (O_NONBLOCK,
 * then the check on what was opened; blocking again after). The fd, or -1. */
int output_open_regular(const char *path, int flags);

/* A new file without a name, in the directory of `path`, in `mode` (less the
 * umask). 0, or -1 with errno set (ENOENT: no such directory). */
int out_create(struct out *out, const char *path, int mode);
/* Flush and give the new file a name no other file has: `path`, else PATH
 * with "-PID", then "-PID-2", ... inserted before `extension` (appended when
 * path does not end with it). `path` (room for `size`) becomes the name used;
 * `id`, if not NULL, the file's identity. 0, or -1 with errno (the file is
 * gone). */
int out_publish(struct out *out, char *path, size_t size, const char *extension,
                struct out_identity *id);
/* Flush and put the new file in place of `path`, atomically for readers:
 * only where `path` still holds `previous`, a file this process published
 * (else it is published as by out_publish); with `previous` NULL, where it
 * holds a regular file or a symbolic link, or nothing (the command's -o).
 * `path` and `id` as for out_publish. */
int out_replace(struct out *out, char *path, size_t size, const char *extension,
                const struct out_identity *previous, struct out_identity *id);
void out_fd(struct out *out, int fd); /* write to an open fd */
void out_flush(struct out *out);
void out_write(struct out *out, const char *data, size_t n);
void out_str(struct out *out, const char *s);
void out_printf(struct out *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Quoted and escaped, always valid UTF-8: a byte that is not part of UTF-8
 * is written \u00XX, the character of the same number (Latin-1). NULL ->
 * null. */
void out_json_string(struct out *out, const char *s);
/* `s` as it may be shown on a terminal, in `text` (cut to `size`): control
 * characters (C0, DEL, C1) as \xNN, a byte that is not part of UTF-8 as the
 * character of the same number; the same text whether `s` comes from this
 * process or back from a JSON report; NULL (a name a report read back
 * lacks) as "?". Returns `text`. */
const char *output_text(const char *s, char *text, size_t size);
void out_bytes(struct out *out, uint64_t bytes); /* "1.5 GiB" */
void format_bytes(uint64_t bytes, char *text, size_t size);

#endif
