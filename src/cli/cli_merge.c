/* cli_merge.c - `cumemtrace merge FILES|FOLDERS...`: one view across the
 * ranks of a job, from one report per rank, for jobs of thousands of ranks.
 *
 * The files (a folder: every report in its tree) are surveyed first
 * (merge_job.c): each file's rank, and which file is each rank's reading
 * (its exit report, else its last word: an OOM report or a crash dump).
 * Then the readings are loaded one at a time, folded (merge_fold.c) and
 * freed: memory grows with the ranks by a small record each, not by their
 * reports. A rank whose program's end was seen (a Python program's exit
 * hooks) is read at that end (cli_common.h): the interpreter's teardown
 * that follows frees what globals held. The output leads with the answer:
 * ranks that hit an OOM error or crashed, ranks missing from the world, the
 * ranks that diverge (fold_rule_text) with their hosts and, for each, the
 * stacks where it differs, at the user's line; then the others as a
 * distribution, the ranks (identical rows folded into one), the stacks
 * whose bytes differ most between ranks (their outliers and the
 * distribution of the rest, never every rank), and the growing sites.
 * Frames are read again, at the end, from the report that held most of
 * each stack shown (FRAME_CACHE of them at once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "merge_fold.h"
#include "merge_html_js.h"
#include "merge_job.h"
#include "report_html_css.h"

#define FRAME_CACHE 4
#define ANSWER_RANKS 4  /* divergent ranks told in full in the text */
#define ANSWER_STACKS 3 /* stacks told for each */
#define LISTED 8        /* ranks named in one line before "and N more" */

const char merge_usage[] =
    "usage: cumemtrace merge FILES|FOLDERS... [--format text|json|html] [-o PATH]\n"
    "       [--top N] [--frames N] [--all-frames]\n"
    "\n"
    "One view across the ranks of a job, from one report per rank (JSON reports\n"
    "or crash dumps; a folder: every report in its tree). First the answer: the\n"
    "ranks that hit an out-of-memory error or crashed, the ranks of the world\n"
    "that left no exit report, and the ranks that diverge (device memory more\n"
    "than 4 spreads above the median of the other ranks', a spread being 1.4826\n"
    "times their median absolute deviation, at least a twentieth of their\n"
    "median and 256 KiB; and at least 1 MiB above), each with its host and the\n"
    "stacks where it differs, at the program's own line; the other ranks as a\n"
    "distribution. Then the ranks (identical ones in one row), the stacks whose\n"
    "bytes differ most between ranks with their outlier ranks and the\n"
    "distribution of the rest, and the sites that grow, on how many ranks. Reports\n"
    "are read one at a time: memory grows little with the ranks. A rank whose\n"
    "program's end was seen (a Python program's exit hooks) is read at that end,\n"
    "before the interpreter's teardown freed what globals held; others at exit.\n"
    "Ranks come from each report's process.rank (RANK), a dump's from the report\n"
    "of the same pid or its name's number; from the order of the files when a\n"
    "report has none, or two exit reports claim one.\n"
    "  --format text|json|html   what to write (default text; html: one self-contained page)\n"
    "  -o, --output PATH    write to PATH instead of stdout (replaced if it exists)\n"
    "  --top N              stacks and growing sites listed (default 10; 0: all)\n"
    "  --frames N           frames shown per stack in the text (default 6)\n"
    "  --all-frames         hide no frame (start-up, interpreter, frameworks)\n" CLI_EXIT_STATUS;

struct merge {
    struct job job;
    struct fold fold;
    const struct report_options *options;
    size_t top;
    int frames;
    uint32_t hosts_used; /* distinct hosts */
    int world_size;      /* the largest the reports state; -1: none does */
    int world_sizes_differ;
    int *missing; /* ranks of the world with no file at all */
    size_t missing_count;
    int *no_exit; /* ranks of the world with no exit report */
    size_t no_exit_count;
    int *beyond; /* ranks the reports name at or past the world size */
    size_t beyond_count;
    uint32_t *divergent; /* fold ranks above the others, the most first */
    uint32_t divergent_count;
    uint32_t *shown; /* fold stacks listed, in order */
    size_t shown_count;
    uint32_t *growing; /* fold stacks that grow somewhere, the most ranks first */
    size_t growing_count;
    /* reports read again for their frames */
    struct loaded_report *cache[FRAME_CACHE];
    int cache_file[FRAME_CACHE];
    unsigned long cache_used[FRAME_CACHE], clock;
};

/* ---- the job's shape ---- */

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* The world size, the ranks that left nothing and those that left no exit
 * report. */
static int job_shape(struct merge *m)
{
    m->world_size = -1;
    for (size_t i = 0; i < m->job.count; i++) {
        int w = m->job.files[i].world_size;
        if (w > 0 && m->world_size > 0 && w != m->world_size)
            m->world_sizes_differ = 1;
        if (w > m->world_size)
            m->world_size = w;
    }
    if (m->job.from_order || m->world_size <= 0)
        return 0;
    int *kinds = malloc((size_t)m->world_size * sizeof(int));
    m->missing = calloc((size_t)m->world_size + 1, sizeof(int));
    m->no_exit = calloc((size_t)m->world_size + 1, sizeof(int));
    m->beyond = calloc(m->job.count + 1, sizeof(int));
    if (!kinds || !m->missing || !m->no_exit || !m->beyond) {
        free(kinds);
        return -1;
    }
    for (int r = 0; r < m->world_size; r++)
        kinds[r] = -1;
    for (size_t i = 0; i < m->job.count; i++) {
        const struct job_file *f = &m->job.files[i];
        if (f->rank >= 0 && f->rank < m->world_size &&
            (kinds[f->rank] < 0 || f->kind < kinds[f->rank]))
            kinds[f->rank] = f->kind;
        if (f->rank >= m->world_size && f->reading)
            m->beyond[m->beyond_count++] = f->rank;
    }
    qsort(m->beyond, m->beyond_count, sizeof(int), by_int);
    for (int r = 0; r < m->world_size; r++) {
        if (kinds[r] < 0)
            m->missing[m->missing_count++] = r;
        if (kinds[r] != JOB_EXIT)
            m->no_exit[m->no_exit_count++] = r;
    }
    free(kinds);
    return 0;
}

