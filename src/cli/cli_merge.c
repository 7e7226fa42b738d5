/* cli_merge.c - `cumemtrace merge FILES...`: one view across the ranks of a job.
 *
 * Each file is one rank's report (CUMEMTRACE_OUTPUT=cumemtrace-%r writes one
 * per rank). The rank comes from the report's process.rank; when a report
 * has none, or two reports claim the same rank, every report is numbered by
 * its place on the command line instead. A rank whose program's end was
 * seen (a Python program's exit hooks) is read at that end (cli_common.h):
 * the interpreter's teardown that follows frees what globals held, so its
 * exit would hide a rank that kept memory to the end. Others are read at
 * exit, or when their report was written. Four parts:
 *   - per rank: host, devices, device memory at that moment and at its peak,
 *     and the bytes leaked (live at exit and not held at the end: what
 *     nobody freed; only for exit reports);
 *   - the rank that diverges. The rule: a rank diverges when its device
 *     memory exceeds the median of the other ranks' by more than half of
 *     that median and by at least 1 MiB; of several, the one with the largest
 *     excess is named. One rank alone has nothing to diverge from;
 *   - the stacks matched by their frames as in diff (cli_stack_key), those
 *     whose bytes differ most between ranks first (the highest rank's bytes
 *     less the lowest's), then those holding most, with each rank's bytes;
 *   - each rank's growing sites (the growth verdict of its report). */
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
    "and its peak, leaked at exit), the rank that diverges (one whose device\n"
    "memory exceeds the median of the other ranks' by more than half and by at\n"
    "least 1 MiB), the stacks whose bytes differ most between ranks first, with\n"
    "their bytes in each rank, and each rank's growing sites. A rank whose\n"
    "program's end was seen (a Python program's exit hooks) is read at that end,\n"
    "before the interpreter's teardown freed what globals held; others at exit\n"
    "(the output says which). Ranks come from each report's process.rank (RANK),\n"
    "or from the order of FILES when a report has none.\n"
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
    int moment;                 /* CLI_AT_END or CLI_AT_EXIT */
    uint64_t live, peak, leaked;    /* live: at `moment` */
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

/* Stacks by how much their bytes differ between ranks (the highest rank's
 * less the lowest's), then by their bytes over all ranks, most first. */
struct held {
    const struct stack_sum *sum;
    uint64_t total, spread;
};

static int by_spread(const void *a, const void *b)
{
    const struct held *x = a, *y = b;
    if (x->spread != y->spread)
        return x->spread > y->spread ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->sum->key, y->sum->key);
}

static const char rule_text[] =
    "a rank diverges when its device memory exceeds the median of the other ranks' "
    "by more than half and by at least 1 MiB";

/* How the ranks were read, in words: all at the program's end, all at
 * exit, or some of each (then the table's "at" column says which). */
static const char *moments_text(const struct rank *ranks, int count)
{
    int ends = 0;
    for (int i = 0; i < count; i++)
        ends += ranks[i].moment == CLI_AT_END;
    if (ends == count)
        return "every rank at its program's end (Python's exit hooks), before the "
               "interpreter's teardown freed what globals held";
    if (ends == 0)
        return "every rank live at its report (the program's end was not seen: not a Python "
               "program, or a report written while it ran)";
    return "ranks whose program's end was seen at that end, the others live at their report";
}

/* "end", or the report's reason ("exit", "snapshot", "oom", ...). */
static const char *moment_label(const struct report *r, int moment)
{
    return moment == CLI_AT_END ? "end" : r->reason;
}

