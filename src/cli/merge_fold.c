/* merge_fold.c - a job's ranks folded one report at a time (see merge_fold.h).
 *
 * A report is folded in two steps: its stacks' bytes are added up by key
 * into each stack's `pending` (one key may be several stacks of the report:
 * the same frames at other addresses), then each stack it touched takes its
 * total as this rank's value. A rank whose report lacks a stack is seen at
 * the next rank that has it, or at fold_finish, through `next_rank`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "merge_fold.h"

#define MIB (1024.0 * 1024.0)
#define SPREAD_FLOOR (256.0 * 1024.0)
#define DISTANCE_FLOOR MIB
/* Of the ranks' totals, these many distinct values at each end are measured
 * against the others, one left out; those between against every rank (one
 * more or less moves neither the median nor the MAD of so many). */
#define EDGE_VALUES 32

const char fold_rule_text[] =
    "a rank diverges when its device memory lies more than 4 spreads above the median of the "
    "other ranks' (a spread: 1.4826 times their median absolute deviation, at least a twentieth "
    "of their median and 256 KiB) and at least 1 MiB above it; the same rule names a stack's "
    "outlier ranks, on either side with three ranks or more";

int fold_rule(double value, double median, double mad, uint64_t count)
{
    if (count == 0)
        return FOLD_USUAL; /* nothing to differ from */
    double spread = 1.4826 * mad;
    if (spread < median / 20)
        spread = median / 20;
    if (spread < SPREAD_FLOOR)
        spread = SPREAD_FLOOR;
    double distance = value - median;
    if (distance > FOLD_SPREADS * spread && distance >= DISTANCE_FLOOR)
        return FOLD_HIGH;
    if (count >= 2 && -distance > FOLD_SPREADS * spread && -distance >= DISTANCE_FLOOR)
        return FOLD_LOW;
    return FOLD_USUAL;
}

/* ---- names ---- */

