/* cli_diff.c - `cumemtrace diff A B`: what grew between two reports.
 *
 * A and B are reports or snapshots of the same program (JSON or dumps),
 * usually of one run, or of two runs. Stacks are matched by what their
 * frames say (cli_stack_key: function and file:line, or module and offset),
 * never by address or id, which change between runs. For each stack: its
 * bytes in A, in B, and the change; sorted by growth, the largest first.
 * A stack is "new" when it holds nothing in A, "vanished" when it holds
 * nothing in B. Device memory per device and in total comes first.
 *
 * Both are read at one moment (cli_common.h): by default at the program's
 * end when both reports saw it (a Python program's exit hooks), since the
 * interpreter's teardown that follows frees what globals held and leaves
 * an exit report with little to compare; else at exit. --at picks it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "frames.h"

const char diff_usage[] =
    "usage: cumemtrace diff A B [--at end|peak|exit] [--format text|json] [-o PATH]\n"
    "       [--top N] [--frames N] [--all-frames]\n"
    "\n"
    "What grew between two reports or snapshots A and B (JSON reports or crash\n"
    "dumps), by allocation stack: bytes in A, in B, and the change, the\n"
    "largest growth first; stacks new in B and vanished from A are marked.\n"
    "Stacks are matched by function and file:line (module and offset without\n"
    "debug information), so A and B may come from different runs.\n"
    "  --at end|peak|exit   the moment compared: end, what was held when a Python\n"
    "                       program ended (its exit hooks), before the interpreter's\n"
    "                       teardown freed what globals held; peak, each stack at\n"
    "                       its own highest and each device at its peak; exit, what\n"
    "                       was live when the report was written. Default: end when\n"
    "                       both reports saw it, else exit (the output says which)\n"
    "  --format text|json   what to write (default text)\n"
    "  -o, --output PATH    write to PATH instead of stdout (replaced if it exists)\n"
    "  --top N              stacks listed (default 20; 0: all)\n"
    "  --frames N           frames shown per stack in the text (default 6)\n"
    "  --all-frames         hide no frame (start-up, interpreter, frameworks)\n"
    CLI_EXIT_STATUS;

struct change {
    const struct stack_sum *sum;
    long long change;
};

static int by_growth(const void *a, const void *b)
{
    const struct change *x = a, *y = b;
    if (x->change != y->change)
        return x->change > y->change ? -1 : 1;
    return strcmp(x->sum->key, y->sum->key);
}

static const char *status_of(const struct stack_sum *s)
{
    if (s->bytes[0] == 0 && s->bytes[1] > 0)
        return "new";
    if (s->bytes[0] > 0 && s->bytes[1] == 0)
        return "vanished";
    if (s->bytes[1] > s->bytes[0])
        return "grew";
    return s->bytes[1] < s->bytes[0] ? "shrank" : "unchanged";
}

static void describe(struct out *out, const char *label, const char *path, const struct report *r,
                     int moment)
{
    out_printf(out, "  %s: %s (%s report, pid %d, %.1f s after start): %s\n", label, path,
               r->reason, r->pid, r->now_ms / 1000.0, cli_moment_text(r, moment));
}

/* Device memory per device slot, in A and in B. */
struct device_change {
    int slot;
    uint64_t a, b;
};

static int collect_devices(const struct report *a, const struct report *b, const int *moments,
                           struct device_change *devices)
{
    int count = 0;
    for (int slot = 0; slot <= MAX_DEVICES; slot++) {
        int in_a = a->counters && a->counters->device_seen[slot];
        int in_b = b->counters && b->counters->device_seen[slot];
        if (!in_a && !in_b)
            continue;
        devices[count].slot = slot;
        devices[count].a = in_a ? cli_device_bytes(a, slot, moments[0]) : 0;
        devices[count].b = in_b ? cli_device_bytes(b, slot, moments[1]) : 0;
        count++;
    }
    return count;
}

/* What the diff compared, for both writers. */
struct compared {
    int moments[2];             /* each report's (cli_moment_for) */
    int asked, explicit;        /* the moment asked for; by --at */
};

