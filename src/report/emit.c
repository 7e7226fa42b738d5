/* emit.c - a report written out: the summary on the tracer's stderr
 * (log.h) and one file per configured format, each made new, written whole
 * and then named (output.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "config.h"
#include "log.h"
#include "report.h"

/* Each format's writer, report_NAME (config.h lists the formats). */
static void (*const writers[FORMAT_COUNT])(const struct report *, struct out *) = {
#define X(id, name, extension) [FORMAT_INDEX_##id] = report_##name,
    REPORT_FORMATS(X)
#undef X
};

void report_write_format(const struct report *r, int format, struct out *out)
{
    writers[format](r, out);
}

/* The file of one format (FORMAT_INDEX_*): made new and published under a
 * name no other file has, or put in place of the one `files` recorded for
 * this format (or, with files->replace, of whatever regular file is at the
 * name). */
static int write_file(const struct report *r, int format, const char *template_,
                      struct report_files *files)
{
    const char *extension = config_formats[format].extension;
    struct report_file *previous = NULL;
    for (int i = 0; files && i < files->count; i++)
        if (files->file[i].format == format)
            previous = &files->file[i];
    char path[OUTPUT_PATH_MAX];
    int result = -1;
    if (previous) {
        snprintf(path, sizeof(path), "%s", previous->path);
    } else if (output_path(template_, extension, path, sizeof(path)) < 0) {
        log_line("the output path template '%s' makes a path that is too long; no %s report "
                 "written",
                 template_, extension + 1);
        return -1;
    }
    struct out *out = pages_alloc(sizeof(*out));
    if (!out)
        return -1;
    if (out_create(out, path, r->options.file_mode) < 0) {
        log_line("cannot write report to '%s': %s", path, strerror(errno));
    } else {
        report_write_format(r, format, out);
        struct out_identity id = {0, 0};
        char asked[OUTPUT_PATH_MAX];
        snprintf(asked, sizeof(asked), "%s", path);
        int status = previous || (files && files->replace)
                         ? out_replace(out, path, sizeof(path), extension,
                                       previous ? &previous->id : NULL, &id)
                         : out_publish(out, path, sizeof(path), extension, &id);
        if (status < 0) {
            log_line("cannot write report to '%s': %s", asked, strerror(errno));
        } else {
            result = 0;
            if (!r->options.quiet && !previous) /* a rewrite: said the first time */
                log_line("%s report written to %s", r->reason, path);
            if (previous) {
                previous->id = id;
                snprintf(previous->path, sizeof(previous->path), "%s", path);
            } else if (files && files->count < REPORT_MAX_FILES) {
                struct report_file *f = &files->file[files->count++];
                f->format = format;
                f->id = id;
                snprintf(f->path, sizeof(f->path), "%s", path);
            }
        }
    }
    pages_free(out, sizeof(*out));
    return result;
}

int report_emit(const struct report *r, const char *template_, int summary,
                struct report_files *files)
{
    int result = 0;
    /* The files first, so that the summary can say where they are. */
    struct report_files *written = files ? files : pages_alloc(sizeof(*written));
    for (int format = 0; format < FORMAT_COUNT; format++)
        if ((r->options.formats & (1 << format)) && write_file(r, format, template_, written) < 0)
            result = -1;
    int fd = log_fd();
    if (summary && !r->options.quiet && fd >= 0) {
        struct out *out = pages_alloc(sizeof(*out));
        if (out) {
            out_fd(out, fd);
            report_summary(r, written, out);
            out_flush(out);
            pages_free(out, sizeof(*out));
        }
    }
    if (written && !files)
        pages_free(written, sizeof(*written));
    return result;
}