static uint64_t hash_of(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int names_grow(struct fold_names *n)
{
    uint32_t slot_count = n->slot_count ? n->slot_count * 2 : 256;
    uint32_t *slots = calloc(slot_count, sizeof(*slots));
    if (!slots)
        return -1;
    for (uint32_t i = 0; i < n->count; i++) {
        uint32_t at = (uint32_t)n->hashes[i] & (slot_count - 1);
        while (slots[at])
            at = (at + 1) & (slot_count - 1);
        slots[at] = i + 1;
    }
    free(n->slots);
    n->slots = slots;
    n->slot_count = slot_count;
    return 0;
}

/* The index of `name`; added when new (*added set): `owned`, a malloc'ed
 * copy of it that then belongs to the set, or a copy made here (`owned`
 * NULL). `owned` is freed when not kept. -1 when out of memory. */
static long names_intern(struct fold_names *n, const char *name, char *owned, int *added)
{
    *added = 0;
    if ((n->count + 1) * 2 > n->slot_count && names_grow(n) < 0)
        goto out_of_memory;
    uint64_t h = hash_of(name);
    uint32_t at = (uint32_t)h & (n->slot_count - 1);
    for (; n->slots[at]; at = (at + 1) & (n->slot_count - 1)) {
        uint32_t i = n->slots[at] - 1;
        if (n->hashes[i] == h && strcmp(n->names[i], name) == 0) {
            free(owned);
            return i;
        }
    }
    if (n->count == n->capacity) {
        uint32_t capacity = n->capacity ? n->capacity * 2 : 64;
        char **names = realloc(n->names, capacity * sizeof(*names));
        if (names)
            n->names = names;
        uint64_t *hashes = names ? realloc(n->hashes, capacity * sizeof(*hashes)) : NULL;
        if (!hashes)
            goto out_of_memory;
        n->hashes = hashes;
        n->capacity = capacity;
    }
    char *stored = owned ? owned : strdup(name);
    if (!stored)
        goto out_of_memory;
    n->names[n->count] = stored;
    n->hashes[n->count] = h;
    n->slots[at] = n->count + 1;
    *added = 1;
    return n->count++;
out_of_memory:
    free(owned);
    return -1;
}

static void names_free(struct fold_names *n)
{
    for (uint32_t i = 0; i < n->count; i++)
        free(n->names[i]);
    free(n->names);
    free(n->hashes);
    free(n->slots);
    memset(n, 0, sizeof(*n));
}

/* ---- a stack's values ---- */

/* Add one rank's value to the sketch: its pair's count, or a new pair; past
 * FOLD_VALUES pairs, the two closest become one at their weighted mean. */
static int sketch_add(struct fold_stack *s, double value)
{
    uint32_t low = 0, high = s->value_count;
    while (low < high) {
        uint32_t mid = (low + high) / 2;
        if (s->values[mid].value < value)
            low = mid + 1;
        else
            high = mid;
    }
    if (low < s->value_count && s->values[low].value == value) {
        s->values[low].count++;
        return 0;
    }
    if (s->value_count == s->value_capacity) {
        uint32_t capacity = s->value_capacity ? s->value_capacity * 4 : 4;
        if (capacity > FOLD_VALUES + 1)
            capacity = FOLD_VALUES + 1;
        struct fold_value *bigger = realloc(s->values, capacity * sizeof(*bigger));
        if (!bigger)
            return -1;
        s->values = bigger;
        s->value_capacity = capacity;
    }
    memmove(&s->values[low + 1], &s->values[low], (s->value_count - low) * sizeof(*s->values));
    s->values[low] = (struct fold_value){value, 1};
    if (++s->value_count <= FOLD_VALUES)
        return 0;
    uint32_t closest = 0;
    for (uint32_t i = 1; i + 1 < s->value_count; i++)
        if (s->values[i + 1].value - s->values[i].value <
            s->values[closest + 1].value - s->values[closest].value)
            closest = i;
    struct fold_value *a = &s->values[closest], *b = a + 1;
    double count = (double)a->count + (double)b->count;
    a->value = a->value * ((double)a->count / count) + b->value * ((double)b->count / count);
    a->count += b->count;
    memmove(b, b + 1, (s->value_count - closest - 2) * sizeof(*b));
    s->value_count--;
    return 0;
}

/* Keep `pick` among the FOLD_KEEP most (high) or least of a list sorted
 * that way; the earlier rank stays ahead on a tie. The list owns the
 * holders of its picks: the one that falls off, or `pick`'s when it is not
 * kept, is freed. */
static void keep_pick(struct fold_pick *list, uint32_t *count, struct fold_pick pick, int high)
{
    uint32_t at = *count;
    while (at > 0 && (high ? list[at - 1].bytes < pick.bytes : list[at - 1].bytes > pick.bytes))
        at--;
    if (at == FOLD_KEEP) {
        free(pick.holder);
        return;
    }
    uint32_t n = *count < FOLD_KEEP ? *count : FOLD_KEEP - 1;
    if (*count == FOLD_KEEP)
        free(list[FOLD_KEEP - 1].holder);
    memmove(&list[at + 1], &list[at], (n - at) * sizeof(*list));
    list[at] = pick;
    if (*count < FOLD_KEEP)
        (*count)++;
}

/* Ranks before `upto` that the stack has not seen lack it. */
static void count_absent(struct fold_stack *s, uint32_t upto)
{
    for (uint32_t rank = s->next_rank; rank < upto; rank++) {
        if (s->absent_count < FOLD_KEEP)
            s->absent[s->absent_count] = rank;
        s->absent_count++;
    }
    if (s->next_rank < upto)
        s->next_rank = upto;
}

/* The stack's total in the report just folded, as rank `rank`'s value. */
static int take_value(struct fold_stack *s, uint32_t rank)
{
    uint64_t bytes = s->pending;
    const struct report_holder_path *holder = s->pending_holder;
    s->pending = 0;
    s->pending_holder = NULL;
    s->touched = 0;
    if (bytes == 0)
        return 0; /* held nothing: counted as lacking it */
    count_absent(s, rank);
    s->next_rank = rank + 1;
    s->present++;
    s->sum += bytes;
    s->min = s->present == 1 || bytes < s->min ? bytes : s->min;
    s->max = bytes > s->max ? bytes : s->max;
    if (s->by_rank)
        s->by_rank[rank] = bytes;
    char text[REPORT_CLASS_TEXT + 64];
    if (holder)
        report_holder_text(holder, text, sizeof(text));
    struct fold_pick pick = {rank, bytes, holder ? strdup(text) : NULL};
    if (holder && !pick.holder)
        return -1;
    keep_pick(s->high, &s->high_count, pick, 1);
    keep_pick(s->low, &s->low_count, (struct fold_pick){rank, bytes, NULL}, 0);
    return sketch_add(s, (double)bytes);
}

/* The stack of `r`'s `stack_id` in the fold: its index, or -1. */
static long stack_of(struct fold *f, const struct report *r, uint32_t stack_id, uint32_t rank)
{
    if (f->keys.count == f->stack_capacity) {
        /* Room first: a key in the set always has its stack. */
        uint32_t capacity = f->stack_capacity ? f->stack_capacity * 2 : 64;
        struct fold_stack *bigger = realloc(f->stacks, capacity * sizeof(*bigger));
        if (!bigger)
            return -1;
        f->stacks = bigger;
        f->stack_capacity = capacity;
    }
    char *key = cli_stack_key(r, stack_id);
    if (!key)
        return -1;
    int added;
    long index = names_intern(&f->keys, key, key, &added);
    if (index < 0 || !added)
        return index;
    struct fold_stack *s = &f->stacks[index];
    memset(s, 0, sizeof(*s));
    s->key = f->keys.names[index];
    s->label = report_stack_label(r, stack_id);
    s->source = rank;
    s->stack_id = stack_id;
    char site[1024];
    cli_stack_site(r, stack_id, site, sizeof(site));
    s->site = strdup(site);
    if (f->expected <= FOLD_BY_RANK)
        s->by_rank = calloc(f->expected + 1, sizeof(uint64_t));
    if (!s->site || (f->expected <= FOLD_BY_RANK && !s->by_rank))
        return -1;
    return index;
}

static void fold_growth(const struct report *r, struct fold_stack *s, uint32_t rank,
                        const struct stack *grown)
{
    struct fold_growth g = {rank,
                            growth_rate(&grown->growth, &r->growth),
                            growth_call_rate(&grown->growth),
                            grown->growth.calls,
                            report_growth_bytes(r, grown),
                            r->growth.ended};
    s->growing_ranks++;
    s->per_mark = r->growth.mode == GROWTH_MARKS;
    uint32_t at = s->fastest_count;
    while (at > 0 && s->fastest[at - 1].rate < g.rate)
        at--;
    if (at == FOLD_KEEP)
        return;
    uint32_t n = s->fastest_count < FOLD_KEEP ? s->fastest_count : FOLD_KEEP - 1;
    memmove(&s->fastest[at + 1], &s->fastest[at], (n - at) * sizeof(*s->fastest));
    s->fastest[at] = g;
    if (s->fastest_count < FOLD_KEEP)
        s->fastest_count++;
}

int fold_init(struct fold *f, uint32_t expected)
{
    memset(f, 0, sizeof(*f));
    f->expected = expected;
    f->ranks = calloc((size_t)expected + 1, sizeof(*f->ranks));
    return f->ranks ? 0 : -1;
}

static int touch(struct fold *f, long index)
{
    struct fold_stack *s = &f->stacks[index];
    if (s->touched)
        return 0;
    if ((f->touched_count & (f->touched_count - 1)) == 0 || f->touched_count == 0) {
        uint32_t capacity = f->touched_count ? f->touched_count * 2 : 64;
        uint32_t *bigger = realloc(f->touched, capacity * sizeof(*bigger));
        if (!bigger)
            return -1;
        f->touched = bigger;
    }
    s->touched = 1;
    f->touched[f->touched_count++] = (uint32_t)index;
    return 0;
}

int fold_add(struct fold *f, const struct report *r, int number, int file)
{
    if (f->rank_count == f->expected)
        return -1;
    uint32_t rank = f->rank_count;
    struct fold_rank *k = &f->ranks[rank];
    memset(k, 0, sizeof(*k));
    k->number = number;
    k->file = file;
    k->local_rank = r->local_rank;
    k->world_size = r->world_size;
    k->pid = r->pid;
    int added;
    long host = names_intern(&f->hosts, r->hostname[0] ? r->hostname : "?", NULL, &added);
    if (host < 0)
        return -1;
    k->host = (uint32_t)host;
    k->moment = cli_moment_for(r, CLI_AT_END);
    snprintf(k->reason, sizeof(k->reason), "%s", r->reason ? r->reason : "?");
    for (int d = 0; d < r->device_count; d++)
        if (r->devices[d].slot != COUNTER_NO_DEVICE)
            k->devices |= 1ull << r->devices[d].slot;
    k->live = cli_bytes_at(r, k->moment);
    k->peak = cli_bytes_at(r, CLI_AT_PEAK);
    k->has_leaked = r->reason && strcmp(r->reason, "exit") == 0;
    for (size_t g = 0; g < r->group_count; g++)
        if (!(r->end.ended && r->groups[g].held_at_end))
            k->leaked += r->groups[g].bytes;
    k->has_growth = r->has_growth;
    k->growing = r->has_growth ? r->growing_count : 0;
    f->rank_count++;

    size_t listed = cli_moment_stacks(r, k->moment);
    for (size_t i = 0; i < listed; i++) {
        uint64_t bytes;
        uint32_t id = cli_moment_stack(r, k->moment, i, &bytes);
        /* A cache's segments hold its blocks, counted by their own stacks. */
        if (id == 0 || id > r->stack_count || report_cache_segment(r, id))
            continue;
        long index = stack_of(f, r, id, rank);
        if (index < 0 || touch(f, index) < 0)
            return -1;
        struct fold_stack *s = &f->stacks[index];
        s->pending += bytes;
        /* One key may be several of the report's stacks: the holder of the
         * most bytes speaks for them. */
        const struct report_holder_path *holder = report_holder_of(r, id);
        if (holder && (!s->pending_holder || holder->bytes > s->pending_holder->bytes))
            s->pending_holder = holder;
        if (bytes > s->most_in_source) {
            s->most_in_source = bytes;
            s->source = rank;
            s->stack_id = id;
        }
    }
    for (uint32_t i = 0; r->has_growth && i < r->growing_count; i++) {
        uint32_t id = r->growing[i];
        if (id == 0 || id > r->stack_count)
            continue;
        long index = stack_of(f, r, id, rank);
        if (index < 0)
            return -1;
        fold_growth(r, &f->stacks[index], rank, &r->stacks[id - 1]);
    }
    int status = 0;
    for (uint32_t i = 0; i < f->touched_count; i++)
        if (take_value(&f->stacks[f->touched[i]], rank) < 0)
            status = -1;
    f->touched_count = 0;
    return status;
}

/* ---- the statistics ---- */

static int by_value(const void *a, const void *b)
{
    double x = ((const struct fold_value *)a)->value, y = ((const struct fold_value *)b)->value;
    return x < y ? -1 : x > y;
}

/* The value at 0-based position `at` of the multiset (sorted pairs). */
static double value_at(const struct fold_value *v, size_t n, uint64_t at)
{
    for (size_t i = 0; i < n; i++) {
        if (at < v[i].count)
            return v[i].value;
        at -= v[i].count;
    }
    return n ? v[n - 1].value : 0;
}

static double median_of(const struct fold_value *v, size_t n, uint64_t total)
{
    if (total == 0)
        return 0;
    return (value_at(v, n, (total - 1) / 2) + value_at(v, n, total / 2)) / 2;
}

/* Median and MAD of the pairs `v` (sorted by value), with `zeros` more
 * zeros, and an occurrence of each of `skip` (skip_count values) left out:
 * that of the pair nearest to it. `scratch` has room for n + 1 pairs.
 * Returns how many values that leaves. */
static uint64_t robust(const struct fold_value *v, size_t n, uint64_t zeros, const double *skip,
                       size_t skip_count, struct fold_value *scratch, double *median, double *mad)
{
    size_t m = 0;
    scratch[m++] = (struct fold_value){0, zeros};
    for (size_t i = 0; i < n; i++)
        scratch[m++] = v[i];
    for (size_t k = 0; k < skip_count; k++) {
        size_t best = m;
        for (size_t i = 0; i < m; i++)
            if (scratch[i].count && (best == m || fabs(scratch[i].value - skip[k]) <
                                                      fabs(scratch[best].value - skip[k])))
                best = i;
        if (best < m)
            scratch[best].count--;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < m; i++)
        total += scratch[i].count;
    *median = median_of(scratch, m, total);
    for (size_t i = 0; i < m; i++)
        scratch[i].value = fabs(scratch[i].value - *median);
    qsort(scratch, m, sizeof(*scratch), by_value);
    *mad = median_of(scratch, m, total);
    return total;
}

static int add_outlier(struct fold_stack *s, uint32_t rank, uint64_t bytes, char *holder)
{
    for (uint32_t i = 0; i < s->outlier_count; i++)
        if (s->outliers[i].rank == rank)
            return 0;
    if (s->outlier_count == sizeof(s->outliers) / sizeof(s->outliers[0]))
        return 0;
    s->outliers[s->outlier_count++] = (struct fold_pick){rank, bytes, holder};
    return 1;
}

/* A stack's median, MAD, outliers (each measured against the others), and
 * the distribution of the rest. */
static void finish_stack(struct fold *f, struct fold_stack *s, struct fold_value *scratch)
{
    count_absent(s, f->rank_count);
    uint64_t zeros = f->rank_count - s->present;
    robust(s->values, s->value_count, zeros, NULL, 0, scratch, &s->median, &s->mad);
    s->spread = s->max - (zeros ? 0 : s->min);
    double skipped[3 * FOLD_KEEP];
    struct fold_pick candidates[3 * FOLD_KEEP];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->high_count; i++)
        candidates[n++] = s->high[i];
    for (uint32_t i = 0; i < s->absent_count && i < FOLD_KEEP; i++)
        candidates[n++] = (struct fold_pick){s->absent[i], 0, NULL};
    for (uint32_t i = 0; i < s->low_count; i++)
        candidates[n++] = s->low[i];
    int verdicts[3 * FOLD_KEEP];
    for (uint32_t i = 0; i < n; i++) {
        double x = (double)candidates[i].bytes, median, mad;
        uint64_t others = robust(s->values, s->value_count, zeros, &x, 1, scratch, &median, &mad);
        verdicts[i] = fold_rule(x, median, mad, others);
    }
    for (int side = FOLD_HIGH; side >= FOLD_LOW; side -= 2)
        for (uint32_t i = 0; i < n; i++)
            if (verdicts[i] == side)
                add_outlier(s, candidates[i].rank, candidates[i].bytes, candidates[i].holder);
    for (uint32_t i = 0; i < s->outlier_count; i++)
        skipped[i] = (double)s->outliers[i].bytes;
    robust(s->values, s->value_count, zeros, skipped, s->outlier_count, scratch, &s->usual_median,
           &s->usual_mad);
    for (uint32_t i = 0; i < s->outlier_count; i++)
        s->excess += (uint64_t)fabs((double)s->outliers[i].bytes - s->usual_median);
}