/* ---- reports read again for their frames ---- */

/* The report a stack's frames are read from (the one that held most of it),
 * or NULL after a line on stderr (gone, or no longer the same). */
static const struct report *frames_of(struct merge *m, const struct fold_stack *s)
{
    int file = m->fold.ranks[s->source].file;
    int slot = 0;
    for (int i = 0; i < FRAME_CACHE; i++) {
        if (m->cache[i] && m->cache_file[i] == file) {
            m->cache_used[i] = ++m->clock;
            return &m->cache[i]->report;
        }
        if (!m->cache[i] || (m->cache[slot] && m->cache_used[i] < m->cache_used[slot]))
            slot = i;
    }
    if (m->cache[slot]) {
        report_unload(m->cache[slot]);
        free(m->cache[slot]);
        m->cache[slot] = NULL;
    }
    struct loaded_report *loaded = calloc(1, sizeof(*loaded));
    if (!loaded)
        return NULL;
    if (cli_load_summary(m->job.files[file].path, m->options, loaded) < 0) {
        report_unload(loaded);
        free(loaded);
        return NULL;
    }
    m->cache[slot] = loaded;
    m->cache_file[slot] = file;
    m->cache_used[slot] = ++m->clock;
    const struct report *r = &loaded->report;
    char *key = cli_stack_key(r, s->stack_id);
    int same = key && strcmp(key, s->key) == 0;
    free(key);
    if (!same) {
        fprintf(stderr, "cumemtrace: '%s' changed while it was merged: its frames are not shown\n",
                m->job.files[file].path);
        return NULL;
    }
    return r;
}

static void write_frames_text(struct out *out, struct merge *m, const struct fold_stack *s)
{
    const struct report *r = frames_of(m, s);
    if (r)
        cli_write_frames(out, r, s->stack_id, m->frames, "      ");
    else
        out_printf(out, "      %s   <- site\n", s->site);
}

static void write_frames_json(struct out *out, struct merge *m, const struct fold_stack *s)
{
    const struct report *r = frames_of(m, s);
    if (r)
        cli_write_frames_json(out, r, s->stack_id, m->frames);
    else
        out_str(out, "[]");
}

/* ---- words ---- */

static const char *host_of(const struct merge *m, const struct fold_rank *k)
{
    return m->fold.hosts.names[k->host];
}

static const char *path_of(const struct merge *m, const struct fold_rank *k)
{
    return m->job.files[k->file].path;
}

/* "ranks 0-3, 7, 9-12": `count` ints (sorted), at most LISTED runs, then
 * "and N more". */
