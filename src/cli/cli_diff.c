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
    "  --all-frames         hide no frame (start-up, interpreter, frameworks)\n" CLI_EXIT_STATUS;

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

/* What became of a stack from A to B; the text counts them in this order. */
enum stack_status {
    STACK_GREW,
    STACK_NEW,
    STACK_SHRANK,
    STACK_VANISHED,
    STACK_UNCHANGED,
    STACK_STATUSES
};
static const char *const status_names[STACK_STATUSES] = {"grew", "new", "shrank", "vanished",
                                                         "unchanged"};

static enum stack_status status_of(const struct stack_sum *s)
{
    if (s->bytes[0] == 0 && s->bytes[1] > 0)
        return STACK_NEW;
    if (s->bytes[0] > 0 && s->bytes[1] == 0)
        return STACK_VANISHED;
    if (s->bytes[1] > s->bytes[0])
        return STACK_GREW;
    return s->bytes[1] < s->bytes[0] ? STACK_SHRANK : STACK_UNCHANGED;
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

/* The moment the diff compared. */
struct compared {
    int moments[2];      /* each report's (cli_moment_for) */
    int asked, explicit; /* the moment asked for; by --at */
};

/* What a diff found, made by diff_build, written by write_text or
 * write_json, released by diff_free. */
struct diff {
    const char *paths[2]; /* A's and B's files, as given */
    const struct report *reports[2];
    struct compared at;
    struct device_change devices[MAX_DEVICES + 1];
    int device_count;
    struct {
        uint64_t a, b;
    } total;                /* every device's */
    struct stack_sums sums; /* A's and B's bytes per stack key */
    struct change *changes; /* one per sum, the largest growth first */
    size_t count;
    size_t statuses[STACK_STATUSES]; /* stacks per enum stack_status */
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
    return moment == CLI_AT_END    ? "Device memory at end"
           : moment == CLI_AT_PEAK ? "Device memory peak"
                                   : "Device memory live";
}

/* A diff's text: the sides, the device memory, the stacks that changed by
 * growth (the first `top`, 0: all) with `frames` frames each. */
static void write_text(struct out *out, const struct diff *d, size_t top, int frames)
{
    const struct report *a = d->reports[0], *b = d->reports[1];
    const struct compared *at = &d->at;
    char x[24], y[24], z[24];
    out_str(out, "==== cumemtrace diff ====\n");
    describe(out, "A", d->paths[0], a, at->moments[0]);
    describe(out, "B", d->paths[1], b, at->moments[1]);
    out_str(out, moment_note(at, a, b));
    out_printf(out, "  %-20s %10s %10s %11s\n",
               device_heading(at->moments[0] == at->moments[1] ? at->moments[0] : CLI_AT_EXIT), "A",
               "B", "change");
    for (int i = 0; i < d->device_count; i++) {
        const struct device_change *device = &d->devices[i];
        char label[32];
        if (device->slot == COUNTER_NO_DEVICE)
            snprintf(label, sizeof(label), "device unknown");
        else
            snprintf(label, sizeof(label), "device %d", device->slot);
        format_bytes(device->a, x, sizeof(x));
        format_bytes(device->b, y, sizeof(y));
        cli_format_change((long long)(device->b - device->a), z, sizeof(z));
        out_printf(out, "    %-18s %10s %10s %11s\n", label, x, y, z);
    }
    format_bytes(d->total.a, x, sizeof(x));
    format_bytes(d->total.b, y, sizeof(y));
    cli_format_change((long long)(d->total.b - d->total.a), z, sizeof(z));
    out_printf(out, "    %-18s %10s %10s %11s\n", "total", x, y, z);

    out_printf(out,
               "\n  Stacks by growth (%s, A -> B): %zu grew, %zu new, %zu shrank, "
               "%zu vanished, %zu unchanged\n",
               at->moments[0] == at->moments[1] && at->moments[0] == CLI_AT_END
                   ? "bytes held at the end"
               : at->moments[0] == at->moments[1] && at->moments[0] == CLI_AT_PEAK ? "peak bytes"
                                                                                   : "live bytes",
               d->statuses[STACK_GREW], d->statuses[STACK_NEW], d->statuses[STACK_SHRANK],
               d->statuses[STACK_VANISHED], d->statuses[STACK_UNCHANGED]);
    size_t shown = 0;
    for (size_t i = 0; i < d->count && (top == 0 || shown < top); i++) {
        const struct stack_sum *s = d->changes[i].sum;
        const struct report *r = d->reports[s->report];
        if (d->changes[i].change == 0)
            continue;
        format_bytes(s->bytes[0], x, sizeof(x));
        format_bytes(s->bytes[1], y, sizeof(y));
        cli_format_change(d->changes[i].change, z, sizeof(z));
        const char *label = report_stack_label(r, s->stack_id);
        out_printf(out, "   #%zu %s %s%s%s%s: %s -> %s\n", ++shown, z, status_names[status_of(s)],
                   label ? " [" : "", label ? label : "", label ? "]" : "", x, y);
        char site[OUTPUT_PATH_MAX + 1024], escaped[sizeof(site) * 4];
        frames_site_text(r, s->stack_id, site, sizeof(site));
        if (site[0])
            out_printf(out, "      at %s\n", output_text(site, escaped, sizeof(escaped)));
        cli_write_frames(out, r, s->stack_id, frames, "      ");
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
    out_printf(out,
               ",\"pid\":%d,\"duration_s\":%.3f,\"at\":\"%s\",\"bytes\":%llu,"
               "\"live_bytes\":%llu,\"program_end_seen\":%s}",
               r->pid, r->now_ms / 1000.0, cli_moment_names[moment],
               (unsigned long long)cli_bytes_at(r, moment),
               (unsigned long long)cli_bytes_at(r, CLI_AT_EXIT), r->end.ended ? "true" : "false");
}

/* A diff's JSON: the sides, the device memory, the stacks that changed by
 * growth (the first `top`, 0: all) with `frames` frames each. */
static void write_json(struct out *out, const struct diff *d, size_t top, int frames)
{
    out_printf(out, "{\"format\":\"cumemtrace-diff\",\"version\":1,\"at\":\"%s\",\"a\":",
               cli_moment_names[d->at.asked]);
    write_side_json(out, d->paths[0], d->reports[0], d->at.moments[0]);
    out_str(out, ",\"b\":");
    write_side_json(out, d->paths[1], d->reports[1], d->at.moments[1]);
    out_str(out, ",\"devices\":[");
    for (int i = 0; i < d->device_count; i++) {
        const struct device_change *device = &d->devices[i];
        out_str(out, i ? ",{" : "{");
        if (device->slot == COUNTER_NO_DEVICE)
            out_str(out, "\"device\":null");
        else
            out_printf(out, "\"device\":%d", device->slot);
        out_printf(out, ",\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld}",
                   (unsigned long long)device->a, (unsigned long long)device->b,
                   (long long)(device->b - device->a));
    }
    out_printf(out, "],\"total\":{\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld}",
               (unsigned long long)d->total.a, (unsigned long long)d->total.b,
               (long long)(d->total.b - d->total.a));
    out_str(out, ",\"stacks\":[");
    size_t shown = 0;
    for (size_t i = 0; i < d->count && (top == 0 || shown < top); i++) {
        const struct stack_sum *s = d->changes[i].sum;
        const struct report *r = d->reports[s->report];
        if (d->changes[i].change == 0)
            continue;
        out_printf(out,
                   "%s{\"status\":\"%s\",\"a_bytes\":%llu,\"b_bytes\":%llu,\"change\":%lld,"
                   "\"frames\":",
                   shown++ ? "," : "", status_names[status_of(s)], (unsigned long long)s->bytes[0],
                   (unsigned long long)s->bytes[1], d->changes[i].change);
        cli_write_frames_json(out, r, s->stack_id, frames);
        char site[OUTPUT_PATH_MAX + 1024];
        frames_site_text(r, s->stack_id, site, sizeof(site));
        out_str(out, ",\"site\":");
        out_json_string(out, site[0] ? site : NULL);
        out_str(out, ",\"label\":");
        out_json_string(out, report_stack_label(r, s->stack_id));
        out_str(out, "}");
    }
    out_printf(out, "],\"stacks_compared\":%zu,\"stacks_unchanged\":%zu}\n", d->count,
               d->statuses[STACK_UNCHANGED]);
}

/* The diff of two loaded reports, in `d` (which then owns its sums; the
 * reports and the paths stay the caller's): read at `at` ("end", "peak",
 * "exit"; NULL: end when both saw it, else exit), its stacks by growth, its
 * devices. 0, or -1 when it could not be made (said on stderr). */
static int diff_build(struct diff *d, char *const *paths, struct loaded_report *const *inputs,
                      const char *at)
{
    *d = (struct diff){.paths = {paths[0], paths[1]},
                       .reports = {&inputs[0]->report, &inputs[1]->report},
                       .at = {{CLI_AT_EXIT, CLI_AT_EXIT}, CLI_AT_END, at != NULL}};
    if (at)
        d->at.asked = strcmp(at, "end") == 0    ? CLI_AT_END
                      : strcmp(at, "peak") == 0 ? CLI_AT_PEAK
                                                : CLI_AT_EXIT;
    else if (!inputs[0]->report.end.ended || !inputs[1]->report.end.ended)
        d->at.asked = CLI_AT_EXIT;
    for (int i = 0; i < 2; i++)
        d->at.moments[i] = cli_moment_for(d->reports[i], d->at.asked);
    if (cli_sum_stacks(&d->sums, inputs, 2, d->at.moments) < 0)
        return -1;
    d->count = d->sums.count;
    d->changes = calloc(d->count + 1, sizeof(*d->changes));
    if (!d->changes) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < d->count; i++) {
        const struct stack_sum *s = &d->sums.items[i];
        d->changes[i].sum = s;
        d->changes[i].change = (long long)(s->bytes[1] - s->bytes[0]);
        d->statuses[status_of(s)]++;
    }
    qsort(d->changes, d->count, sizeof(*d->changes), by_growth);
    d->device_count = collect_devices(d->reports[0], d->reports[1], d->at.moments, d->devices);
    for (int i = 0; i < d->device_count; i++) {
        d->total.a += d->devices[i].a;
        d->total.b += d->devices[i].b;
    }
    return 0;
}

/* Release what diff_build allocated; `d` may be half built. */
static void diff_free(struct diff *d)
{
    free(d->changes);
    cli_free_sums(&d->sums);
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

    struct loaded_report *inputs[2] = {calloc(1, sizeof(struct loaded_report)),
                                       calloc(1, sizeof(struct loaded_report))};
    struct diff *diff = calloc(1, sizeof(*diff));
    struct cli_output *output = malloc(sizeof(*output));
    int loaded = 0;
    status = CLI_UNREADABLE;
    if (!inputs[0] || !inputs[1] || !diff || !output) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        goto done;
    }
    for (; loaded < 2; loaded++)
        if (cli_load(paths[loaded], &o.report, inputs[loaded]) < 0) {
            loaded++; /* release what it did read */
            goto done;
        }
    if (diff_build(diff, paths, inputs, o.at) < 0)
        goto done;
    status = cli_output_open(output, o.output);
    if (status != CLI_OK)
        goto done;
    if (strcmp(o.format, "json") == 0)
        write_json(&output->out, diff, (size_t)o.top, (int)o.frames);
    else
        write_text(&output->out, diff, (size_t)o.top, (int)o.frames);
    status = cli_output_close(output);
done:
    if (diff)
        diff_free(diff);
    for (int i = 0; i < loaded; i++)
        report_unload(inputs[i]);
    free(inputs[0]);
    free(inputs[1]);
    free(diff);
    free(output);
    free(paths);
    return status;
}
