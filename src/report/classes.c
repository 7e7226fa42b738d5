/* classes.c - what PyTorch's live tensors are, and who holds them, in a
 * report (see report.h).
 *
 * A reading made for the report (torch_figures.h) lists the tensors the
 * program's modules and optimizers hold, by address. Each is matched to the
 * recorded tensor block that contains it; a block is counted once, in the
 * first class that claims it (a parameter before a gradient before
 * optimizer state: a flat buffer shared by several tensors is one block).
 * The tensor blocks no one claimed are the rest, counted by the stack that
 * allocated them. Figures are the blocks' recorded bytes (the requested
 * sizes), so they add up to the cache's own view.
 *
 * The same reading's retention walk names who holds them: each block under
 * the first path from Python's roots that reached a tensor in it, summed by
 * the stack that allocated it and the path's pattern (report_holders). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "kinds.h"
#include "report.h"

static const char *const class_names[REPORT_CLASSES] = {
    [CLASS_PARAMETERS] = "parameters",
    [CLASS_GRADIENTS] = "gradients",
    [CLASS_OPTIMIZER_STATE] = "optimizer_state",
    [CLASS_REST] = "rest",
};

const char *report_class_name(int report_class)
{
    return report_class >= 0 && report_class < REPORT_CLASSES ? class_names[report_class] : "rest";
}

void report_classes_unknown(struct report_classes *classes, const char *why)
{
    memset(classes, 0, sizeof(*classes));
    snprintf(classes->why, sizeof(classes->why), "%s", why ? why : "not read");
    snprintf(classes->held_by.why, sizeof(classes->held_by.why), "%s", why ? why : "not read");
}

struct tensor_block {
    uint64_t start, size;
    uint32_t stack_id, owner;
    int tensor_class; /* TENSOR_CLASSES: not claimed */
};