static void write_rank_list(struct out *out, const int *ranks, size_t count)
{
    size_t runs = 0, i = 0;
    while (i < count) {
        size_t j = i;
        while (j + 1 < count && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (runs == LISTED) {
            out_printf(out, " and %zu more", count - i);
            return;
        }
        out_printf(out, "%s%d", runs ? ", " : "", ranks[i]);
        if (j > i)
            out_printf(out, "-%d", ranks[j]);
        runs++;
        i = j + 1;
    }
}

static const char *moments_text(const struct fold *f)
{
    uint32_t ends = 0;
    for (uint32_t i = 0; i < f->rank_count; i++)
        ends += f->ranks[i].moment == CLI_AT_END;
    if (ends == f->rank_count)
        return "every rank at its program's end (Python's exit hooks), before the "
               "interpreter's teardown freed what globals held";
    if (ends == 0)
        return "every rank live at its report (the program's end was not seen: not a Python "
               "program, or a report written while it ran)";
    return "ranks whose program's end was seen at that end, the others live at their report";
}

/* The ranks whose files say `kind` (their reading, or another file). */
static size_t ranks_of_kind(const struct merge *m, int kind, int *ranks)
{
    size_t n = 0;
    for (size_t i = 0; i < m->job.count; i++) {
        const struct job_file *f = &m->job.files[i];
        if (f->kind == kind && (n == 0 || ranks[n - 1] != f->rank))
            ranks[n++] = f->rank;
    }
    qsort(ranks, n, sizeof(int), by_int);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (kept == 0 || ranks[kept - 1] != ranks[i])
            ranks[kept++] = ranks[i];
    return kept;
}

/* The file of `kind` that rank `rank` left (its first). */
static const char *file_of_kind(const struct merge *m, int rank, int kind)
{
    for (size_t i = 0; i < m->job.count; i++)
        if (m->job.files[i].rank == rank && m->job.files[i].kind == kind)
            return m->job.files[i].path;
    return NULL;
}

static const struct fold_rank *rank_numbered(const struct merge *m, int number)
{
    for (uint32_t i = 0; i < m->fold.rank_count; i++)
        if (m->fold.ranks[i].number == number)
            return &m->fold.ranks[i];
    return NULL;
}

/* "  OOM: rank 12 on node-1 (local rank 4), its OOM report FILE" or, for
 * several, "  OOM: 2 ranks, 12, 40 (its OOM report: in the table below)". */
static void write_kind_line(struct out *out, const struct merge *m, int kind, const char *title,
                            const char *what, int *scratch)
{
    size_t n = ranks_of_kind(m, kind, scratch);
    if (n == 0)
        return;
    if (n == 1) {
        const struct fold_rank *k = rank_numbered(m, scratch[0]);
        out_printf(out, "  %s: rank %d", title, scratch[0]);
        if (k)
            out_printf(out, " on %s", host_of(m, k));
        if (k && k->local_rank >= 0)
            out_printf(out, " (local rank %d)", k->local_rank);
        out_printf(out, ", %s %s\n", what, file_of_kind(m, scratch[0], kind));
        return;
    }
    out_printf(out, "  %s: %zu ranks, ", title, n);
    write_rank_list(out, scratch, n);
    out_printf(out, " (%s: in the table below)\n", what);
}

/* ---- the text ---- */

static void write_distribution(struct out *out, uint32_t count, double median, double mad)
{
    char centre[24], spread[24];
    format_bytes((uint64_t)(median + 0.5), centre, sizeof(centre));
    out_printf(out, "%u rank%s %s", count, count == 1 ? "" : "s", centre);
    if (mad >= 0.5) {
        format_bytes((uint64_t)(mad + 0.5), spread, sizeof(spread));
        out_printf(out, " ± %s", spread);
    }
}

/* `rank` at stack `st` as one of its outliers: its bytes and who holds
 * them there; NULL if it is none. */
static const struct fold_pick *outlier_of(const struct fold_stack *st, uint32_t rank)
{
    for (uint32_t o = 0; o < st->outlier_count; o++)
        if (st->outliers[o].rank == rank)
            return &st->outliers[o];
    return NULL;
}

/* Up to `limit` of the shown-or-not stacks where fold rank `rank` is an
 * outlier above the others, the most first: their indexes in `out`. */
static size_t stacks_of_rank(const struct fold *f, uint32_t rank, uint32_t *found, size_t limit)
{
    size_t n = 0;
    for (uint32_t i = 0; i < f->keys.count && n < limit; i++) {
        const struct fold_stack *s = &f->stacks[f->order[i]];
        for (uint32_t k = 0; k < s->outlier_count; k++)
            if (s->outliers[k].rank == rank && (double)s->outliers[k].bytes > s->usual_median)
                found[n++] = f->order[i];
    }
    return n;
}

/* The divergent ranks past the first ANSWER_RANKS, by host: "and 12 more
 * divergent ranks: node-009 (76-79), node-010 (80-87)", LISTED hosts at most. */
static void write_more_divergent(struct out *out, const struct merge *m)
{
    const struct fold *f = &m->fold;
    uint32_t more = m->divergent_count - ANSWER_RANKS;
    int *numbers = calloc((size_t)more + 1, sizeof(int));
    char *done = calloc((size_t)more + 1, 1);
    out_printf(out, "  and %u more divergent rank%s", more, more == 1 ? "" : "s");
    uint32_t hosts = 0;
    for (uint32_t i = 0; numbers && done && i < more; i++) {
        if (done[i])
            continue;
        uint32_t host = f->ranks[m->divergent[ANSWER_RANKS + i]].host;
        size_t n = 0;
        for (uint32_t j = i; j < more; j++)
            if (!done[j] && f->ranks[m->divergent[ANSWER_RANKS + j]].host == host) {
                done[j] = 1;
                numbers[n++] = f->ranks[m->divergent[ANSWER_RANKS + j]].number;
            }
        if (hosts++ == LISTED) {
            out_str(out, ", ...");
            break;
        }
        qsort(numbers, n, sizeof(int), by_int);
        out_printf(out, "%s %s (", hosts == 1 ? ":" : ",", m->fold.hosts.names[host]);
        write_rank_list(out, numbers, n);
        out_str(out, ")");
    }
    out_str(out, "\n");
    free(numbers);
    free(done);
}

static void write_answer_text(struct out *out, struct merge *m)
{
    const struct fold *f = &m->fold;
    int *scratch = calloc(m->job.count + 1, sizeof(int));
    if (scratch) {
        write_kind_line(out, m, JOB_OOM, "OOM", "its OOM report", scratch);
        write_kind_line(out, m, JOB_CRASH, "crashed", "its crash dump", scratch);
        free(scratch);
    }
    if (m->no_exit_count) {
        out_str(out, "  missing: rank");
        out_str(out, m->no_exit_count == 1 ? " " : "s ");
        write_rank_list(out, m->no_exit, m->no_exit_count);
        out_printf(out, " of the world of %d left no exit report", m->world_size);
        if (m->missing_count) {
            out_str(out, m->missing_count == 1 ? "; rank " : "; ranks ");
            write_rank_list(out, m->missing, m->missing_count);
            out_str(out, " left no report at all");
        }
        out_str(out, "\n");
    }
    if (m->world_sizes_differ)
        out_printf(out, "  world size: the reports do not agree (up to %d)\n", m->world_size);
    if (m->beyond_count) {
        out_printf(out, "  world size %d, yet the reports name rank%s ", m->world_size,
                   m->beyond_count == 1 ? "" : "s");
        write_rank_list(out, m->beyond, m->beyond_count);
        out_str(out, "\n");
    }
    char live[24], centre[24], bytes[24];
    for (uint32_t i = 0; i < m->divergent_count && i < ANSWER_RANKS; i++) {
        const struct fold_rank *k = &f->ranks[m->divergent[i]];
        format_bytes(k->live, live, sizeof(live));
        format_bytes((uint64_t)(k->centre + 0.5), centre, sizeof(centre));
        out_printf(out, "  Divergent rank: %d on %s", k->number, host_of(m, k));
        if (k->local_rank >= 0)
            out_printf(out, " (local rank %d)", k->local_rank);
        out_printf(out, " holds %s %s, the median of the other ranks %s\n", live,
                   k->moment == CLI_AT_END ? "at its program's end" : "live", centre);
        uint32_t found[ANSWER_STACKS];
        size_t n = stacks_of_rank(f, m->divergent[i], found, ANSWER_STACKS);
        for (size_t s = 0; s < n; s++) {
            const struct fold_stack *st = &f->stacks[found[s]];
            const struct fold_pick *here = outlier_of(st, m->divergent[i]);
            format_bytes(here->bytes, bytes, sizeof(bytes));
            format_bytes((uint64_t)(st->usual_median + 0.5), centre, sizeof(centre));
            out_printf(out, "    %s here, %s on the others: %s%s%s%s", bytes, centre, st->site,
                       st->label ? " [" : "", st->label ? st->label : "", st->label ? "]" : "");
            char holder[4 * (REPORT_CLASS_TEXT + 64)];
            if (here->holder)
                out_printf(out, " — held by %s", output_text(here->holder, holder, sizeof(holder)));
            out_str(out, "\n");
        }
    }
    if (m->divergent_count > ANSWER_RANKS)
        write_more_divergent(out, m);
    if (m->divergent_count == 0)
        out_printf(out, "  No rank diverges%s\n",
                   f->rank_count < 2 ? " (one rank: nothing to compare)" : "");
    char least[24], most[24];
    format_bytes(f->usual_min, least, sizeof(least));
    format_bytes(f->usual_max, most, sizeof(most));
    out_str(out, m->divergent_count ? "  The others: " : "  The ranks: ");
    write_distribution(out, f->usual_count, f->usual_median, f->usual_mad);
    if (f->usual_count > 1)
        out_printf(out, " (median ± median absolute deviation; least %s, most %s)", least, most);
    uint32_t low = 0;
    for (uint32_t i = 0; i < f->rank_count; i++)
        low += f->ranks[i].verdict == FOLD_LOW;
    if (low)
        out_printf(out, "; %u hold%s much less", low, low == 1 ? "s" : "");
    out_str(out, "\n");
    out_printf(out, "  rule: %s\n", fold_rule_text);
}

/* A rank's row of the table in words: its moment, reason, verdict,
 * devices and figures as shown. Ranks whose rows read the same are one
 * row; sorted by it, they are found together in n log n, not by comparing
 * each row with every rank. */
struct row {
    char text[160];
    uint32_t rank; /* index into fold.ranks */
};

static void row_of(const struct fold_rank *k, uint32_t rank, struct row *row)
{
    char live[24], peak[24], leaked[24] = "";
    format_bytes(k->live, live, sizeof(live));
    format_bytes(k->peak, peak, sizeof(peak));
    if (k->has_leaked)
        format_bytes(k->leaked, leaked, sizeof(leaked));
    snprintf(row->text, sizeof(row->text), "%d %d %d %llx %s|%s|%s|%s", k->moment, k->verdict,
             k->has_leaked, (unsigned long long)k->devices, k->reason, live, peak, leaked);
    row->rank = rank;
}

static int by_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int order = strcmp(x->text, y->text);
    return order ? order : x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void device_list(uint64_t devices, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int d = 0; d < 64 && used + 8 < size; d++)
        if (devices & (1ull << d))
            used += (size_t)snprintf(text + used, size - used, "%s%d", used ? "," : "", d);
    if (!used)
        snprintf(text, size, "-");
}

