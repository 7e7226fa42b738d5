/* unwind.c - a walk of this thread's stack by remembered frame rules (see
 * unwind.h).
 *
 * The rules live in an open-addressing table by code address, filled under
 * `rules_lock` and read without it: a slot's rule is written before its
 * address (release), and an address once set never changes, so a reader
 * that finds the address finds its rule. Only a rule's trust changes later,
 * with one atomic store of the whole rule. The table starts small (a
 * program's pages are what it costs) and is rebuilt at twice the size at
 * 3/4 full; the new one is published with one pointer store and the old
 * ones stay mapped, since a reader may still be probing one. A rule's
 * trust settled in an old table after the copy is lost to the new one:
 * there the rule is new again, and checked again. Memory read on the walk
 * is what the call frame information says holds a return address or a
 * saved frame pointer, as libgcc's walk reads it. In front of
 * the table, each thread keeps its last walk, step by step (the memo below).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "unwind.h"

#if defined(__x86_64__)

/* A rule, in one word: bits 0-1 its trust, bit 2 the last frame (the return
 * address is undefined: a thread's or the program's first function), bit 3
 * CFA from the frame pointer (not the stack pointer), bit 4 the frame
 * pointer saved, bits 16-31 where (from the CFA), bits 32-63 the CFA's
 * offset. A rule of trust RULE_NONE is no rule: walks give up there. */
enum { RULE_NEW = 1, RULE_TRUSTED = 2, RULE_NONE = 3 };
#define RULE_TRUST 3u
#define RULE_LAST (1u << 2)
#define RULE_CFA_FP (1u << 3)
#define RULE_FP_SAVED (1u << 4)

#define FIRST_SLOTS 256u /* 4 KiB */
#define MAX_SLOTS (1u << 22)

struct rule_table {
    uint32_t capacity, used;
    struct {
        uintptr_t pc; /* 0: empty */
        uint64_t rule;
    } slots[];
};
static struct rule_table *table_now; /* published with release */
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;

struct eh_bases {
    void *tbase, *dbase, *func;
};
static const void *(*find_fde)(void *pc, struct eh_bases *bases);

static struct rule_table *grow_table(void);

/* The first table is published last: a walk that sees it (acquire) sees
 * find_fde. Without it (no memory), there is no walk by rules. */
void unwind_init(void *libgcc, void *(*lookup)(void *handle, const char *name))
{
    if (!libgcc || !lookup || !(*(void **)&find_fde = lookup(libgcc, "_Unwind_Find_FDE")))
        return;
    pthread_mutex_lock(&rules_lock);
    if (!table_now)
        grow_table();
    pthread_mutex_unlock(&rules_lock);
}

void unwind_reset(void)
{
    pthread_mutex_init(&rules_lock, NULL);
}

/* Reading call frame information: a cursor that never passes `end`; any
 * read past it, or anything not understood, sets `bad`. */
struct cfi {
    const uint8_t *at, *end;
    int bad;
};

static uint64_t cfi_u8(struct cfi *c)
{
    if (c->at >= c->end) {
        c->bad = 1;
        return 0;
    }
    return *c->at++;
}

static uint64_t cfi_fixed(struct cfi *c, int bytes)
{
    if (c->end - c->at < bytes) {
        c->bad = 1;
        return 0;
    }
    uint64_t value = 0;
    memcpy(&value, c->at, bytes); /* little-endian, as x86-64 is */
    c->at += bytes;
    return value;
}

static uint64_t cfi_uleb(struct cfi *c)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint64_t byte = cfi_u8(c);
        value |= (byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return value;
    }
    c->bad = 1;
    return 0;
}

static int64_t cfi_sleb(struct cfi *c)
{
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint64_t byte = cfi_u8(c);
        value |= (byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            if (shift + 7 < 64 && (byte & 0x40))
                value |= ~(uint64_t)0 << (shift + 7);
            return (int64_t)value;
        }
    }
    c->bad = 1;
    return 0;
}

