/* emit.c - a report written out: the summary on stderr and one file per
 * configured format, each written whole to a temporary file and renamed
 * into place (output.h). */
#include <errno.h>
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

static int write_file(const struct report *r, int format, const char *template_)
{
    const char *extension = config_formats[format].extension;
    char path[4096];
    int result = -1;
    struct out *out = pages_alloc(sizeof(*out));
    if (!out)
        return -1;
    if (output_path(template_, extension, path, sizeof(path)) < 0 ||
        output_claim(path, sizeof(path)) < 0) {
        log_line("the output path template '%s' makes a path that is too long; no %s report "
                 "written", template_, extension + 1);
    } else if (out_open(out, path) < 0) {
        log_line("cannot write report to '%s': %s", path, strerror(errno));
    } else {
        writers[format](r, out);
        if (out_close(out, path) < 0) {
            log_line("cannot write report to '%s': %s", path, strerror(errno));
        } else {
            result = 0;
            if (!config.quiet)
                log_line("%s report written to %s", r->reason, path);
        }
    }
    pages_free(out, sizeof(*out));
    return result;
}

int report_emit(const struct report *r, const char *template_, int summary)
{
    int result = 0;
    if (summary && !config.quiet) {
        struct out *out = pages_alloc(sizeof(*out));
        if (out) {
            out_fd(out, STDERR_FILENO);
            report_summary(r, out);
            out_flush(out);
            pages_free(out, sizeof(*out));
        }
    }
    for (int format = 0; format < FORMAT_COUNT; format++)
        if ((config.formats & (1 << format)) && write_file(r, format, template_) < 0)
            result = -1;
    return result;
}

int report_write_to(const char *reason, const char *template_, int summary)
{
    if (!config.formats && (!summary || config.quiet))
        return 0;      /* nothing would be written: no collecting, no symbols */
    struct report *r = report_new(reason);
    if (!r)
        return -1;
    int result = report_emit(r, template_, summary);
    report_delete(r);
    return result;
}
