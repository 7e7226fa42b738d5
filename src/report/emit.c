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

static int write_file(const struct report *r, int format, const char *template_,
                      const char *suffix)
{
    char path[4096];
    int result = -1;
    struct out *out = pages_alloc(sizeof(*out));
    if (!out)
        return -1;
    if (output_path(template_, suffix, path, sizeof(path)) < 0 ||
        output_claim(path, sizeof(path)) < 0) {
        log_line("the output path template '%s' makes a path that is too long; no %s report "
                 "written", template_, suffix + 1);
    } else if (out_open(out, path) < 0) {
        log_line("cannot write report to '%s': %s", path, strerror(errno));
    } else {
        switch (format) {
        case FORMAT_JSON: report_json(r, out); break;
        case FORMAT_HTML: report_html(r, out); break;
        case FORMAT_FOLDED: report_folded(r, out); break;
        case FORMAT_PERFETTO: report_perfetto(r, out); break;
        case FORMAT_MEMVIZ: report_memviz(r, out); break;
        default: report_text(r, out, 0); break;
        }
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
            report_text(r, out, 1);
            out_flush(out);
            pages_free(out, sizeof(*out));
        }
    }
    if ((config.formats & FORMAT_TEXT) && write_file(r, FORMAT_TEXT, template_, ".txt") < 0)
        result = -1;
    if ((config.formats & FORMAT_JSON) && write_file(r, FORMAT_JSON, template_, ".json") < 0)
        result = -1;
    if ((config.formats & FORMAT_HTML) && write_file(r, FORMAT_HTML, template_, ".html") < 0)
        result = -1;
    if ((config.formats & FORMAT_FOLDED) &&
        write_file(r, FORMAT_FOLDED, template_, ".folded") < 0)
        result = -1;
    if ((config.formats & FORMAT_PERFETTO) &&
        write_file(r, FORMAT_PERFETTO, template_, ".trace.json") < 0)
        result = -1;
    if ((config.formats & FORMAT_MEMVIZ) &&
        write_file(r, FORMAT_MEMVIZ, template_, ".pickle") < 0)
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