/* Why the moment is not the program's end, in a line of the text; "" when it is
 * or --at asked for another that both could give. */
static const char *moment_note(const struct compared *at, const struct report *a,
                               const struct report *b)
{
    if (at->moments[0] == at->moments[1] && at->moments[0] == at->asked &&
        (at->explicit || at->asked == CLI_AT_END))
        return "";
    /* Snapshots (a signal, cumemtrace_snapshot(), an OOM) are read when
     * they were taken: not at any exit. */
    int a_exit = strcmp(a->reason, "exit") == 0, b_exit = strcmp(b->reason, "exit") == 0;
    if (at->moments[0] == CLI_AT_EXIT && at->moments[1] == CLI_AT_EXIT && !a_exit && !b_exit)
        return "  compared what was live when each snapshot was taken\n";
    if (at->moments[0] == CLI_AT_EXIT && at->moments[1] == CLI_AT_EXIT && a_exit != b_exit)
        return a_exit ? "  compared what was live at A's exit and when snapshot B was taken\n"
                      : "  compared what was live when snapshot A was taken and at B's exit\n";
    if (at->explicit)
        return "  the program's end was not seen in both: a report without it is read at exit\n";
    return "  compared at exit: the program's end (a Python program's exit hooks) was not seen "
           "in both\n";
}

static const char *device_heading(int moment)
{
    return moment == CLI_AT_END ? "Device memory at end" : moment == CLI_AT_PEAK
                                                               ? "Device memory peak"
                                                               : "Device memory live";
}

static void write_text(struct out *out, char **paths, struct loaded_report *const *inputs,
                       const struct compared *at, const struct device_change *devices,
                       int device_count, const struct change *changes, size_t count, size_t top,
                       int frames)
{
    const struct report *a = &inputs[0]->report, *b = &inputs[1]->report;
    char x[24], y[24], z[24];
    out_str(out, "==== cumemtrace diff ====\n");
    describe(out, "A", paths[0], a, at->moments[0]);
    describe(out, "B", paths[1], b, at->moments[1]);
    out_str(out, moment_note(at, a, b));
    out_printf(out, "  %-20s %10s %10s %11s\n",
               device_heading(at->moments[0] == at->moments[1] ? at->moments[0] : CLI_AT_EXIT),
               "A", "B", "change");
    uint64_t total_a = 0, total_b = 0;
    for (int d = 0; d < device_count; d++) {
        char label[32];
        if (devices[d].slot == COUNTER_NO_DEVICE)
            snprintf(label, sizeof(label), "device unknown");
        else
            snprintf(label, sizeof(label), "device %d", devices[d].slot);
        format_bytes(devices[d].a, x, sizeof(x));
        format_bytes(devices[d].b, y, sizeof(y));
        cli_format_change((long long)(devices[d].b - devices[d].a), z, sizeof(z));
        out_printf(out, "    %-18s %10s %10s %11s\n", label, x, y, z);
        total_a += devices[d].a;
        total_b += devices[d].b;
    }
    format_bytes(total_a, x, sizeof(x));
    format_bytes(total_b, y, sizeof(y));
    cli_format_change((long long)(total_b - total_a), z, sizeof(z));
    out_printf(out, "    %-18s %10s %10s %11s\n", "total", x, y, z);

    size_t counts[5] = {0};
    static const char *statuses[5] = {"grew", "new", "shrank", "vanished", "unchanged"};
    for (size_t i = 0; i < count; i++)
        for (int k = 0; k < 5; k++)
            if (strcmp(status_of(changes[i].sum), statuses[k]) == 0)
                counts[k]++;
    out_printf(out, "\n  Stacks by growth (%s, A -> B): %zu grew, %zu new, %zu shrank, "
                    "%zu vanished, %zu unchanged\n",
               at->moments[0] == at->moments[1] && at->moments[0] == CLI_AT_END
                   ? "bytes held at the end"
               : at->moments[0] == at->moments[1] && at->moments[0] == CLI_AT_PEAK
                   ? "peak bytes"
                   : "live bytes",
               counts[0], counts[1], counts[2], counts[3], counts[4]);
    size_t shown = 0;
    for (size_t i = 0; i < count && (top == 0 || shown < top); i++) {
        const struct stack_sum *s = changes[i].sum;
        if (changes[i].change == 0)
            continue;
        format_bytes(s->bytes[0], x, sizeof(x));
        format_bytes(s->bytes[1], y, sizeof(y));
        cli_format_change(changes[i].change, z, sizeof(z));
        const char *label = report_stack_label(&inputs[s->report]->report, s->stack_id);
        out_printf(out, "   #%zu %s %s%s%s%s: %s -> %s\n", ++shown, z, status_of(s),
                   label ? " [" : "", label ? label : "", label ? "]" : "", x, y);
        char site[OUTPUT_PATH_MAX + 1024], escaped[sizeof(site) * 4];
        frames_site_text(&inputs[s->report]->report, s->stack_id, site, sizeof(site));
        if (site[0])
            out_printf(out, "      at %s\n", output_text(site, escaped, sizeof(escaped)));
        cli_write_frames(out, &inputs[s->report]->report, s->stack_id, frames, "      ");
    }
    if (shown == 0)
        out_str(out, "   no stack changed\n");
    out_str(out, "==== end of cumemtrace diff ====\n");
}