/* Each rank's growing sites: rate, bytes, and the site with its callers. */
static void write_growing_text(struct out *out, struct loaded_report *const *inputs,
                               const struct rank *ranks, int count, size_t top)
{
    out_str(out, "\n  Growing (leak suspects), per rank:\n");
    for (int i = 0; i < count; i++) {
        const struct report *r = &inputs[ranks[i].input]->report;
        if (!r->has_growth) {
            out_printf(out, "   rank %d: not known (a crash dump)\n", ranks[i].number);
            continue;
        }
        if (r->growing_count == 0) {
            out_printf(out, "   rank %d: none\n", ranks[i].number);
            continue;
        }
        for (uint32_t k = 0; k < r->growing_count && (top == 0 || k < top); k++) {
            const struct stack *s = &r->stacks[r->growing[k] - 1];
            char rate[24], now[24];
            format_bytes(growth_rate_bytes(growth_rate(&s->growth, &r->growth)), rate,
                         sizeof(rate));
            format_bytes(report_growth_bytes(r, s), now, sizeof(now));
            out_printf(out, "   rank %d: +%s per %s, %s %s\n", ranks[i].number, rate,
                       r->growth.mode == GROWTH_MARKS ? "mark" : "second", now,
                       r->growth.ended ? "when the program ended" : "now");
            cli_write_frames(out, r, r->growing[k], 2, "      ");
        }
    }
}

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
    out_printf(out, "  read at: %s\n", moments_text(ranks, count));
    out_printf(out, "  %5s  %-16s %-8s %-8s %10s %10s %10s  %s\n", "rank", "host", "devices",
               "at", "memory", "peak", "leaked", "file");
    for (int i = 0; i < count; i++) {
        const struct report *r = &inputs[ranks[i].input]->report;
        format_bytes(ranks[i].live, live, sizeof(live));
        format_bytes(ranks[i].peak, peak, sizeof(peak));
        if (ranks[i].has_leaked)
            format_bytes(ranks[i].leaked, leaked, sizeof(leaked));
        else
            snprintf(leaked, sizeof(leaked), "-");
        device_list(r, devices, sizeof(devices));
        out_printf(out, "  %5d  %-16s %-8s %-8s %10s %10s %10s  %s\n", ranks[i].number,
                   r->hostname[0] ? r->hostname : "?", devices, moment_label(r, ranks[i].moment),
                   live, peak, leaked, ranks[i].path);
    }
    out_str(out, "  (memory and peak: device memory, summed over the rank's devices, memory at "
                 "the moment in \"at\"; leaked: live at exit and not held at the program's end, "
                 "every kind)\n");
    if (divergent >= 0) {
        char m[24];
        format_bytes(ranks[divergent].live, live, sizeof(live));
        format_bytes(median, m, sizeof(m));
        out_printf(out, "\n  Divergent rank: %d holds %s %s, %s the median of the other ranks "
                        "(%s)\n",
                   ranks[divergent].number, live,
                   ranks[divergent].moment == CLI_AT_END ? "at its program's end" : "live",
                   median ? "more than 1.5 times" : "more than", m);
    } else {
        out_printf(out, "\n  No rank diverges%s\n", count < 2 ? " (one rank: nothing to compare)" : "");
    }
    out_printf(out, "  rule: %s\n", rule_text);

    out_str(out, "\n  Stacks by how much their bytes differ between ranks, then by bytes "
                 "(bytes per rank):\n");
    size_t shown = 0;
    for (size_t i = 0; i < held_count && (top == 0 || shown < top); i++) {
        if (held[i].total == 0)
            continue;
        char total[24], spread[24], bytes[24];
        format_bytes(held[i].total, total, sizeof(total));
        format_bytes(held[i].spread, spread, sizeof(spread));
        const char *label = report_stack_label(&inputs[held[i].sum->report]->report,
                                               held[i].sum->stack_id);
        out_printf(out, "   #%zu", ++shown);
        for (int k = 0; k < count; k++) {
            format_bytes(held[i].sum->bytes[ranks[k].input], bytes, sizeof(bytes));
            out_printf(out, "%s rank %d %s", k ? "," : "", ranks[k].number, bytes);
        }
        out_printf(out, " (%s between ranks, %s in all)", spread, total);
        if (label)
            out_printf(out, " [%s]", label);
        out_str(out, "\n");
        cli_write_frames(out, &inputs[held[i].sum->report]->report, held[i].sum->stack_id, frames,
                         "      ");
    }
    if (shown == 0)
        out_str(out, "   no stack holds memory\n");
    write_growing_text(out, inputs, ranks, count, top);
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

