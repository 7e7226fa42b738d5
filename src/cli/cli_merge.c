/* cli_merge.c - `cumemtrace merge FILES...`: one view across the ranks of a job.
 *
 * Each file is one rank's report (CUMEMTRACE_OUTPUT=cumemtrace-%r writes one
 * per rank). The rank comes from the report's process.rank; when a report
 * has none, or two reports claim the same rank, every report is numbered by
 * its place on the command line instead. Three parts:
 *   - per rank: host, devices, device memory live and at its peak, and the
 *     bytes leaked (live at exit; only for exit reports);
 *   - the stacks that hold most across all ranks, matched by their frames as
 *     in diff (cli_stack_key), with their live bytes in each rank;
 *   - the rank that diverges. The rule: a rank diverges when its live device
 *     memory exceeds the median of the other ranks' by more than half of that
 *     median and by at least 1 MiB; of several, the one with the largest
 *     excess is named. One rank alone has nothing to diverge from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "merge_html_js.h"
#include "report_html_css.h"

#define DIVERGENCE_MIN_BYTES (1ull << 20)

const char merge_usage[] =
    "usage: cumemtrace merge FILES... [--format text|json|html] [-o PATH] [--top N]\n"
    "       [--frames N] [--all-frames]\n"
    "\n"
    "One view across the ranks of a job, from one report per rank (JSON reports\n"
    "or crash dumps): per-rank totals side by side (host, devices, device memory\n"
    "live and peak, leaked at exit), the stacks that hold most across all ranks\n"
    "with their bytes in each rank, and the rank that diverges: one whose live\n"
    "device memory exceeds the median of the other ranks' by more than half and\n"
    "by at least 1 MiB. Ranks come from each report's process.rank (RANK), or\n"
    "from the order of FILES when a report has none.\n"
    "  --format text|json|html   what to write (default text; html: one self-contained page)\n"
    "  -o, --output PATH    write to PATH instead of stdout (replaced if it exists)\n"
    "  --top N              stacks listed (default 10; 0: all)\n"
    "  --frames N           frames shown per stack in the text (default 6)\n"
    "  --all-frames         hide no frame (start-up, interpreter, frameworks)\n"
    CLI_EXIT_STATUS;

struct rank {
    const char *path;
    int input;                  /* index into the loaded reports */
    int number;
    uint64_t live, peak, leaked;
    int has_leaked;             /* an exit report */
    double excess;              /* times the median of the others, for the rule */
};

static int by_number(const void *a, const void *b)
{
    const struct rank *x = a, *y = b;
    return x->number < y->number ? -1 : x->number > y->number;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of every rank's live bytes but rank `skip`'s. */
static uint64_t median_of_others(const struct rank *ranks, int count, int skip, uint64_t *scratch)
{
    int n = 0;
    for (int i = 0; i < count; i++)
        if (i != skip)
            scratch[n++] = ranks[i].live;
    qsort(scratch, (size_t)n, sizeof(uint64_t), by_value);
    return n % 2 ? scratch[n / 2] : scratch[n / 2 - 1] / 2 + scratch[n / 2] / 2 +
                                        (scratch[n / 2 - 1] % 2 + scratch[n / 2] % 2) / 2;
}

/* The divergent rank's index in `ranks`, or -1; its median in *median.
 * -2 when out of memory. */
static int find_divergent(const struct rank *ranks, int count, uint64_t *median)
{
    uint64_t *scratch = calloc((size_t)count + 1, sizeof(uint64_t));
    if (!scratch)
        return -2;
    int found = -1;
    uint64_t best = 0;
    for (int i = 0; count > 1 && i < count; i++) {
        uint64_t m = median_of_others(ranks, count, i, scratch);
        if (ranks[i].live <= m)
            continue;
        uint64_t excess = ranks[i].live - m;
        if (excess * 2 > m && excess >= DIVERGENCE_MIN_BYTES && excess > best) {
            best = excess;
            found = i;
            *median = m;
        }
    }
    free(scratch);
    return found;
}

static void device_list(const struct report *r, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int d = 0; d < r->device_count && used + 8 < size; d++) {
        int slot = r->devices[d].slot;
        if (slot == COUNTER_NO_DEVICE)
            continue;           /* address space reserved on no device in particular */
        int n = snprintf(text + used, size - used, "%s%d", used ? "," : "", slot);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    if (!used)
        snprintf(text, size, "-");
}

/* Stacks by their bytes over all ranks, most first. */
struct held {
    const struct stack_sum *sum;
    uint64_t total;
};

static int by_total(const void *a, const void *b)
{
    const struct held *x = a, *y = b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->sum->key, y->sum->key);
}