/* A side: its file, and its device memory at the moment it was read at
 * ("bytes"), and live when its report was written ("live_bytes"). */
static void write_side_json(struct out *out, const char *path, const struct report *r, int moment)
{
    out_str(out, "{\"file\":");
    out_json_string(out, path);
    out_str(out, ",\"reason\":");
    out_json_string(out, r->reason);
    out_printf(out, ",\"pid\":%d,\"duration_s\":%.3f,\"at\":\"%s\",\"bytes\":%llu,"
                    "\"live_bytes\":%llu,\"program_end_seen\":%s}",
               r->pid, r->now_ms / 1000.0, cli_moment_names[moment],
               (unsigned long long)cli_bytes_at(r, moment),
               (unsigned long long)cli_bytes_at(r, CLI_AT_EXIT),
               r->end.ended ? "true" : "false");
}

static void write_json(struct out *out, char **paths, struct loaded_report *const *inputs,
                       const struct compared *at, const struct device_change *devices,
                       int device_count, const struct change *changes, size_t count, size_t top,
                       int frames)
{
    out_printf(out, "{\"format\":\"cumemtrace-diff\",\"version\":1,\"at\":\"%s\",\"a\":",
               cli_moment_names[at->asked]);
    write_side_json(out, paths[0], &inputs[0]->report, at->moments[0]);
    out_str(out, ",\"b\":");
    write_side_json(out, paths[1], &inputs[1]->report, at->moments[1]);
    out_str(out, ",\"devices\":[");
    for (int d = 0; d < device_count; d++) {
        out_str(out, d ? ",{" : "{");
        if (devices[d].slot == COUNTER_NO_DEVICE)
            out_str(out, "\"device\":null");
        else
            out_printf(out, "\"device\":%d", devices[d].slot);
        out_printf(out, ",\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld}",
                   (unsigned long long)devices[d].a, (unsigned long long)devices[d].b,
                   (long long)(devices[d].b - devices[d].a));
    }
    uint64_t total_a = 0, total_b = 0;
    for (int d = 0; d < device_count; d++) {
        total_a += devices[d].a;
        total_b += devices[d].b;
    }
    out_printf(out, "],\"total\":{\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld}",
               (unsigned long long)total_a, (unsigned long long)total_b,
               (long long)(total_b - total_a));
    out_str(out, ",\"stacks\":[");
    size_t shown = 0;
    for (size_t i = 0; i < count && (top == 0 || shown < top); i++) {
        const struct stack_sum *s = changes[i].sum;
        if (changes[i].change == 0)
            continue;
        out_printf(out, "%s{\"status\":\"%s\",\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld,"
                        "\"frames\":",
                   shown++ ? "," : "", status_of(s), (unsigned long long)s->bytes[0],
                   (unsigned long long)s->bytes[1], changes[i].change);
        cli_write_frames_json(out, &inputs[s->report]->report, s->stack_id, frames);
        char site[OUTPUT_PATH_MAX + 1024];
        frames_site_text(&inputs[s->report]->report, s->stack_id, site, sizeof(site));
        out_str(out, ",\"site\":");
        out_json_string(out, site[0] ? site : NULL);
        out_str(out, ",\"label\":");
        out_json_string(out, report_stack_label(&inputs[s->report]->report, s->stack_id));
        out_str(out, "}");
    }
    size_t unchanged = 0;
    for (size_t i = 0; i < count; i++)
        unchanged += changes[i].change == 0;
    out_printf(out, "],\"stacks_compared\":%zu,\"stacks_unchanged\":%zu}\n", count, unchanged);
}