/* Skip `bytes` bytes (an expression). */
static void cfi_skip(struct cfi *c, uint64_t bytes)
{
    if (bytes > (uint64_t)(c->end - c->at))
        c->bad = 1;
    else
        c->at += bytes;
}

/* Skip a pointer in encoding `encoding` (DW_EH_PE_*): its size alone
 * matters, where it is relative to does not. */
static void cfi_skip_pointer(struct cfi *c, int encoding)
{
    switch (encoding & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c: cfi_fixed(c, 8); break;
    case 0x02:
    case 0x0a: cfi_fixed(c, 2); break;
    case 0x03:
    case 0x0b: cfi_fixed(c, 4); break;
    case 0x01: cfi_uleb(c); break;
    case 0x09: cfi_sleb(c); break;
    default: c->bad = 1;
    }
    if ((encoding & 0x70) == 0x50) /* aligned: not in .eh_frame as written by tools */
        c->bad = 1;
}

/* What the rows say about the registers a walk follows: the CFA's register
 * and offset, and each of rbp (6), rsp (7) and the return address (16). */
enum { REG_FP = 6, REG_SP = 7, REG_RA = 16 };
enum { HOW_SAME, HOW_UNDEFINED, HOW_OFFSET, HOW_OTHER };
struct reg_rule {
    int how;
    int64_t offset;
};
struct row {
    uint64_t cfa_reg;
    int64_t cfa_offset;
    int cfa_other; /* an expression */
    struct reg_rule fp, sp, ra;
};

static struct reg_rule *tracked(struct row *r, uint64_t reg)
{
    return reg == REG_FP ? &r->fp : reg == REG_SP ? &r->sp : reg == REG_RA ? &r->ra : NULL;
}

/* DW_CFA_restore: register `reg`'s rule back to what the CIE left. */
static int restore_rule(struct row *r, const struct row *initial, uint64_t reg)
{
    if (!initial)
        return -1;
    struct reg_rule *rule = tracked(r, reg);
    if (rule) {
        struct row copy = *initial;
        *rule = *tracked(&copy, reg);
    }
    return 0;
}

static void set_rule(struct row *r, uint64_t reg, int how, int64_t offset)
{
    struct reg_rule *rule = tracked(r, reg);
    if (rule)
        *rule = (struct reg_rule){how, offset};
}

struct cie_info {
    uint64_t code_align;
    int64_t data_align;
    int fde_encoding;
    int augmented, signal;
    const uint8_t *program, *program_end;
};

#define STATE_STACK 8

/* Run the instructions in [c->at, c->end) on `r` while the row's address
 * `*loc` is at most `target`. `initial`: the row the CIE's instructions
 * left (for restore), NULL while running those. 0, or -1 when not understood. */