static void write_ranks_text(struct out *out, struct merge *m)
{
    const struct fold *f = &m->fold;
    int *numbers = calloc((size_t)f->rank_count + 1, sizeof(int));
    struct row *rows = calloc((size_t)f->rank_count + 1, sizeof(*rows));
    uint32_t *start = calloc((size_t)f->rank_count + 1, sizeof(*start));
    char *on_host = calloc((size_t)f->hosts.count + 1, 1);
    if (!numbers || !rows || !start || !on_host) {
        free(numbers);
        free(rows);
        free(start);
        free(on_host);
        return;
    }
    out_printf(out,
               "\n  Ranks (identical ones in one row):\n  %-14s %-18s %-8s %-8s %10s %10s "
               "%10s  %s\n",
               "rank", "host", "devices", "at", "memory", "peak", "leaked", "file");
    for (uint32_t i = 0; i < f->rank_count; i++)
        row_of(&f->ranks[i], i, &rows[i]);
    qsort(rows, f->rank_count, sizeof(*rows), by_row);
    for (uint32_t t = 0; t < f->rank_count; t++) /* each rank: where its row's ranks start */
        start[rows[t].rank] =
            t > 0 && strcmp(rows[t - 1].text, rows[t].text) == 0 ? start[rows[t - 1].rank] : t;
    for (uint32_t i = 0; i < f->rank_count; i++) {
        uint32_t first = start[i];
        if (rows[first].rank != i)
            continue; /* written in the row of the first rank like it */
        const struct fold_rank *k = &f->ranks[i];
        size_t n = 0, hosts = 0;
        for (uint32_t t = first; t < f->rank_count && start[rows[t].rank] == first; t++) {
            const struct fold_rank *like = &f->ranks[rows[t].rank];
            numbers[n++] = like->number;
            hosts += !on_host[like->host]++;
        }
        for (uint32_t t = first; t < first + n; t++)
            on_host[f->ranks[rows[t].rank].host] = 0;
        char who[64], where[64], live[24], peak[24], leaked[24], devices[64];
        if (n == 1)
            snprintf(who, sizeof(who), "%d", k->number);
        else
            snprintf(who, sizeof(who), "%zu ranks", n);
        if (hosts == 1)
            snprintf(where, sizeof(where), "%s", host_of(m, k));
        else
            snprintf(where, sizeof(where), "%zu hosts", hosts);
        format_bytes(k->live, live, sizeof(live));
        format_bytes(k->peak, peak, sizeof(peak));
        if (k->has_leaked)
            format_bytes(k->leaked, leaked, sizeof(leaked));
        else
            snprintf(leaked, sizeof(leaked), "-");
        device_list(k->devices, devices, sizeof(devices));
        out_printf(out, "  %-14s %-18s %-8s %-8s %10s %10s %10s  ", who, where, devices,
                   k->moment == CLI_AT_END ? "end" : k->reason, live, peak, leaked);
        if (n == 1) {
            out_printf(out, "%s", path_of(m, k));
        } else {
            out_str(out, "ranks ");
            write_rank_list(out, numbers, n);
        }
        out_str(out, k->verdict == FOLD_HIGH  ? "  <- diverges\n"
                     : k->verdict == FOLD_LOW ? "  <- much less\n"
                                              : "\n");
    }
    out_str(out, "  (memory and peak: device memory, summed over the rank's devices, memory at "
                 "the moment in \"at\"; leaked: live at exit and not held at the program's end, "
                 "every kind)\n");
    free(numbers);
    free(rows);
    free(start);
    free(on_host);
}