int command_diff(int argc, char **argv)
{
    char **paths = calloc((size_t)argc + 1, sizeof(char *));
    if (!paths) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    struct compare_options o = {.top = 20, .frames = 6, .files = paths};
    int status = cli_parse_compare("diff", diff_usage, argc, argv, &o);
    if (status == CLI_OK && !o.help && o.file_count != 2)
        status = cli_usage_error("diff", "two files are needed, A and B", NULL);
    if (status != CLI_OK || o.help) {
        free(paths);
        return status;
    }
    int json = strcmp(o.format, "json") == 0;

    struct loaded_report *inputs[2] = {calloc(1, sizeof(struct loaded_report)),
                                       calloc(1, sizeof(struct loaded_report))};
    struct device_change *devices = calloc(MAX_DEVICES + 1, sizeof(*devices));
    struct cli_output *output = malloc(sizeof(*output));
    struct stack_sums sums = {NULL, 0};
    struct change *changes = NULL;
    int loaded = 0;
    status = CLI_UNREADABLE;
    if (!inputs[0] || !inputs[1] || !devices || !output) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        goto done;
    }
    for (; loaded < 2; loaded++)
        if (cli_load(paths[loaded], &o.report, inputs[loaded]) < 0) {
            loaded++;           /* release what it did read */
            goto done;
        }
    struct compared at = {{CLI_AT_EXIT, CLI_AT_EXIT}, CLI_AT_END, o.at != NULL};
    if (o.at)
        at.asked = strcmp(o.at, "end") == 0 ? CLI_AT_END : strcmp(o.at, "peak") == 0 ? CLI_AT_PEAK
                                                                                     : CLI_AT_EXIT;
    else if (!inputs[0]->report.end.ended || !inputs[1]->report.end.ended)
        at.asked = CLI_AT_EXIT;
    for (int i = 0; i < 2; i++)
        at.moments[i] = cli_moment_for(&inputs[i]->report, at.asked);
    if (cli_sum_stacks(&sums, inputs, 2, at.moments) < 0)
        goto done;
    changes = calloc(sums.count + 1, sizeof(*changes));
    if (!changes) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < sums.count; i++) {
        changes[i].sum = &sums.items[i];
        changes[i].change = (long long)(sums.items[i].bytes[1] - sums.items[i].bytes[0]);
    }
    qsort(changes, sums.count, sizeof(*changes), by_growth);
    int device_count = collect_devices(&inputs[0]->report, &inputs[1]->report, at.moments,
                                       devices);
    status = cli_output_open(output, o.output);
    if (status != CLI_OK)
        goto done;
    if (json)
        write_json(&output->out, paths, inputs, &at, devices, device_count, changes,
                   sums.count, (size_t)o.top, (int)o.frames);
    else
        write_text(&output->out, paths, inputs, &at, devices, device_count, changes,
                   sums.count, (size_t)o.top, (int)o.frames);
    status = cli_output_close(output);
done:
    for (int i = 0; i < loaded; i++)
        report_unload(inputs[i]);
    free(inputs[0]);
    free(inputs[1]);
    free(devices);
    free(output);
    free(changes);
    cli_free_sums(&sums);
    free(paths);
    return status;
}