static int run_program(struct cfi *c, const struct cie_info *cie, struct row *r,
                       const struct row *initial, uint64_t *loc, uint64_t target)
{
    struct row saved[STATE_STACK];
    int depth = 0;
    while (c->at < c->end && !c->bad) {
        uint64_t op = cfi_u8(c), reg, advance = 0;
        switch (op >> 6) {
        case 1: advance = (op & 0x3f) * cie->code_align; break;
        case 2:
            set_rule(r, op & 0x3f, HOW_OFFSET, (int64_t)cfi_uleb(c) * cie->data_align);
            continue;
        case 3:
            if (restore_rule(r, initial, op & 0x3f) < 0)
                return -1;
            continue;
        }
        if (op >> 6 == 0) {
            switch (op) {
            case 0x00: /* nop */ continue;
            case 0x02: advance = cfi_fixed(c, 1) * cie->code_align; break;
            case 0x03: advance = cfi_fixed(c, 2) * cie->code_align; break;
            case 0x04: advance = cfi_fixed(c, 4) * cie->code_align; break;
            case 0x05: /* offset_extended */
                reg = cfi_uleb(c);
                set_rule(r, reg, HOW_OFFSET, (int64_t)cfi_uleb(c) * cie->data_align);
                continue;
            case 0x06: /* restore_extended */
                if (restore_rule(r, initial, cfi_uleb(c)) < 0)
                    return -1;
                continue;
            case 0x07: set_rule(r, cfi_uleb(c), HOW_UNDEFINED, 0); continue;
            case 0x08: set_rule(r, cfi_uleb(c), HOW_SAME, 0); continue;
            case 0x09: /* register */
                reg = cfi_uleb(c);
                cfi_uleb(c);
                set_rule(r, reg, HOW_OTHER, 0);
                continue;
            case 0x0a: /* remember_state */
                if (depth == STATE_STACK)
                    return -1;
                saved[depth++] = *r;
                continue;
            case 0x0b: /* restore_state, the CFA's rule too */
                if (depth == 0)
                    return -1;
                *r = saved[--depth];
                continue;
            case 0x0c: /* def_cfa */
                r->cfa_reg = cfi_uleb(c);
                r->cfa_offset = (int64_t)cfi_uleb(c);
                r->cfa_other = 0;
                continue;
            case 0x0d:
                r->cfa_reg = cfi_uleb(c);
                r->cfa_other = 0;
                continue;
            case 0x0e: r->cfa_offset = (int64_t)cfi_uleb(c); continue;
            case 0x0f: /* def_cfa_expression */
                cfi_skip(c, cfi_uleb(c));
                r->cfa_other = 1;
                continue;
            case 0x10: /* expression */
            case 0x16: /* val_expression */
                reg = cfi_uleb(c);
                cfi_skip(c, cfi_uleb(c));
                set_rule(r, reg, HOW_OTHER, 0);
                continue;
            case 0x11: /* offset_extended_sf */
                reg = cfi_uleb(c);
                set_rule(r, reg, HOW_OFFSET, cfi_sleb(c) * cie->data_align);
                continue;
            case 0x12: /* def_cfa_sf */
                r->cfa_reg = cfi_uleb(c);
                r->cfa_offset = cfi_sleb(c) * cie->data_align;
                r->cfa_other = 0;
                continue;
            case 0x13: r->cfa_offset = cfi_sleb(c) * cie->data_align; continue;
            case 0x14: /* val_offset */
                reg = cfi_uleb(c);
                cfi_uleb(c);
                set_rule(r, reg, HOW_OTHER, 0);
                continue;
            case 0x15: /* val_offset_sf */
                reg = cfi_uleb(c);
                cfi_sleb(c);
                set_rule(r, reg, HOW_OTHER, 0);
                continue;
            case 0x2e: cfi_uleb(c); continue; /* GNU_args_size */
            case 0x2f:                        /* GNU_negative_offset_extended */
                reg = cfi_uleb(c);
                set_rule(r, reg, HOW_OFFSET, -(int64_t)cfi_uleb(c) * cie->data_align);
                continue;
            default: /* set_loc and anything else */ return -1;
            }
        }
        if (*loc + advance > target)
            return 0;
        *loc += advance;
    }
    return c->bad ? -1 : 0;
}

/* The CIE at `cie`: 0, or -1 when not one this walk can use. */
static int read_cie(const uint8_t *cie, struct cie_info *info)
{
    uint32_t length;
    memcpy(&length, cie, 4);
    if (length == 0 || length == 0xffffffffu)
        return -1;
    struct cfi c = {cie + 4, cie + 4 + length, 0};
    if (cfi_fixed(&c, 4) != 0)
        return -1;
    uint64_t version = cfi_u8(&c);
    if (version != 1 && version != 3)
        return -1;
    const char *augmentation = (const char *)c.at;
    size_t length_left = (size_t)(c.end - c.at);
    size_t augmentation_length = strnlen(augmentation, length_left);
    if (augmentation_length == length_left)
        return -1;
    c.at += augmentation_length + 1;
    *info = (struct cie_info){.fde_encoding = 0};
    info->code_align = cfi_uleb(&c);
    info->data_align = cfi_sleb(&c);
    uint64_t return_register = version == 1 ? cfi_u8(&c) : cfi_uleb(&c);
    if (return_register != REG_RA)
        return -1;
    if (augmentation[0] == 'z') {
        info->augmented = 1;
        uint64_t data_length = cfi_uleb(&c);
        if (data_length > (uint64_t)(c.end - c.at))
            return -1;
        struct cfi data = {c.at, c.at + data_length, 0};
        for (const char *a = augmentation + 1; *a; a++) {
            if (*a == 'R')
                info->fde_encoding = (int)cfi_u8(&data);
            else if (*a == 'P')
                cfi_skip_pointer(&data, (int)cfi_u8(&data));
            else if (*a == 'L')
                cfi_u8(&data);
            else if (*a == 'S')
                info->signal = 1;
            else
                return -1;
        }
        if (data.bad)
            return -1;
        c.at += data_length;
    } else if (augmentation[0]) {
        return -1;
    }
    if (c.bad)
        return -1;
    info->program = c.at;
    info->program_end = c.end;
    return 0;
}