/* "3 ranks 20.0 MiB; rank 1 80.0 MiB": the distribution of the usual
 * ranks, then each outlier. */
static void write_stack_line(struct out *out, const struct merge *m, const struct fold_stack *s)
{
    uint32_t usual = m->fold.rank_count - s->outlier_count;
    char bytes[24];
    if (usual)
        write_distribution(out, usual, s->usual_median, s->usual_mad);
    for (uint32_t i = 0; i < s->outlier_count; i++) {
        format_bytes(s->outliers[i].bytes, bytes, sizeof(bytes));
        out_printf(out, "%s rank %d %s", usual || i ? ";" : "",
                   m->fold.ranks[s->outliers[i].rank].number, bytes);
    }
}

static void write_stacks_text(struct out *out, struct merge *m)
{
    out_str(out, "\n  Stacks by how much their bytes differ between ranks, then by bytes "
                 "(the usual ranks' median ± deviation; the outlier ranks):\n");
    for (size_t i = 0; i < m->shown_count; i++) {
        const struct fold_stack *s = &m->fold.stacks[m->shown[i]];
        char total[24], spread[24];
        format_bytes(s->sum, total, sizeof(total));
        format_bytes(s->spread, spread, sizeof(spread));
        out_printf(out, "   #%zu ", i + 1);
        write_stack_line(out, m, s);
        out_printf(out, " (%s between ranks, %s in all)", spread, total);
        if (s->label)
            out_printf(out, " [%s]", s->label);
        out_str(out, "\n");
        write_frames_text(out, m, s);
    }
    if (m->shown_count == 0)
        out_str(out, "   no stack holds memory\n");
}

static void write_growth_pick(struct out *out, const struct merge *m, const struct fold_stack *s,
                              const struct fold_growth *g)
{
    char rate[24], call[24], now[24];
    format_bytes(growth_rate_bytes(g->rate), rate, sizeof(rate));
    format_bytes(growth_rate_bytes(g->call_rate), call, sizeof(call));
    format_bytes(g->bytes, now, sizeof(now));
    out_printf(out, "rank %d ", m->fold.ranks[g->rank].number);
    if (!s->per_mark && growth_rate_bytes(g->call_rate)) /* a report of an earlier version: none */
        out_printf(out, "+%s a call, ", call);
    out_printf(out, "+%s per %s, %s %s", rate, s->per_mark ? "mark" : "second", now,
               g->ended ? "when the program ended" : "now");
}

static void write_growing_text(struct out *out, struct merge *m)
{
    out_str(out, "\n  Growing (leak suspects), by site: on how many ranks, the fastest:\n");
    for (size_t i = 0; i < m->growing_count; i++) {
        const struct fold_stack *s = &m->fold.stacks[m->growing[i]];
        out_printf(out, "   on %u rank%s: ", s->growing_ranks, s->growing_ranks == 1 ? "" : "s");
        for (uint32_t k = 0; k < s->fastest_count && k < 3; k++) {
            out_str(out, k ? "; " : "");
            write_growth_pick(out, m, s, &s->fastest[k]);
        }
        if (s->growing_ranks > 3)
            out_printf(out, "; and %u more", s->growing_ranks - 3);
        out_str(out, "\n");
        write_frames_text(out, m, s);
    }
    if (m->growing_count == 0)
        out_str(out, "   none\n");
    int unknown[LISTED + 1];
    size_t n = 0, all = 0;
    for (uint32_t i = 0; i < m->fold.rank_count; i++)
        if (!m->fold.ranks[i].has_growth) {
            if (n < LISTED)
                unknown[n++] = m->fold.ranks[i].number;
            all++;
        }
    if (all) {
        out_str(out, "   not known for rank");
        out_str(out, all == 1 ? " " : "s ");
        write_rank_list(out, unknown, n);
        if (all > n)
            out_printf(out, " and %zu more", all - n);
        out_str(out, " (crash dumps)\n");
    }
}

static void write_text(struct out *out, struct merge *m)
{
    const struct fold *f = &m->fold;
    out_printf(out, "==== cumemtrace merge: %u rank%s on %u host%s ====\n", f->rank_count,
               f->rank_count == 1 ? "" : "s", m->hosts_used, m->hosts_used == 1 ? "" : "s");
    if (m->job.from_order)
        out_str(out, "  ranks numbered by the order of the files (a report names no rank, or "
                     "two name the same)\n");
    write_answer_text(out, m);
    out_printf(out, "  read at: %s\n", moments_text(f));
    if (m->job.skipped)
        out_printf(out, "  %zu file%s in the folders not a report, left out\n", m->job.skipped,
                   m->job.skipped == 1 ? "" : "s");
    write_ranks_text(out, m);
    write_stacks_text(out, m);
    write_growing_text(out, m);
    out_str(out, "==== end of cumemtrace merge ====\n");
}

/* ---- JSON and HTML ---- */

/* --format html: the JSON view inside one self-contained page, drawn by
 * src/merge_html.js, in the HTML report's style. Every '<' of the JSON is
 * written as \u003c, so no "</script>" in a path or a name can end it. */
