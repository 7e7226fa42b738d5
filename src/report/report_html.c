/* report_html.c - the report as one self-contained HTML page.
 *
 * The page carries the JSON report itself (report_json, in a
 * <script type="application/json"> element, every '<' written as \u003c so
 * that no "</script>" can end it early) and a small script that draws it:
 * live bytes over time per device and kind, with OOMs, marks and the peak;
 * an icicle graph of live device memory by stack at exit and at the peak;
 * tables of leaked and growing stacks (and those that grew, then were freed
 * near the end), the counters and the fragmentation verdict. Nothing is fetched at view time: no network, no libraries.
 *
 * The script and the style live in report_html.js and .css beside this file, compiled in
 * by tools/embed.cmake. */
#include <string.h>

#include "report.h"
#include "report_html_css.h"
#include "report_html_js.h"

static void write_title(const struct report *r, struct out *out)
{
    out_str(out, "<title>cumemtrace: ");
    for (const char *p = output_base_name(r->argv_bytes ? r->argv : ""); *p; p++) {
        switch (*p) {
        case '<': out_str(out, "&lt;"); break;
        case '>': out_str(out, "&gt;"); break;
        case '&': out_str(out, "&amp;"); break;
        default: out_write(out, p, 1);
        }
    }
    out_printf(out, " (pid %d, %s)</title>\n", r->pid, r->reason);
}

void report_html(const struct report *r, struct out *out)
{
    out_str(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    write_title(r, out);
    out_str(out, "<style>\n");
    out_str(out, report_html_css);
    out_str(out, "</style>\n</head>\n<body>\n"
                 "<div id=\"app\"><p id=\"loading\">This report needs JavaScript.</p></div>\n"
                 "<script type=\"application/json\" id=\"report-data\">");
    out->escape_html = 1;
    report_json(r, out);
    out->escape_html = 0;
    out_str(out, "</script>\n<script>\n");
    out_str(out, report_html_js);
    out_str(out, "</script>\n</body>\n</html>\n");
}