/* The rule for code address `pc` (a return address less one, or the exact
 * place of the walk's first frame), RULE_NONE where there is none. */
static uint64_t rule_of(uintptr_t pc)
{
    struct eh_bases bases;
    const uint8_t *fde = find_fde ? find_fde((void *)pc, &bases) : NULL;
    if (!fde)
        return RULE_NONE;
    uint32_t length, cie_offset;
    memcpy(&length, fde, 4);
    memcpy(&cie_offset, fde + 4, 4);
    if (length == 0xffffffffu || length < 4 || cie_offset == 0)
        return RULE_NONE;
    struct cie_info cie;
    if (read_cie(fde + 4 - cie_offset, &cie) < 0 || cie.signal)
        return RULE_NONE;
    struct cfi c = {fde + 8, fde + 4 + length, 0};
    cfi_skip_pointer(&c, cie.fde_encoding);        /* the start: bases.func */
    cfi_skip_pointer(&c, cie.fde_encoding & 0x0f); /* the length */
    if (cie.augmented)
        cfi_skip(&c, cfi_uleb(&c));
    if (c.bad)
        return RULE_NONE;

    struct row row = {.cfa_reg = REG_SP}, initial;
    uint64_t loc = (uintptr_t)bases.func;
    struct cfi program = {cie.program, cie.program_end, 0};
    if (run_program(&program, &cie, &row, NULL, &loc, UINT64_MAX) < 0)
        return RULE_NONE;
    initial = row;
    loc = (uintptr_t)bases.func;
    if (run_program(&c, &cie, &row, &initial, &loc, pc) < 0)
        return RULE_NONE;

    if (row.cfa_other || (row.cfa_reg != REG_SP && row.cfa_reg != REG_FP) ||
        row.cfa_offset < INT32_MIN || row.cfa_offset > INT32_MAX || row.sp.how != HOW_SAME)
        return RULE_NONE;
    uint64_t rule = RULE_NEW | (uint64_t)(uint32_t)(int32_t)row.cfa_offset << 32;
    if (row.cfa_reg == REG_FP)
        rule |= RULE_CFA_FP;
    if (row.ra.how == HOW_UNDEFINED)
        return rule | RULE_LAST;
    if (row.ra.how != HOW_OFFSET || row.ra.offset != -8)
        return RULE_NONE;
    if (row.fp.how == HOW_OFFSET && row.fp.offset >= INT16_MIN && row.fp.offset <= INT16_MAX)
        rule |= RULE_FP_SAVED | (uint64_t)(uint16_t)(int16_t)row.fp.offset << 16;
    else if (row.fp.how != HOW_SAME)
        return RULE_NONE;
    return rule;
}

static uint32_t home(uintptr_t pc, uint32_t capacity)
{
    return (uint32_t)((pc * 0x9e3779b97f4a7c15ULL) >> 40) & (capacity - 1);
}

/* rules_lock held. The slot of `pc` in `t`: its own, or the empty one it
 * would take. */
static uint32_t probe(const struct rule_table *t, uintptr_t pc)
{
    uint32_t i = home(pc, t->capacity);
    while (t->slots[i].pc && t->slots[i].pc != pc)
        i = (i + 1) & (t->capacity - 1);
    return i;
}