/* A rank's growing sites: "growing":[{"rate","per","bytes","frames"}], or null
 * where its report does not know (a crash dump). */
static void write_growing_json(struct out *out, const struct report *r, int frames)
{
    if (!r->has_growth) {
        out_str(out, ",\"growing\":null");
        return;
    }
    out_str(out, ",\"growing\":[");
    for (uint32_t k = 0; k < r->growing_count; k++) {
        const struct stack *s = &r->stacks[r->growing[k] - 1];
        out_printf(out, "%s{\"rate\":%.0f,\"per\":\"%s\",\"bytes\":%llu,\"frames\":", k ? "," : "",
                   growth_rate(&s->growth, &r->growth),
                   r->growth.mode == GROWTH_MARKS ? "mark" : "second",
                   (unsigned long long)report_growth_bytes(r, s));
        cli_write_frames_json(out, r, r->growing[k], frames);
        out_str(out, "}");
    }
    out_str(out, "]");
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
        out_printf(out, "],\"at\":\"%s\",\"live_bytes\":%llu,\"peak_bytes\":%llu,",
                   cli_moment_names[ranks[i].moment], (unsigned long long)ranks[i].live,
                   (unsigned long long)ranks[i].peak);
        if (ranks[i].has_leaked)
            out_printf(out, "\"leaked_bytes\":%llu", (unsigned long long)ranks[i].leaked);
        else
            out_str(out, "\"leaked_bytes\":null");
        write_growing_json(out, r, frames);
        out_str(out, "}");
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
            continue;
        out_printf(out, "%s{\"total_bytes\":%llu,\"spread_bytes\":%llu,\"bytes_by_rank\":[",
                   shown++ ? "," : "", (unsigned long long)held[i].total,
                   (unsigned long long)held[i].spread);
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
    int *moments = calloc((size_t)count, sizeof(int));
    struct cli_output *output = malloc(sizeof(*output));
    struct stack_sums sums = {NULL, 0};
    struct held *held = NULL;
    int loaded = 0;
    status = CLI_UNREADABLE;
    if (!inputs || !ranks || !moments || !output)
        goto out_of_memory;
    for (; loaded < count; loaded++) {
        inputs[loaded] = calloc(1, sizeof(struct loaded_report));
        if (!inputs[loaded])
            goto out_of_memory;
        if (cli_load(paths[loaded], &o.report, inputs[loaded]) < 0) {
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
        ranks[i].moment = cli_moment_for(r, CLI_AT_END);
        moments[i] = ranks[i].moment;
        ranks[i].live = cli_bytes_at(r, ranks[i].moment);
        ranks[i].peak = cli_bytes_at(r, CLI_AT_PEAK);
        ranks[i].has_leaked = strcmp(r->reason, "exit") == 0;
        for (size_t g = 0; g < r->group_count; g++)
            if (!(r->state.program_ended && r->groups[g].held_at_end))
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

    if (cli_sum_stacks(&sums, inputs, count, moments) < 0)
        goto done;
    held = calloc(sums.count + 1, sizeof(*held));
    if (!held)
        goto out_of_memory;
    for (size_t i = 0; i < sums.count; i++) {
        uint64_t low = UINT64_MAX, high = 0;
        held[i].sum = &sums.items[i];
        for (int k = 0; k < count; k++) {
            uint64_t bytes = sums.items[i].bytes[k];
            held[i].total += bytes;
            low = bytes < low ? bytes : low;
            high = bytes > high ? bytes : high;
        }
        held[i].spread = high - low;
    }
    qsort(held, sums.count, sizeof(*held), by_spread);
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
    free(moments);
    free(output);
    free(held);
    cli_free_sums(&sums);
    free(paths);
    return status;
}