static int by_difference(const void *a, const void *b, void *stacks)
{
    const struct fold_stack *x = (const struct fold_stack *)stacks + *(const uint32_t *)a;
    const struct fold_stack *y = (const struct fold_stack *)stacks + *(const uint32_t *)b;
    if (x->spread != y->spread)
        return x->spread > y->spread ? -1 : 1;
    if (x->sum != y->sum)
        return x->sum > y->sum ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* The ranks' live bytes: medians and verdicts, each rank against the others. */
static int finish_ranks(struct fold *f)
{
    struct fold_value *values = calloc((size_t)f->rank_count + 2, sizeof(*values));
    struct fold_value *scratch = calloc((size_t)f->rank_count + 2, sizeof(*scratch));
    if (!values || !scratch) {
        free(values);
        free(scratch);
        return -1;
    }
    for (uint32_t i = 0; i < f->rank_count; i++)
        values[i] = (struct fold_value){(double)f->ranks[i].live, 1};
    qsort(values, f->rank_count, sizeof(*values), by_value);
    size_t n = 0;
    for (uint32_t i = 0; i < f->rank_count; i++) {
        if (n && values[n - 1].value == values[i].value)
            values[n - 1].count++;
        else
            values[n++] = values[i];
    }
    robust(values, n, 0, NULL, 0, scratch, &f->median, &f->mad);
    double *skipped = calloc((size_t)f->rank_count + 1, sizeof(double));
    if (!skipped) {
        free(values);
        free(scratch);
        return -1;
    }
    uint32_t usual = 0, unusual = 0;
    for (uint32_t i = 0; i < f->rank_count; i++) {
        struct fold_rank *k = &f->ranks[i];
        double x = (double)k->live, median = f->median, mad = f->mad;
        size_t low = 0, high = n;
        while (low < high) {
            size_t mid = (low + high) / 2;
            if (values[mid].value < x)
                low = mid + 1;
            else
                high = mid;
        }
        uint64_t others = f->rank_count - 1;
        if (low < EDGE_VALUES || low + EDGE_VALUES >= n)
            others = robust(values, n, 0, &x, 1, scratch, &median, &mad);
        k->centre = median;
        k->verdict = fold_rule(x, median, mad, others);
        if (k->verdict == FOLD_USUAL) {
            f->usual_min = usual == 0 || k->live < f->usual_min ? k->live : f->usual_min;
            f->usual_max = k->live > f->usual_max ? k->live : f->usual_max;
            usual++;
        } else {
            skipped[unusual++] = x;
        }
    }
    f->usual_count = usual;
    robust(values, n, 0, skipped, unusual, scratch, &f->usual_median, &f->usual_mad);
    free(skipped);
    free(values);
    free(scratch);
    return 0;
}

int fold_finish(struct fold *f)
{
    struct fold_value *scratch = calloc(FOLD_VALUES + 2, sizeof(*scratch));
    f->order = calloc((size_t)f->keys.count + 1, sizeof(*f->order));
    if (!scratch || !f->order || finish_ranks(f) < 0) {
        free(scratch);
        return -1;
    }
    for (uint32_t i = 0; i < f->keys.count; i++) {
        finish_stack(f, &f->stacks[i], scratch);
        f->order[i] = i;
    }
    free(scratch);
    qsort_r(f->order, f->keys.count, sizeof(*f->order), by_difference, f->stacks);
    return 0;
}

void fold_free(struct fold *f)
{
    for (uint32_t i = 0; f->stacks && i < f->keys.count; i++) {
        for (uint32_t k = 0; k < f->stacks[i].high_count; k++)
            free(f->stacks[i].high[k].holder);
        free(f->stacks[i].site);
        free(f->stacks[i].values);
        free(f->stacks[i].by_rank);
    }
    free(f->stacks);
    names_free(&f->keys);
    names_free(&f->hosts);
    free(f->ranks);
    free(f->touched);
    free(f->order);
    memset(f, 0, sizeof(*f));
}