/* rules_lock held. A table twice the size (the first: FIRST_SLOTS), with
 * every rule copied, published whole; NULL when there is no room. */
static struct rule_table *grow_table(void)
{
    struct rule_table *old = table_now;
    uint32_t capacity = old ? old->capacity * 2 : FIRST_SLOTS;
    if (capacity > MAX_SLOTS)
        return NULL;
    struct rule_table *t = pages_alloc(sizeof(*t) + capacity * sizeof(t->slots[0]));
    if (!t)
        return NULL;
    t->capacity = capacity;
    for (uint32_t i = 0; old && i < old->capacity; i++)
        if (old->slots[i].pc) {
            uint32_t at = probe(t, old->slots[i].pc);
            t->slots[at].pc = old->slots[i].pc;
            t->slots[at].rule = __atomic_load_n(&old->slots[i].rule, __ATOMIC_RELAXED);
            t->used++;
        }
    __atomic_store_n(&table_now, t, __ATOMIC_RELEASE);
    return t;
}

/* `pc`'s rule, added if no other thread was first; NULL when there is
 * no room for it. */
static __attribute__((noinline)) uint64_t *add_rule(uintptr_t pc)
{
    pthread_mutex_lock(&rules_lock);
    struct rule_table *t = table_now;
    uint32_t at = probe(t, pc);
    if (!t->slots[at].pc && (t->used + 1) * 4 > t->capacity * 3) {
        t = grow_table();
        if (t)
            at = probe(t, pc);
    }
    if (t && !t->slots[at].pc) {
        __atomic_store_n(&t->slots[at].rule, rule_of(pc), __ATOMIC_RELAXED);
        __atomic_store_n(&t->slots[at].pc, pc, __ATOMIC_RELEASE);
        t->used++;
    }
    pthread_mutex_unlock(&rules_lock);
    return t ? &t->slots[at].rule : NULL;
}

/* This thread's last walk, step by step: where each frame's CFA was, the
 * return address read below it, where the caller's frame pointer was read
 * and what was read there, if a later step's CFA was on it; and the frames
 * it kept. A walk is a function of its first stack pointer, the rules of
 * the return addresses it reads and the frame pointers its rules use: a
 * walk that starts where the last one did holds to its steps without the
 * rules for as long as each return address read, and each frame pointer
 * a CFA was on, is the last walk's, and goes on by the rules after the
 * first step where one differs (that step is still the last walk's up to
 * its reads). So it reads what a walk by the rules would read, and gives
 * the same frames. Only trusted rules' steps are kept: a rule proven once,
 * used alone. A walk from a signal handler on a thread inside a walk
 * (`busy`) neither reads nor writes it. About 3 KiB of static TLS, which
 * the C library zeroes for each thread it creates. */
#define MEMO_STEPS 64
struct memo_step {
    uintptr_t cfa;
    uintptr_t ra;             /* read at cfa - 8 */
    const uintptr_t *fp_slot; /* the caller's frame pointer; NULL: kept */
    const uintptr_t *check;   /* fp_slot, if a later CFA was on it; or NULL */
    uintptr_t fp;             /* read at fp_slot, if checked */
};
static __thread struct {
    uintptr_t sp, fp;         /* the walk's first; fp, if a CFA was on it */
    uintptr_t skip_low, span; /* the frames it did not keep */
    int steps, busy;
    int ends;                            /* the walk ended after its steps */
    int fp_checked;                      /* a CFA was on the first frame pointer */
    uintptr_t kept[MEMO_STEPS];          /* the frames the steps kept */
    uint8_t kept_before[MEMO_STEPS + 1]; /* how many of them, before step i */
    struct memo_step step[MEMO_STEPS];
} memo;