static void write_page_start(struct out *out)
{
    out_str(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<title>cumemtrace merge</title>\n<style>\n");
    out_str(out, report_html_css);
    out_str(
        out,
        ".bar { display: inline-block; width: 160px; height: 10px; background: #eceff1; "
        "margin-left: 6px; vertical-align: middle; }\n"
        ".bar span { display: block; height: 100%; }\n"
        ".histogram { display: flex; align-items: flex-end; height: 90px; gap: 1px; "
        "border-bottom: 1px solid #90a4ae; }\n"
        ".histogram div { background: #1e88e5; min-width: 6px; flex: 1; }\n"
        ".histogram div.outlier { background: #c62828; }\n"
        ".heat { display: grid; gap: 1px; font-size: 10px; }\n"
        ".heat span { min-width: 10px; height: 12px; }\n"
        ".heat span.missing { background: repeating-linear-gradient(45deg, #eee, #eee 2px, #ccc 2px, #ccc 4px); }\n"
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

static void write_int_list(struct out *out, const int *values, size_t count)
{
    out_str(out, "[");
    for (size_t i = 0; i < count; i++)
        out_printf(out, "%s%d", i ? "," : "", values[i]);
    out_str(out, "]");
}

static void write_growth_json(struct out *out, const struct merge *m, const struct fold_stack *s)
{
    out_printf(out, "{\"ranks\":%u,\"per\":\"%s\",\"fastest\":[", s->growing_ranks,
               s->per_mark ? "mark" : "second");
    for (uint32_t k = 0; k < s->fastest_count; k++)
        out_printf(out,
                   "%s{\"rank\":%d,\"rate\":%.0f,\"calls\":%llu,\"rate_per_call\":%.0f,"
                   "\"bytes\":%llu,\"ended\":%s}",
                   k ? "," : "", m->fold.ranks[s->fastest[k].rank].number, s->fastest[k].rate,
                   (unsigned long long)s->fastest[k].calls, s->fastest[k].call_rate,
                   (unsigned long long)s->fastest[k].bytes, s->fastest[k].ended ? "true" : "false");
    out_str(out, "]}");
}

static void write_stack_json(struct out *out, struct merge *m, const struct fold_stack *s)
{
    const struct fold *f = &m->fold;
    out_printf(out,
               "{\"total_bytes\":%llu,\"spread_bytes\":%llu,\"ranks_holding\":%u,"
               "\"min_bytes\":%llu,\"max_bytes\":%llu,\"median_bytes\":%.0f,"
               "\"mad_bytes\":%.0f,\"usual\":{\"ranks\":%u,\"median_bytes\":%.0f,"
               "\"mad_bytes\":%.0f},\"outliers\":[",
               (unsigned long long)s->sum, (unsigned long long)s->spread, s->present,
               (unsigned long long)(s->present == f->rank_count ? s->min : 0),
               (unsigned long long)s->max, s->median, s->mad, f->rank_count - s->outlier_count,
               s->usual_median, s->usual_mad);
    for (uint32_t i = 0; i < s->outlier_count; i++) {
        out_printf(out, "%s{\"rank\":%d,\"bytes\":%llu,\"held_by\":", i ? "," : "",
                   f->ranks[s->outliers[i].rank].number, (unsigned long long)s->outliers[i].bytes);
        out_json_string(out, s->outliers[i].holder);
        out_str(out, "}");
    }
    out_str(out, "],\"bytes_by_rank\":");
    if (s->by_rank) {
        out_str(out, "[");
        for (uint32_t k = 0; k < f->rank_count; k++)
            out_printf(out, "%s%llu", k ? "," : "", (unsigned long long)s->by_rank[k]);
        out_str(out, "]");
    } else {
        out_str(out, "null");
    }
    out_str(out, ",\"label\":");
    out_json_string(out, s->label);
    out_str(out, ",\"site\":");
    out_json_string(out, s->site);
    out_str(out, ",\"growing\":");
    if (s->growing_ranks)
        write_growth_json(out, m, s);
    else
        out_str(out, "null");
    out_str(out, ",\"frames\":");
    write_frames_json(out, m, s);
    out_str(out, "}");
}

static void write_files_of_kind(struct out *out, const struct merge *m, const char *name, int kind)
{
    out_printf(out, ",\"%s\":[", name);
    int first = 1;
    for (size_t i = 0; i < m->job.count; i++) {
        const struct job_file *f = &m->job.files[i];
        if (f->kind != kind)
            continue;
        out_printf(out, "%s{\"rank\":%d,\"file\":", first ? "" : ",", f->rank);
        out_json_string(out, f->path);
        out_str(out, "}");
        first = 0;
    }
    out_str(out, "]");
}

static void write_json(struct out *out, struct merge *m)
{
    const struct fold *f = &m->fold;
    out_printf(out,
               "{\"format\":\"cumemtrace-merge\",\"version\":2,\"ranks_from\":\"%s\","
               "\"world_size\":",
               m->job.from_order ? "file_order" : "reports");
    if (m->world_size > 0)
        out_printf(out, "%d", m->world_size);
    else
        out_str(out, "null");
    out_printf(out, ",\"world_sizes_differ\":%s,\"missing_ranks\":",
               m->world_sizes_differ ? "true" : "false");
    write_int_list(out, m->missing, m->missing_count);
    out_str(out, ",\"no_exit_report\":");
    write_int_list(out, m->no_exit, m->no_exit_count);
    out_str(out, ",\"ranks_beyond_world\":");
    write_int_list(out, m->beyond, m->beyond_count);
    write_files_of_kind(out, m, "oom_reports", JOB_OOM);
    write_files_of_kind(out, m, "crash_dumps", JOB_CRASH);
    out_printf(out, ",\"skipped_files\":%zu,\"ranks\":[", m->job.skipped);
    for (uint32_t i = 0; i < f->rank_count; i++) {
        const struct fold_rank *k = &f->ranks[i];
        out_printf(out, "%s{\"rank\":%d,\"file\":", i ? "," : "", k->number);
        out_json_string(out, path_of(m, k));
        out_str(out, ",\"host\":");
        out_json_string(out, host_of(m, k));
        out_printf(out, ",\"local_rank\":");
        if (k->local_rank >= 0)
            out_printf(out, "%d", k->local_rank);
        else
            out_str(out, "null");
        out_printf(out, ",\"pid\":%d,\"reason\":", k->pid);
        out_json_string(out, k->reason);
        if (k->world_size >= 0)
            out_printf(out, ",\"world_size\":%d", k->world_size);
        else
            out_str(out, ",\"world_size\":null");
        out_str(out, ",\"devices\":[");
        for (int d = 0, first = 1; d < 64; d++)
            if (k->devices & (1ull << d)) {
                out_printf(out, "%s%d", first ? "" : ",", d);
                first = 0;
            }
        out_printf(out, "],\"at\":\"%s\",\"live_bytes\":%llu,\"peak_bytes\":%llu,",
                   cli_moment_names[k->moment], (unsigned long long)k->live,
                   (unsigned long long)k->peak);
        if (k->has_leaked)
            out_printf(out, "\"leaked_bytes\":%llu", (unsigned long long)k->leaked);
        else
            out_str(out, "\"leaked_bytes\":null");
        if (k->has_growth)
            out_printf(out, ",\"growing_sites\":%u", k->growing);
        else
            out_str(out, ",\"growing_sites\":null");
        out_printf(out, ",\"verdict\":\"%s\"}",
                   k->verdict == FOLD_HIGH  ? "diverges"
                   : k->verdict == FOLD_LOW ? "much_less"
                                            : "usual");
    }
    out_str(out, "],\"divergent\":");
    if (m->divergent_count) {
        const struct fold_rank *k = &f->ranks[m->divergent[0]];
        out_printf(out, "{\"rank\":%d,\"live_bytes\":%llu,\"median_of_others\":%.0f}", k->number,
                   (unsigned long long)k->live, k->centre);
    } else {
        out_str(out, "null");
    }
    out_str(out, ",\"divergent_ranks\":[");
    for (uint32_t i = 0; i < m->divergent_count; i++) {
        const struct fold_rank *k = &f->ranks[m->divergent[i]];
        out_printf(out, "%s{\"rank\":%d,\"host\":", i ? "," : "", k->number);
        out_json_string(out, host_of(m, k));
        out_printf(out, ",\"local_rank\":");
        if (k->local_rank >= 0)
            out_printf(out, "%d", k->local_rank);
        else
            out_str(out, "null");
        out_printf(out, ",\"live_bytes\":%llu,\"median_of_others\":%.0f,\"stacks\":[",
                   (unsigned long long)k->live, k->centre);
        uint32_t found[ANSWER_STACKS];
        size_t n = stacks_of_rank(f, m->divergent[i], found, ANSWER_STACKS);
        for (size_t s = 0; s < n; s++) {
            const struct fold_stack *st = &f->stacks[found[s]];
            const struct fold_pick *here = outlier_of(st, m->divergent[i]);
            long listed = -1;
            for (size_t j = 0; j < m->shown_count && listed < 0; j++)
                if (m->shown[j] == found[s])
                    listed = (long)j;
            out_printf(out, "%s{\"bytes\":%llu,\"usual_bytes\":%.0f,\"stack\":", s ? "," : "",
                       (unsigned long long)here->bytes, st->usual_median);
            if (listed >= 0)
                out_printf(out, "%ld", listed);
            else
                out_str(out, "null");
            out_str(out, ",\"site\":");
            out_json_string(out, st->site);
            out_str(out, ",\"label\":");
            out_json_string(out, st->label);
            out_str(out, ",\"held_by\":");
            out_json_string(out, here->holder);
            out_str(out, "}");
        }
        out_str(out, "]}");
    }
    out_printf(out,
               "],\"distribution\":{\"ranks\":%u,\"median_bytes\":%.0f,\"mad_bytes\":%.0f,"
               "\"min_bytes\":%llu,\"max_bytes\":%llu},\"rule\":",
               f->usual_count, f->usual_median, f->usual_mad, (unsigned long long)f->usual_min,
               (unsigned long long)f->usual_max);
    out_json_string(out, fold_rule_text);
    out_str(out, ",\"stacks\":[");
    for (size_t i = 0; i < m->shown_count; i++) {
        out_str(out, i ? "," : "");
        write_stack_json(out, m, &f->stacks[m->shown[i]]);
    }
    out_str(out, "],\"growing\":[");
    for (size_t i = 0; i < m->growing_count; i++) {
        const struct fold_stack *s = &f->stacks[m->growing[i]];
        out_str(out, i ? ",{\"label\":" : "{\"label\":");
        out_json_string(out, s->label);
        out_str(out, ",\"site\":");
        out_json_string(out, s->site);
        out_str(out, ",\"growth\":");
        write_growth_json(out, m, s);
        out_str(out, ",\"frames\":");
        write_frames_json(out, m, s);
        out_str(out, "}");
    }
    out_str(out, "]}\n");
}

/* ---- the command ---- */

static int by_excess(const void *a, const void *b, void *fold)
{
    const struct fold_rank *ranks = ((const struct fold *)fold)->ranks;
    const struct fold_rank *x = &ranks[*(const uint32_t *)a], *y = &ranks[*(const uint32_t *)b];
    double dx = (double)x->live - x->centre, dy = (double)y->live - y->centre;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return x->number < y->number ? -1 : x->number > y->number;
}

static int by_growth(const void *a, const void *b, void *fold)
{
    const struct fold_stack *stacks = ((const struct fold *)fold)->stacks;
    const struct fold_stack *x = &stacks[*(const uint32_t *)a], *y = &stacks[*(const uint32_t *)b];
    if (x->growing_ranks != y->growing_ranks)
        return x->growing_ranks > y->growing_ranks ? -1 : 1;
    double rx = x->fastest_count ? x->fastest[0].rate : 0,
           ry = y->fastest_count ? y->fastest[0].rate : 0;
    if (rx != ry)
        return rx > ry ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* What the answer lists: divergent ranks, stacks shown, growing sites. */
static int choose(struct merge *m)
{
    struct fold *f = &m->fold;
    m->divergent = calloc((size_t)f->rank_count + 1, sizeof(uint32_t));
    m->shown = calloc((size_t)f->keys.count + 1, sizeof(uint32_t));
    m->growing = calloc((size_t)f->keys.count + 1, sizeof(uint32_t));
    char *hosts = calloc((size_t)f->hosts.count + 1, 1);
    if (!m->divergent || !m->shown || !m->growing || !hosts) {
        free(hosts);
        return -1;
    }
    for (uint32_t i = 0; i < f->rank_count; i++) {
        if (f->ranks[i].verdict == FOLD_HIGH)
            m->divergent[m->divergent_count++] = i;
        if (!hosts[f->ranks[i].host]++)
            m->hosts_used++;
    }
    free(hosts);
    qsort_r(m->divergent, m->divergent_count, sizeof(uint32_t), by_excess, f);
    for (uint32_t i = 0; i < f->keys.count && (m->top == 0 || m->shown_count < m->top); i++)
        if (f->stacks[f->order[i]].sum)
            m->shown[m->shown_count++] = f->order[i];
    for (uint32_t i = 0; i < f->keys.count; i++)
        if (f->stacks[i].growing_ranks)
            m->growing[m->growing_count++] = i;
    qsort_r(m->growing, m->growing_count, sizeof(uint32_t), by_growth, f);
    if (m->top && m->growing_count > m->top)
        m->growing_count = m->top;
    return 0;
}

static int by_reading_rank(const void *a, const void *b)
{
    const struct job_file *x = *(struct job_file *const *)a, *y = *(struct job_file *const *)b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Load and fold each rank's reading, in rank order. CLI_OK, or
 * CLI_UNREADABLE after a line on stderr. */
static int fold_readings(struct merge *m)
{
    size_t count = 0;
    struct job_file **readings = calloc(m->job.count + 1, sizeof(*readings));
    struct loaded_report *loaded = calloc(1, sizeof(*loaded));
    if (!readings || !loaded) {
        free(readings);
        free(loaded);
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    for (size_t i = 0; i < m->job.count; i++)
        if (m->job.files[i].reading)
            readings[count++] = &m->job.files[i];
    qsort(readings, count, sizeof(*readings), by_reading_rank);
    int status = fold_init(&m->fold, (uint32_t)count) < 0 ? -1 : 0;
    for (size_t i = 0; i < count && status == 0; i++) {
        if (cli_load_summary(readings[i]->path, m->options, loaded) < 0) {
            report_unload(loaded);
            free(readings);
            free(loaded);
            return CLI_UNREADABLE;
        }
        status = fold_add(&m->fold, &loaded->report, readings[i]->rank,
                          (int)(readings[i] - m->job.files));
        report_unload(loaded);
    }
    free(readings);
    free(loaded);
    if (status == 0)
        status = fold_finish(&m->fold);
    if (status < 0) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    return CLI_OK;
}

static void merge_free(struct merge *m)
{
    for (int i = 0; i < FRAME_CACHE; i++)
        if (m->cache[i]) {
            report_unload(m->cache[i]);
            free(m->cache[i]);
        }
    free(m->missing);
    free(m->no_exit);
    free(m->beyond);
    free(m->divergent);
    free(m->shown);
    free(m->growing);
    fold_free(&m->fold);
    job_free(&m->job);
}

/* The job of the files and folders `o` names, surveyed, its readings
 * folded and the answer chosen, into `m`. CLI_OK, or CLI_UNREADABLE after a
 * line on stderr. */
static int merge_read(struct merge *m, const struct compare_options *o)
{
    m->options = &o->report;
    m->top = (size_t)o->top;
    m->frames = (int)o->frames;
    for (int i = 0; i < o->file_count; i++)
        if (job_add(&m->job, o->files[i]) < 0)
            return CLI_UNREADABLE;
    if (job_survey(&m->job) < 0 || job_shape(m) < 0) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    if (m->job.count == 0) {
        fprintf(stderr, "cumemtrace: no report in %s%s\n", o->files[0],
                o->file_count > 1 ? " and the other folders" : "");
        return CLI_UNREADABLE;
    }
    int status = fold_readings(m);
    if (status == CLI_OK && choose(m) < 0) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        status = CLI_UNREADABLE;
    }
    return status;
}

/* `m` written as `format` says (text, json, html) to `path` (NULL:
 * stdout). CLI_OK, or the output's failure. */
static int merge_write(struct merge *m, const char *format, const char *path)
{
    struct cli_output *output = malloc(sizeof(*output));
    if (!output) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return CLI_UNREADABLE;
    }
    int status = cli_output_open(output, path);
    if (status != CLI_OK) {
        free(output);
        return status;
    }
    int json = strcmp(format, "json") == 0, html = strcmp(format, "html") == 0;
    if (html)
        write_page_start(&output->out);
    if (json || html)
        write_json(&output->out, m);
    if (html)
        write_page_end(&output->out);
    if (!json && !html)
        write_text(&output->out, m);
    status = cli_output_close(output);
    free(output);
    return status;
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
    struct merge *m = status == CLI_OK && !o.help ? calloc(1, sizeof(*m)) : NULL;
    if (status == CLI_OK && !o.help && !m) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        status = CLI_UNREADABLE;
    }
    if (m)
        status = merge_read(m, &o);
    if (m && status == CLI_OK)
        status = merge_write(m, o.format, o.output);
    if (m)
        merge_free(m);
    free(m);
    free(paths);
    return status;
}