static const char rule_text[] =
    "a rank diverges when its live device memory exceeds the median of the other ranks' "
    "by more than half and by at least 1 MiB";

static void write_text(struct out *out, struct loaded_report *const *inputs,
                       const struct rank *ranks, int count, int from_order, int divergent,
                       uint64_t median, const struct held *held, size_t held_count,
                       size_t top, int frames)
{
    char live[24], peak[24], leaked[24], devices[64];
    out_printf(out, "==== cumemtrace merge: %d rank%s ====\n", count, count == 1 ? "" : "s");
    if (from_order)
        out_str(out, "  ranks numbered by the order of the files (a report names no rank, or "
                     "two name the same)\n");
    out_printf(out, "  %5s  %-16s %-8s %10s %10s %10s  %s\n", "rank", "host", "devices", "live",
               "peak", "leaked", "file");
    for (int i = 0; i < count; i++) {
        const struct report *r = &inputs[ranks[i].input]->report;
        format_bytes(ranks[i].live, live, sizeof(live));
        format_bytes(ranks[i].peak, peak, sizeof(peak));
        if (ranks[i].has_leaked)
            format_bytes(ranks[i].leaked, leaked, sizeof(leaked));
        else
            snprintf(leaked, sizeof(leaked), "-");
        device_list(r, devices, sizeof(devices));
        out_printf(out, "  %5d  %-16s %-8s %10s %10s %10s  %s\n", ranks[i].number,
                   r->hostname[0] ? r->hostname : "?", devices, live, peak, leaked,
                   ranks[i].path);
    }
    out_str(out, "  (live and peak: device memory, summed over the rank's devices; leaked: "
                 "live at exit, every kind)\n");
    if (divergent >= 0) {
        char m[24];
        format_bytes(ranks[divergent].live, live, sizeof(live));
        format_bytes(median, m, sizeof(m));
        out_printf(out, "\n  Divergent rank: %d holds %s live, %s the median of the other ranks "
                        "(%s)\n",
                   ranks[divergent].number, live,
                   median ? "more than 1.5 times" : "more than", m);
    } else {
        out_printf(out, "\n  No rank diverges%s\n", count < 2 ? " (one rank: nothing to compare)" : "");
    }
    out_printf(out, "  rule: %s\n", rule_text);

    out_str(out, "\n  Stacks holding the most across ranks (live bytes per rank):\n");
    size_t shown = 0;
    for (size_t i = 0; i < held_count && (top == 0 || shown < top); i++) {
        if (held[i].total == 0)
            break;
        char total[24], bytes[24];
        format_bytes(held[i].total, total, sizeof(total));
        const char *label = report_stack_label(&inputs[held[i].sum->report]->report,
                                               held[i].sum->stack_id);
        out_printf(out, "   #%zu %s in all", ++shown, total);
        if (label)
            out_printf(out, " [%s]", label);
        out_str(out, ":");
        for (int k = 0; k < count; k++) {
            format_bytes(held[i].sum->bytes[ranks[k].input], bytes, sizeof(bytes));
            out_printf(out, "%s rank %d %s", k ? "," : "", ranks[k].number, bytes);
        }
        out_str(out, "\n");
        cli_write_frames(out, &inputs[held[i].sum->report]->report, held[i].sum->stack_id, frames,
                         "      ");
    }
    if (shown == 0)
        out_str(out, "   no stack holds memory\n");
    out_str(out, "==== end of cumemtrace merge ====\n");
}