/* How many of the last walk's steps hold now, for a walk from stack
 * pointer `sp` and frame pointer `fp` that keeps frames outside
 * [skip_low, skip_low + span); *ended: the walk ends after them.
 * The step where a read differs holds, rewritten with what was read: its
 * return address and the frame it keeps, its frame pointer (no longer
 * checked: the steps after it are made anew). Apart from unwind_walk, so
 * that each has its registers. */
static __attribute__((noinline, no_sanitize_address)) int
memo_held(uintptr_t sp, uintptr_t fp, int *ended, uintptr_t skip_low, uintptr_t span)
{
    *ended = 0;
    if (sp != memo.sp || !memo.steps || (memo.fp_checked && fp != memo.fp) ||
        skip_low != memo.skip_low || span != memo.span)
        return 0;
    struct memo_step *m = memo.step, *end = m + memo.steps;
    for (; m < end; m++)
        if (*(const uintptr_t *)(m->cfa - 8) != m->ra || (m->check && *m->check != m->fp))
            break;
    if (m == end) {
        *ended = memo.ends;
        return memo.steps;
    }
    int i = (int)(m - memo.step);
    uintptr_t ra = *(const uintptr_t *)(m->cfa - 8);
    m->check = NULL;
    if (m->fp_slot)
        m->fp = *m->fp_slot;
    if (ra != m->ra) {
        int before = memo.kept_before[i];
        m->ra = ra;
        if (ra < 0x4000) {
            *ended = 1; /* the walk's end, as below */
        } else if (i > 0) {
            memo.kept[before] = ra;
            before += ra - skip_low >= span;
        }
        memo.kept_before[i + 1] = (uint8_t)before;
    }
    return i + 1;
}

/* The walk reads the stack where the rules say return addresses and saved
 * frame pointers are, other functions' frames included: not this file's
 * memory to check. */