static int by_start(const void *a, const void *b)
{
    const struct tensor_block *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int by_stack(const void *a, const void *b)
{
    const struct tensor_block *x = a, *y = b;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The block holding `address`, among `count` sorted by start; NULL if none. */
static struct tensor_block *containing(struct tensor_block *blocks, size_t count, uint64_t address)
{
    size_t below = report_ranges_below(blocks, count, sizeof(*blocks),
                                       offsetof(struct tensor_block, start), address);
    struct tensor_block *b = below ? &blocks[below - 1] : NULL;
    return b && address < b->start + (b->size ? b->size : 1) ? b : NULL;
}

/* The rest by stack: the REPORT_CLASS_SITES largest, from blocks sorted by stack. */
static void rest_sites(struct report_classes *k, const struct tensor_block *blocks, size_t count)
{
    for (size_t i = 0; i < count;) {
        struct report_class_site site = {blocks[i].stack_id, 0, 0};
        for (; i < count && blocks[i].stack_id == site.stack_id; i++) {
            if (blocks[i].tensor_class != TENSOR_CLASSES)
                continue;
            site.bytes += blocks[i].size;
            site.blocks++;
        }
        if (!site.blocks)
            continue;
        int at = k->site_count;
        while (at > 0 && k->sites[at - 1].bytes < site.bytes)
            at--;
        if (at == REPORT_CLASS_SITES)
            continue;
        int last = k->site_count < REPORT_CLASS_SITES ? k->site_count : REPORT_CLASS_SITES - 1;
        memmove(&k->sites[at + 1], &k->sites[at], (size_t)(last - at) * sizeof(site));
        k->sites[at] = site;
        if (k->site_count < REPORT_CLASS_SITES)
            k->site_count++;
    }
}

/* The parameters holding the most (as themselves, gradients and state). */
static void holders(struct report_classes *k, const struct torch_classes *c,
                    const struct tensor_block *blocks, size_t count)
{
    size_t bytes = (size_t)c->name_count * sizeof(uint64_t) * CLASS_REST;
    uint64_t *held = bytes ? pages_alloc(bytes) : NULL;
    if (!held)
        return;
    for (size_t i = 0; i < count; i++)
        if (blocks[i].tensor_class != TENSOR_CLASSES)
            held[(size_t)blocks[i].owner * CLASS_REST + blocks[i].tensor_class] += blocks[i].size;
    for (uint32_t n = 0; n < c->name_count; n++) {
        const uint64_t *h = &held[(size_t)n * CLASS_REST];
        uint64_t total = h[0] + h[1] + h[2];
        if (!total)
            continue;
        int at = k->holder_count;
        while (at > 0) {
            const uint64_t *o = k->holders[at - 1].bytes;
            if (o[0] + o[1] + o[2] >= total)
                break;
            at--;
        }
        if (at == REPORT_CLASS_HOLDERS)
            continue;
        int last =
            k->holder_count < REPORT_CLASS_HOLDERS ? k->holder_count : REPORT_CLASS_HOLDERS - 1;
        memmove(&k->holders[at + 1], &k->holders[at], (size_t)(last - at) * sizeof(k->holders[0]));
        struct report_class_holder *holder = &k->holders[at];
        snprintf(holder->name, sizeof(holder->name), "%s", c->names[n]);
        memcpy(holder->bytes, h, sizeof(holder->bytes));
        if (k->holder_count < REPORT_CLASS_HOLDERS)
            k->holder_count++;
    }
    pages_free(held, bytes);
}

/* A recorded tensor block and what held it first, for the holders. */
struct held_block {
    uint64_t start, size;
    uint32_t stack_id, path; /* UINT32_MAX: no path reached it */
    uint64_t tensors;
    int kind;
};

/* A stack's blocks under one path. */
struct held_run {
    uint32_t stack_id, path;
    uint64_t tensors, blocks, bytes;
    int kind;
};

static int held_by_start(const void *a, const void *b)
{
    const struct held_block *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int held_by_stack_path(const void *a, const void *b)
{
    const struct held_block *x = a, *y = b;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return x->path < y->path ? -1 : x->path > y->path;
}

static int runs_by_bytes(const void *a, const void *b)
{
    const struct held_run *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The runs of blocks sorted by stack and path, most bytes first, into
 * k->paths: REPORT_HOLDER_PER_STACK at most per stack. */
static void keep_runs(struct report_holders *k, const struct torch_holders *h,
                      struct held_run *runs, size_t run_count)
{
    qsort(runs, run_count, sizeof(*runs), runs_by_bytes);
    for (size_t i = 0; i < run_count && k->count < REPORT_HOLDER_PATHS; i++) {
        int same = 0;
        for (int j = 0; j < k->count; j++)
            same += k->paths[j].stack_id == runs[i].stack_id;
        if (same >= REPORT_HOLDER_PER_STACK)
            continue;
        struct report_holder_path *p = &k->paths[k->count++];
        p->stack_id = runs[i].stack_id;
        snprintf(p->path, sizeof(p->path), "%s", h->paths[runs[i].path]);
        snprintf(p->container, sizeof(p->container), "%s", h->containers[runs[i].path]);
        p->kind = runs[i].kind;
        p->tensors = runs[i].tensors;
        p->blocks = runs[i].blocks;
        p->bytes = runs[i].bytes;
    }
}

/* The blocks a framework's array owns: PyTorch's tensors, CuPy's, JAX's. */
static int held_kind(int kind)
{
    return kind == KIND_TORCH_TENSOR || kind == KIND_CUPY_BLOCK || kind == KIND_JAX_ARRAY;
}

/* r->classes.held_by from the walk `h` (or why there is none). */
static void report_holders(struct report *r, const struct torch_holders *h, const char *why)
{
    struct report_holders *k = &r->classes.held_by;
    memset(k, 0, sizeof(*k));
    if (!h || h->why) {
        snprintf(k->why, sizeof(k->why), "%s", h ? h->why : why ? why : "not walked");
        return;
    }
    size_t count = 0;
    for (size_t i = 0; i < r->block_count; i++)
        count += held_kind(r->blocks[i].kind);
    size_t bytes = (count ? count : 1) * (sizeof(struct held_block) + sizeof(struct held_run));
    struct held_block *blocks = pages_alloc(bytes);
    if (!blocks) {
        snprintf(k->why, sizeof(k->why), "out of memory in the tracer");
        return;
    }
    struct held_run *runs = (struct held_run *)(blocks + (count ? count : 1));
    k->known = 1;
    k->objects = h->objects;
    k->ms = h->ms;
    snprintf(k->cut, sizeof(k->cut), "%s", h->cut);
    for (size_t i = 0, n = 0; i < r->block_count; i++)
        if (held_kind(r->blocks[i].kind))
            blocks[n++] = (struct held_block){r->blocks[i].value,
                                              r->blocks[i].size,
                                              r->blocks[i].stack_id,
                                              UINT32_MAX,
                                              0,
                                              r->blocks[i].kind};
    qsort(blocks, count, sizeof(*blocks), held_by_start);
    for (uint32_t i = 0; i < h->count; i++) {
        const struct torch_holder_ref *t = &h->refs[i];
        size_t below = report_ranges_below(blocks, count, sizeof(*blocks),
                                           offsetof(struct held_block, start), t->address);
        struct held_block *b = below ? &blocks[below - 1] : NULL;
        if (!b || t->address >= b->start + (b->size ? b->size : 1))
            continue;
        if (b->path == UINT32_MAX) /* the first path, the shortest, holds it */
            b->path = t->path;
        if (b->path == t->path)
            b->tensors += t->tensors;
    }
    qsort(blocks, count, sizeof(*blocks), held_by_stack_path);
    size_t run_count = 0;
    for (size_t i = 0; i < count;) {
        struct held_run run = {blocks[i].stack_id, blocks[i].path, 0, 0, 0, blocks[i].kind};
        for (; i < count && blocks[i].stack_id == run.stack_id && blocks[i].path == run.path; i++) {
            run.tensors += blocks[i].tensors;
            run.blocks++;
            run.bytes += blocks[i].size;
        }
        if (run.path != UINT32_MAX)
            runs[run_count++] = run;
    }
    keep_runs(k, h, runs, run_count);
    pages_free(blocks, bytes);
}

const char *report_holder_noun(const struct report_holder_path *p)
{
    if (p->kind == KIND_TORCH_TENSOR)
        return p->tensors == 1 ? "tensor" : "tensors";
    return p->tensors == 1 ? "array" : "arrays";
}

const struct report_holder_path *report_holder_of(const struct report *r, uint32_t stack_id)
{
    const struct report_holders *k = &r->classes.held_by;
    for (int i = 0; i < k->count; i++)
        if (k->paths[i].stack_id == stack_id)
            return &k->paths[i];
    return NULL;
}

void report_holder_text(const struct report_holder_path *p, char *text, size_t size)
{
    static const char graph[] = "the graph of ";
    int of_graph = strncmp(p->path, graph, sizeof(graph) - 1) == 0;
    const char *path = p->path + (of_graph ? sizeof(graph) - 1 : 0);
    path += strncmp(path, "__main__.", 9) == 0 ? 9 : 0;
    size_t length = strlen(path);
    const char *noun = report_holder_noun(p);
    if (length > 3 && strcmp(path + length - 3, "[*]") == 0 && p->container[0]) {
        const char *article = strchr("aeiouAEIOU", p->container[0]) ? "an" : "a";
        snprintf(text, size, "%.*s, %s %s of %llu %s", (int)(length - 3), path, article,
                 p->container, (unsigned long long)p->tensors, noun);
    } else {
        snprintf(text, size, "%s%s (%llu %s)", of_graph ? graph : "", path,
                 (unsigned long long)p->tensors, noun);
    }
}

/* Parameters, gradients, optimizer state and the rest. */
static void split(struct report *r, const struct torch_classes *c, const char *why)
{
    struct report_classes *k = &r->classes;
    size_t count = 0, others = 0;
    for (size_t i = 0; i < r->block_count; i++) {
        count += r->blocks[i].kind == KIND_TORCH_TENSOR;
        others += r->blocks[i].kind == KIND_JAX_ARRAY || r->blocks[i].kind == KIND_CUPY_BLOCK;
    }
    if (!count && others) {
        report_classes_unknown(k, "only PyTorch's tensors are classed, and this program's "
                                  "blocks are JAX's or CuPy's");
        return;
    }
    if (!c || c->why) {
        report_classes_unknown(k, c ? c->why : why);
        return;
    }
    if (!count && c->count) {
        report_classes_unknown(k, "PyTorch's tensors are not recorded one by one here (its "
                                  "cache's segments only)");
        return;
    }
    size_t bytes = (count ? count : 1) * sizeof(struct tensor_block);
    struct tensor_block *blocks = pages_alloc(bytes);
    if (!blocks) {
        report_classes_unknown(k, "out of memory in the tracer");
        return;
    }
    memset(k, 0, sizeof(*k));
    k->known = 1;
    k->modules = c->modules;
    k->optimizers = c->optimizers;
    for (size_t i = 0, n = 0; i < r->block_count; i++)
        if (r->blocks[i].kind == KIND_TORCH_TENSOR)
            blocks[n++] = (struct tensor_block){r->blocks[i].value, r->blocks[i].size,
                                                r->blocks[i].stack_id, 0, TENSOR_CLASSES};
    qsort(blocks, count, sizeof(*blocks), by_start);
    for (uint32_t i = 0; i < c->count; i++) {
        const struct torch_tensor_ref *t = &c->tensors[i];
        struct tensor_block *b = containing(blocks, count, t->address);
        if (b && (int)t->tensor_class < b->tensor_class) {
            b->tensor_class = (int)t->tensor_class;
            b->owner = t->owner;
        }
    }
    for (size_t i = 0; i < count; i++) {
        int which = blocks[i].tensor_class == TENSOR_CLASSES ? CLASS_REST : blocks[i].tensor_class;
        k->bytes[which] += blocks[i].size;
        k->blocks[which]++;
    }
    holders(k, c, blocks, count);
    qsort(blocks, count, sizeof(*blocks), by_stack);
    rest_sites(k, blocks, count);
    pages_free(blocks, bytes);
}

void report_classes(struct report *r, const struct torch_classes *c, const char *why)
{
    split(r, c, why);
    report_holders(r, c ? c->holders : NULL,
                   !c                      ? why
                   : c->why && !c->holders ? c->why
                                           : "CUMEMTRACE_HOLDERS=0");
}