/* --format html: the JSON view inside one self-contained page, drawn by
 * src/merge_html.js, in the HTML report's style. Every '<' of the JSON is
 * written as \u003c, so no "</script>" in a path or a name can end it. */
static void write_page_start(struct out *out)
{
    out_str(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<title>cumemtrace merge</title>\n<style>\n");
    out_str(out, report_html_css);
    out_str(out, ".bar { display: inline-block; width: 160px; height: 10px; background: #eceff1; "
                 "margin-left: 6px; vertical-align: middle; }\n"
                 ".bar span { display: block; height: 100%; }\n"
                 "</style>\n</head>\n<body>\n<div id=\"app\"><p>This page needs JavaScript.</p>"
                 "</div>\n<script type=\"application/json\" id=\"merge-data\">");
    out->escape_html = 1;
}

static void write_page_end(struct out *out)
{
    out->escape_html = 0;
    out_str(out, "</script>\n<script>\n");
    out_str(out, merge_html_js);
    out_str(out, "</script>\n</body>\n</html>\n");
}

static void write_json(struct out *out, struct loaded_report *const *inputs,
                       const struct rank *ranks, int count, int from_order, int divergent,
                       uint64_t median, const struct held *held, size_t held_count,
                       size_t top, int frames)
{
    out_printf(out, "{\"format\":\"cumemtrace-merge\",\"version\":1,\"ranks_from\":\"%s\","
                    "\"ranks\":[", from_order ? "file_order" : "reports");
    for (int i = 0; i < count; i++) {
        const struct report *r = &inputs[ranks[i].input]->report;
        out_printf(out, "%s{\"rank\":%d,\"file\":", i ? "," : "", ranks[i].number);
        out_json_string(out, ranks[i].path);
        out_str(out, ",\"host\":");
        out_json_string(out, r->hostname[0] ? r->hostname : NULL);
        out_printf(out, ",\"pid\":%d,\"reason\":", r->pid);
        out_json_string(out, r->reason);
        if (r->world_size >= 0)
            out_printf(out, ",\"world_size\":%d", r->world_size);
        else
            out_str(out, ",\"world_size\":null");
        out_str(out, ",\"devices\":[");
        for (int d = 0, first = 1; d < r->device_count; d++) {
            if (r->devices[d].slot == COUNTER_NO_DEVICE)
                continue;
            out_printf(out, "%s%d", first ? "" : ",", r->devices[d].slot);
            first = 0;
        }
        out_printf(out, "],\"live_bytes\":%llu,\"peak_bytes\":%llu,",
                   (unsigned long long)ranks[i].live, (unsigned long long)ranks[i].peak);
        if (ranks[i].has_leaked)
            out_printf(out, "\"leaked_bytes\":%llu}", (unsigned long long)ranks[i].leaked);
        else
            out_str(out, "\"leaked_bytes\":null}");
    }
    out_str(out, "],\"divergent\":");
    if (divergent >= 0)
        out_printf(out, "{\"rank\":%d,\"live_bytes\":%llu,\"median_of_others\":%llu}",
                   ranks[divergent].number, (unsigned long long)ranks[divergent].live,
                   (unsigned long long)median);
    else
        out_str(out, "null");
    out_str(out, ",\"rule\":");
    out_json_string(out, rule_text);
    out_str(out, ",\"stacks\":[");
    size_t shown = 0;
    for (size_t i = 0; i < held_count && (top == 0 || shown < top); i++) {
        if (held[i].total == 0)
            break;
        out_printf(out, "%s{\"total_bytes\":%llu,\"bytes_by_rank\":[", shown++ ? "," : "",
                   (unsigned long long)held[i].total);
        for (int k = 0; k < count; k++)
            out_printf(out, "%s%llu", k ? "," : "",
                       (unsigned long long)held[i].sum->bytes[ranks[k].input]);
        const struct report *from = &inputs[held[i].sum->report]->report;
        out_str(out, "],\"label\":");
        out_json_string(out, report_stack_label(from, held[i].sum->stack_id));
        out_str(out, ",\"frames\":");
        cli_write_frames_json(out, from, held[i].sum->stack_id, frames);
        out_str(out, "}");
    }
    out_str(out, "]}\n");
}

int command_merge(int argc, char **argv)
{
    char **paths = calloc((size_t)argc + 1, sizeof(char *));
    if (!paths) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    struct compare_options o = {.top = 10, .frames = 6, .files = paths};
    int status = cli_parse_compare("merge", merge_usage, argc, argv, &o);
    if (status == CLI_OK && !o.help && o.file_count == 0)
        status = cli_usage_error("merge", "no report files given", NULL);
    if (status != CLI_OK || o.help) {
        free(paths);
        return status;
    }
    int json = strcmp(o.format, "json") == 0, html = strcmp(o.format, "html") == 0;
    int count = o.file_count;

    struct loaded_report **inputs = calloc((size_t)count, sizeof(*inputs));
    struct rank *ranks = calloc((size_t)count, sizeof(*ranks));
    struct cli_output *output = malloc(sizeof(*output));
    struct stack_sums sums = {NULL, 0};
    struct held *held = NULL;
    int loaded = 0;
    status = CLI_UNREADABLE;
    if (!inputs || !ranks || !output)
        goto out_of_memory;
    for (; loaded < count; loaded++) {
        inputs[loaded] = calloc(1, sizeof(struct loaded_report));
        if (!inputs[loaded])
            goto out_of_memory;
        if (cli_load(paths[loaded], inputs[loaded]) < 0) {
            loaded++;
            goto done;
        }
    }
    /* Ranks: from the reports, unless one has none or two share one. */
    int from_order = 0;
    for (int i = 0; i < count; i++) {
        const struct report *r = &inputs[i]->report;
        ranks[i].path = paths[i];
        ranks[i].input = i;
        ranks[i].number = r->rank;
        ranks[i].live = cli_live_bytes(r);
        ranks[i].peak = cli_peak_bytes(r);
        ranks[i].has_leaked = strcmp(r->reason, "exit") == 0;
        for (size_t g = 0; g < r->group_count; g++)
            ranks[i].leaked += r->groups[g].bytes;
        if (r->rank < 0)
            from_order = 1;
        for (int k = 0; k < i; k++)
            if (ranks[k].number == r->rank)
                from_order = 1;
    }
    for (int i = 0; from_order && i < count; i++)
        ranks[i].number = i;
    qsort(ranks, (size_t)count, sizeof(*ranks), by_number);
    uint64_t median = 0;
    int divergent = find_divergent(ranks, count, &median);
    if (divergent == -2)
        goto out_of_memory;

    if (cli_sum_stacks(&sums, inputs, count) < 0)
        goto done;
    held = calloc(sums.count + 1, sizeof(*held));
    if (!held)
        goto out_of_memory;
    for (size_t i = 0; i < sums.count; i++) {
        held[i].sum = &sums.items[i];
        for (int k = 0; k < count; k++)
            held[i].total += sums.items[i].bytes[k];
    }
    qsort(held, sums.count, sizeof(*held), by_total);
    status = cli_output_open(output, o.output);
    if (status != CLI_OK)
        goto done;
    if (html)
        write_page_start(&output->out);
    if (json || html)
        write_json(&output->out, inputs, ranks, count, from_order, divergent, median, held,
                   sums.count, (size_t)o.top, (int)o.frames);
    if (html)
        write_page_end(&output->out);
    if (!json && !html)
        write_text(&output->out, inputs, ranks, count, from_order, divergent, median, held,
                   sums.count, (size_t)o.top, (int)o.frames);
    status = cli_output_close(output);
    goto done;
out_of_memory:
    fprintf(stderr, "cumemtrace: out of memory\n");
    status = CLI_UNREADABLE;
done:
    for (int i = 0; inputs && i < loaded; i++) {
        if (inputs[i])
            report_unload(inputs[i]);
        free(inputs[i]);
    }
    free(inputs);
    free(ranks);
    free(output);
    free(held);
    cli_free_sums(&sums);
    free(paths);
    return status;
}