__attribute__((noinline, no_sanitize_address)) int unwind_walk(uintptr_t *out, int max, int most,
                                                               uintptr_t skip_low,
                                                               uintptr_t skip_high,
                                                               struct unwind_proof *proof)
{
    uintptr_t pc, sp, fp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                     : "=r"(pc), "=r"(sp), "=r"(fp));
    proof->count = 0;
    struct rule_table *t = __atomic_load_n(&table_now, __ATOMIC_ACQUIRE);
    if (!t)
        return -1;
    uintptr_t span = skip_high - skip_low, first_sp = sp, first_fp = fp;
    int n = 0, depth = 0;  /* frames walked, kept */
    uintptr_t lookup = pc; /* the first frame: its exact place */
    /* steps held or kept in the memo; whether the walk ended after them;
     * whether steps from here are kept; the step whose read fp is (-1:
     * the first); whether a CFA was on the first fp */
    int step = 0, ends = 0, owner = !memo.busy, recording = owner, fp_from = -1, fp_checked = 0;
    if (owner) {
        memo.busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        step = memo_held(sp, fp, &ends, skip_low, span);
        int walked = step < most ? step : most;
        depth = memo.kept_before[walked] < max ? memo.kept_before[walked] : max;
        memcpy(out, memo.kept, depth * sizeof(*out));
        fp_checked = step ? memo.fp_checked : 0;
        if (ends || walked < step || depth == max)
            goto done; /* the walk ends within the steps held */
        n = step;
        if (step) {
            sp = memo.step[step - 1].cfa;
            lookup = memo.step[step - 1].ra - 1;
            fp_from = step - 1;
            while (fp_from >= 0 && !memo.step[fp_from].fp_slot)
                fp_from--;
            if (fp_from >= 0)
                fp = *memo.step[fp_from].fp_slot;
        }
    }
    /* a table's size never changes: kept here, not read again after each
     * slot's acquiring load */
    uint32_t capacity = t->capacity;
    while (n < most && depth < max) {
        /* never full: the probe ends at the rule or at an empty slot */
        uint32_t slot = home(lookup, capacity);
        uintptr_t seen;
        while ((seen = __atomic_load_n(&t->slots[slot].pc, __ATOMIC_ACQUIRE)) != lookup && seen)
            slot = (slot + 1) & (capacity - 1);
        uint64_t *word = &t->slots[slot].rule;
        if (!seen) {
            if (!(word = add_rule(lookup))) {
                depth = -1;
                break;
            }
            t = __atomic_load_n(&table_now, __ATOMIC_ACQUIRE);
            capacity = t->capacity;
        }
        uint64_t rule = __atomic_load_n(word, __ATOMIC_RELAXED);
        if ((rule & (RULE_TRUST | RULE_LAST)) != RULE_TRUSTED) {
            if ((rule & RULE_TRUST) == RULE_NONE) {
                depth = -1;
                break;
            }
            if ((rule & RULE_TRUST) == RULE_NEW) {
                recording = 0;
                if (proof->count++ < UNWIND_UNPROVEN_MAX)
                    proof->rules[proof->count - 1] = word;
            }
            if (rule & RULE_LAST) {
                ends = recording;
                break;
            }
        }
        uintptr_t base = (rule & RULE_CFA_FP) ? fp : sp;
        uintptr_t cfa = base + (uintptr_t)(int64_t)(int32_t)(rule >> 32);
        uintptr_t ra = *(const uintptr_t *)(cfa - 8);
        const uintptr_t *fp_slot = NULL;
        if (rule & RULE_FP_SAVED) {
            fp_slot = (const uintptr_t *)(cfa + (uintptr_t)(int64_t)(int16_t)(rule >> 16));
            fp = *fp_slot;
        }
        recording &= step < MEMO_STEPS; /* kept while every step so far is */
        if (recording) {
            if ((rule & RULE_CFA_FP) && fp_from >= 0)
                memo.step[fp_from].check = memo.step[fp_from].fp_slot;
            fp_checked |= (rule & RULE_CFA_FP) && fp_from < 0;
            memo.step[step] = (struct memo_step){cfa, ra, fp_slot, NULL, fp};
            if (fp_slot)
                fp_from = step;
        }
        sp = cfa;
        if (ra < 0x4000) { /* the end (stacks.c's gcc_frame's too) */
            if (recording) {
                memo.kept_before[++step] = (uint8_t)depth;
                ends = 1;
            }
            break;
        }
        if (n++ > 0) { /* not the return into the caller */
            out[depth] = ra;
            if (recording)
                memo.kept[depth] = ra;
            depth += ra - skip_low >= span; /* outside [low, high), no branch */
        }
        if (recording)
            memo.kept_before[++step] = (uint8_t)depth;
        lookup = ra - 1; /* inside the call, not after it */
    }
done:
    if (owner) {
        memo.sp = first_sp;
        memo.fp = first_fp;
        memo.skip_low = skip_low;
        memo.span = span;
        memo.steps = step;
        memo.ends = ends;
        memo.fp_checked = fp_checked;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memo.busy = 0;
    }
    return depth;
}

void unwind_settle(const struct unwind_proof *proof, int same)
{
    int count = proof->count < UNWIND_UNPROVEN_MAX ? proof->count : UNWIND_UNPROVEN_MAX;
    for (int i = 0; i < count; i++) {
        uint64_t *rule = proof->rules[i];
        uint64_t seen = __atomic_load_n(rule, __ATOMIC_RELAXED);
        if ((seen & RULE_TRUST) == RULE_NEW)
            __atomic_store_n(rule,
                             (seen & ~(uint64_t)RULE_TRUST) | (same ? RULE_TRUSTED : RULE_NONE),
                             __ATOMIC_RELAXED);
    }
}

#else

void unwind_init(void *libgcc, void *(*lookup)(void *handle, const char *name))
{
    (void)libgcc;
    (void)lookup;
}

void unwind_reset(void)
{
}

int unwind_walk(uintptr_t *out, int max, int most, uintptr_t skip_low, uintptr_t skip_high,
                struct unwind_proof *proof)
{
    (void)out;
    (void)max;
    (void)most;
    (void)skip_low;
    (void)skip_high;
    proof->count = 0;
    return -1;
}

void unwind_settle(const struct unwind_proof *proof, int same)
{
    (void)proof;
    (void)same;
}

#endif
