/* output.h - where reports go and a small buffered writer.
 *
 * output_path() expands CUMEMTRACE_OUTPUT: %p the pid, %r the rank (RANK, else
 * LOCAL_RANK, else 0), %h the host name, %% a percent sign; then adds the
 * format's extension. A report is written to "<path>.tmp.<pid>" and renamed
 * into place, so a reader never sees half a file. */
#ifndef CUMEMTRACE_OUTPUT_H
#define CUMEMTRACE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

struct out {
    int fd;
    int failed;             /* a write failed: the file is incomplete */
    int escape_html;        /* write '<' as \u003c: JSON inside an HTML <script> */
    int socket;             /* fd is a socket: a peer gone is a failed write, not SIGPIPE */
    size_t used;
    char buffer[16384];
};

int output_path(const char *template_, const char *suffix, char *path, size_t size);
/* Make sure `path` is this process's to write: a file another process wrote
 * (a template without %p, after fork or exec) is never overwritten; the pid
 * is added before the extension instead. Returns 0, or -1 if it cannot fit. */
int output_claim(char *path, size_t size);
int out_open(struct out *out, const char *path);       /* 0 or -1 (errno set) */
int out_close(struct out *out, const char *path);      /* flush, rename; 0 or -1 */
void out_fd(struct out *out, int fd);                  /* write to an open fd */
void out_flush(struct out *out);
void out_write(struct out *out, const char *data, size_t n);
void out_str(struct out *out, const char *s);
void out_printf(struct out *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void out_json_string(struct out *out, const char *s);  /* quoted and escaped; NULL -> null */
void out_bytes(struct out *out, uint64_t bytes);       /* "1.5 GiB" */
void format_bytes(uint64_t bytes, char *text, size_t size);

#endif
