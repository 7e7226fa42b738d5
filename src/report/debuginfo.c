/* debuginfo.c - function names and file:line from an object's own ELF and
 * DWARF (see debuginfo.h).
 *
 * An object is mapped whole, read-only; its sections are byte ranges
 * checked against the file's size once, and every read inside one goes
 * through a cursor that never passes its end. Its functions are sorted by
 * address at open; its line table, every unit of it, is read at the first
 * line asked for: its rows kept as written, in sequences (a sequence's
 * addresses only grow, as DWARF has them), and the sequences sorted by
 * address. An address's row is the last one at or below it in the sequence
 * that holds it (where libdw, which sorts a unit's rows, finds the same: at
 * one address the rows in the order written, an end of sequence before a
 * start). */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "debuginfo.h"
#include "output.h"

#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
#else
#error "this machine's ELF e_machine is not known here"
#endif

/* A section's bytes; size 0: absent. Compressed: as in the file, to be
 * inflated where they are read (the line table's sections, at the first
 * line asked for: a report that names a module's functions and shows none
 * of its lines never inflates them). */
struct span {
    const uint8_t *at;
    size_t size;
    int compressed;
};

/* Decompressed sections live in pages of their own, released at close. */
#define MAX_INFLATED 4

struct elf_file {
    const uint8_t *map; /* NULL: not mapped */
    size_t size;
    const Elf64_Phdr *first_load;
    const Elf64_Shdr *sections;
    unsigned section_count;
    struct span symtab, strtab, dynsym, dynstr;
    struct span line, line_str, str, info, abbrev, debuglink, build_id;
    void *inflated[MAX_INFLATED];
    size_t inflated_size[MAX_INFLATED];
};

struct function {
    uint64_t address, size;
    uint64_t end; /* sized: address + size; else its section's end */
    const char *name;
    uint32_t rank;  /* at one address: lower is preferred */
    uint32_t index; /* in the symbol table: the first is preferred */
};

/* A row of the line table. */
struct row {
    uint64_t address;
    uint32_t file, line; /* file: an index into sources, UINT32_MAX: none */
};

/* A sequence of rows: code from `start` up to (not including) `end`, in rows
 * [first, first + count), the last of which marks the end. */
struct sequence {
    uint64_t start, end;
    size_t first, count;
};

/* A DWARF 2-4 unit's compilation directory, by its line table's offset. */
struct compilation {
    uint64_t line_offset;
    const char *directory;
};

static int by_line_offset(const void *a, const void *b)
{
    const struct compilation *x = a, *y = b;
    return x->line_offset < y->line_offset ? -1 : x->line_offset > y->line_offset;
}

/* A file of a line table: its name and its directory (NULL: none). */
struct source {
    const char *directory, *name;
};

struct debuginfo {
    uintptr_t bias; /* load address less link-time address */
    struct elf_file object, debug;
    int debug_tried;
    struct function *functions;
    size_t function_count, functions_bytes;
    int lines_read;
    struct row *rows;
    size_t row_count, rows_bytes;
    struct sequence *sequences;
    size_t sequence_count, sequences_bytes;
    struct compilation *compilations;
    size_t compilation_count, compilations_bytes;
    struct source *sources;
    size_t source_count, sources_bytes;
    char path[4096]; /* the last file handed out */
};

/* ---- reading bytes ---- */

struct cursor {
    const uint8_t *at, *end;
    int bad;
};

static uint64_t read_fixed(struct cursor *c, size_t bytes)
{
    if ((size_t)(c->end - c->at) < bytes) {
        c->bad = 1;
        c->at = c->end;
        return 0;
    }
    uint64_t value = 0;
    memcpy(&value, c->at, bytes); /* little-endian, as checked at open */
    c->at += bytes;
    return value;
}

static uint64_t read_uleb(struct cursor *c)
{
    uint64_t value = 0;
    for (int shift = 0; c->at < c->end; shift += 7) {
        uint8_t byte = *c->at++;
        if (shift < 64)
            value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80))
            return value;
    }
    c->bad = 1;
    return 0;
}

static int64_t read_sleb(struct cursor *c)
{
    uint64_t value = 0;
    for (int shift = 0; c->at < c->end; shift += 7) {
        uint8_t byte = *c->at++;
        if (shift < 64)
            value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            if (shift + 7 < 64 && (byte & 0x40))
                value |= ~(uint64_t)0 << (shift + 7);
            return (int64_t)value;
        }
    }
    c->bad = 1;
    return 0;
}

static void skip(struct cursor *c, uint64_t bytes)
{
    if (bytes > (uint64_t)(c->end - c->at)) {
        c->bad = 1;
        c->at = c->end;
    } else {
        c->at += bytes;
    }
}

/* A NUL-terminated string in place; NULL (and bad) when it runs past the end. */
static const char *read_string(struct cursor *c)
{
    const uint8_t *nul = memchr(c->at, 0, (size_t)(c->end - c->at));
    if (!nul) {
        c->bad = 1;
        c->at = c->end;
        return NULL;
    }
    const char *s = (const char *)c->at;
    c->at = nul + 1;
    return s;
}

/* The string at `offset` in a string section; NULL when outside it. */
static const char *string_at(struct span s, uint64_t offset)
{
    if (offset >= s.size || !memchr(s.at + offset, 0, s.size - offset))
        return NULL;
    return (const char *)s.at + offset;
}

/* ---- ELF ---- */

/* zlib's uncompress, from the system's libz.so.1, looked for once, with
 * debuginfo_lookup's function (in the traced process, dlsym past the
 * tracer's own: the one the process sees is the tracer's wrapper), else the
 * C library's dlsym. */
static int (*inflate_fn)(uint8_t *out, unsigned long *out_size, const uint8_t *in,
                         unsigned long in_size);
static void *(*zlib_lookup)(void *handle, const char *name);

void debuginfo_lookup(void *(*lookup)(void *handle, const char *name))
{
    zlib_lookup = lookup;
}

static int load_zlib(void)
{
    static int tried;
    if (!tried) {
        tried = 1;
        void *(*symbol_of)(void *, const char *) = zlib_lookup ? zlib_lookup : dlsym;
        void *libz = dlopen("libz.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (libz)
            *(void **)&inflate_fn = symbol_of(libz, "uncompress");
    }
    return inflate_fn != NULL;
}

/* A compressed section's bytes, inflated into pages of `f`'s own;
 * absent when it cannot be. */
static struct span inflate_section(struct elf_file *f, struct span packed)
{
    struct span none = {NULL, 0, 0};
    Elf64_Chdr header;
    if (packed.size < sizeof(header))
        return none;
    memcpy(&header, packed.at, sizeof(header));
    int slot = 0;
    while (slot < MAX_INFLATED && f->inflated[slot])
        slot++;
    if (header.ch_type != ELFCOMPRESS_ZLIB || header.ch_size == 0 ||
        header.ch_size > ((uint64_t)1 << 32) || slot == MAX_INFLATED || !load_zlib())
        return none;
    uint8_t *out = pages_alloc(header.ch_size);
    if (!out)
        return none;
    unsigned long size = header.ch_size;
    if (inflate_fn(out, &size, packed.at + sizeof(header), packed.size - sizeof(header)) != 0 ||
        size != header.ch_size) {
        pages_free(out, header.ch_size);
        return none;
    }
    f->inflated[slot] = out;
    f->inflated_size[slot] = header.ch_size;
    return (struct span){out, size, 0};
}

/* *s readable: inflated now if it is compressed. */
static void unpack(struct elf_file *f, struct span *s)
{
    if (s->compressed)
        *s = inflate_section(f, *s);
}

static struct span section_bytes(const struct elf_file *f, const Elf64_Shdr *s)
{
    struct span none = {NULL, 0, 0};
    if (s->sh_type == SHT_NOBITS || s->sh_offset > f->size || s->sh_size > f->size - s->sh_offset)
        return none;
    return (struct span){f->map + s->sh_offset, s->sh_size, (s->sh_flags & SHF_COMPRESSED) != 0};
}

static void unmap_file(struct elf_file *f)
{
    for (int i = 0; i < MAX_INFLATED; i++)
        if (f->inflated[i])
            pages_free(f->inflated[i], f->inflated_size[i]);
    if (f->map)
        munmap((void *)f->map, f->size);
    memset(f, 0, sizeof(*f));
}

/* `path` mapped and its sections found: 0, or -1 (nothing kept). */
static int map_file(struct elf_file *f, const char *path)
{
    memset(f, 0, sizeof(*f));
    int fd = output_open_regular(path, O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    f->map = map;
    f->size = (size_t)st.st_size;
    const Elf64_Ehdr *e = map;
    if (memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 || e->e_ident[EI_CLASS] != ELFCLASS64 ||
        e->e_ident[EI_DATA] != ELFDATA2LSB || e->e_machine != ELF_MACHINE ||
        e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shoff > f->size ||
        (uint64_t)e->e_shnum * sizeof(Elf64_Shdr) > f->size - e->e_shoff ||
        e->e_shstrndx >= e->e_shnum) {
        unmap_file(f);
        return -1;
    }
    if (e->e_phentsize == sizeof(Elf64_Phdr) && e->e_phoff <= f->size &&
        (uint64_t)e->e_phnum * sizeof(Elf64_Phdr) <= f->size - e->e_phoff) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(f->map + e->e_phoff);
        for (int i = 0; i < e->e_phnum && !f->first_load; i++)
            if (ph[i].p_type == PT_LOAD)
                f->first_load = &ph[i];
    }
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(f->map + e->e_shoff);
    f->sections = sections;
    f->section_count = e->e_shnum;
    struct span names = section_bytes(f, &sections[e->e_shstrndx]);
    if (names.compressed)
        names = (struct span){NULL, 0, 0};
    for (int i = 1; i < e->e_shnum; i++) {
        const Elf64_Shdr *s = &sections[i];
        const char *name = string_at(names, s->sh_name);
        if (!name)
            continue;
        struct span *wanted = NULL, *strings = NULL;
        if (s->sh_type == SHT_SYMTAB)
            wanted = &f->symtab, strings = &f->strtab;
        else if (s->sh_type == SHT_DYNSYM)
            wanted = &f->dynsym, strings = &f->dynstr;
        else if (strcmp(name, ".debug_line") == 0)
            wanted = &f->line;
        else if (strcmp(name, ".debug_line_str") == 0)
            wanted = &f->line_str;
        else if (strcmp(name, ".debug_str") == 0)
            wanted = &f->str;
        else if (strcmp(name, ".debug_info") == 0)
            wanted = &f->info;
        else if (strcmp(name, ".debug_abbrev") == 0)
            wanted = &f->abbrev;
        else if (strcmp(name, ".gnu_debuglink") == 0)
            wanted = &f->debuglink;
        else if (strcmp(name, ".note.gnu.build-id") == 0)
            wanted = &f->build_id;
        if (!wanted || wanted->size)
            continue;
        *wanted = section_bytes(f, s);
        if (strings && s->sh_link < e->e_shnum)
            *strings = section_bytes(f, &sections[s->sh_link]);
    }
    /* Only the line table's sections are read compressed (unpack): a
     * compressed symbol table, note or link, which no linker writes, is
     * none. */
    struct span *plain[] = {&f->symtab, &f->strtab,    &f->dynsym,
                            &f->dynstr, &f->debuglink, &f->build_id};
    for (unsigned i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (plain[i]->compressed)
            *plain[i] = (struct span){NULL, 0, 0};
    return 0;
}

/* ---- functions ---- */

static int by_address(const void *a, const void *b)
{
    const struct function *x = a, *y = b;
    if (x->address != y->address)
        return x->address < y->address ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->index < y->index ? -1 : 1;
}

/* The functions of `f`'s symbol table, sorted: code symbols that are defined.
 * At one address a sized name comes before one without a size, a global
 * one before a weak one before a local one, and the first in the table
 * before a later one (libdw's preference). */
static void read_functions(struct debuginfo *d, const struct elf_file *f, struct span symbols,
                           struct span strings)
{
    size_t count = symbols.size / sizeof(Elf64_Sym);
    if (!count || !strings.size)
        return;
    d->functions_bytes = count * sizeof(struct function);
    d->functions = pages_alloc(d->functions_bytes);
    if (!d->functions)
        return;
    for (size_t i = 0; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, symbols.at + i * sizeof(sym), sizeof(sym));
        int type = ELF64_ST_TYPE(sym.st_info), binding = ELF64_ST_BIND(sym.st_info);
        const char *name = string_at(strings, sym.st_name);
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || !name || !name[0] ||
            (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
            continue;
        uint64_t end = sym.st_value + sym.st_size;
        if (!sym.st_size && sym.st_shndx < f->section_count)
            end = f->sections[sym.st_shndx].sh_addr + f->sections[sym.st_shndx].sh_size;
        else if (!sym.st_size)
            continue;
        uint32_t rank = binding == STB_GLOBAL ? 0 : binding == STB_WEAK ? 1 : 2;
        d->functions[d->function_count++] =
            (struct function){sym.st_value, sym.st_size, end, name, rank + (sym.st_size ? 0 : 3),
                              (uint32_t)i};
    }
    qsort(d->functions, d->function_count, sizeof(struct function), by_address);
}

const char *debuginfo_function(struct debuginfo *d, uintptr_t address, uintptr_t *offset)
{
    uint64_t at = address - d->bias;
    size_t low = 0, high = d->function_count; /* the first function above `at` */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (d->functions[middle].address <= at)
            low = middle + 1;
        else
            high = middle;
    }
    /* Down from the nearest: the first sized function that holds `at` (the
     * first of those at its address, the preferred), else the nearest
     * without a size in whose section `at` is, as long as no sized function
     * ended between it and `at`. */
    const struct function *sizeless = NULL;
    for (size_t i = low, looked = 0; i-- > 0 && looked < 256; looked++) {
        const struct function *f = &d->functions[i];
        if (f->size && at < f->address + f->size) {
            while (i > 0 && d->functions[i - 1].address == f->address)
                f = &d->functions[--i];
            *offset = at - f->address;
            return f->name;
        }
        if (!f->size && !sizeless && at <= f->end) /* libdw's bound: its end too */
            sizeless = f;
        if (f->size && !sizeless)
            break;
    }
    if (!sizeless)
        return NULL;
    *offset = at - sizeless->address;
    return sizeless->name;
}

/* ---- the separate debug file ---- */

/* The build id's note: its bytes, or size 0. */
static struct span build_id(const struct elf_file *f)
{
    struct cursor c = {f->build_id.at, f->build_id.at + f->build_id.size, 0};
    while (!c.bad && c.at < c.end) {
        uint32_t name_size = (uint32_t)read_fixed(&c, 4), desc_size = (uint32_t)read_fixed(&c, 4);
        uint32_t type = (uint32_t)read_fixed(&c, 4);
        const uint8_t *name = c.at;
        skip(&c, (name_size + 3u) & ~3u);
        const uint8_t *desc = c.at;
        skip(&c, (desc_size + 3u) & ~3u);
        if (!c.bad && type == NT_GNU_BUILD_ID && name_size == 4 && memcmp(name, "GNU", 4) == 0)
            return (struct span){desc, desc_size, 0};
    }
    return (struct span){NULL, 0, 0};
}

/* d->debug mapped, if the object names one that can be found: by build
 * id, then by debug link (libdw's standard places). */
static void find_debug_file(struct debuginfo *d, const char *path)
{
    char candidate[4200];
    struct span id = build_id(&d->object);
    if (id.size >= 2 && id.size <= 64) {
        int n = snprintf(candidate, sizeof(candidate), "/usr/lib/debug/.build-id/%02x/", id.at[0]);
        for (size_t i = 1; i < id.size; i++)
            n += snprintf(candidate + n, sizeof(candidate) - n, "%02x", id.at[i]);
        snprintf(candidate + n, sizeof(candidate) - n, ".debug");
        if (map_file(&d->debug, candidate) == 0)
            return;
    }
    struct cursor c = {d->object.debuglink.at, d->object.debuglink.at + d->object.debuglink.size,
                       0};
    const char *link = d->object.debuglink.size ? read_string(&c) : NULL;
    const char *slash = strrchr(path, '/');
    if (!link || !link[0] || strchr(link, '/') || !slash)
        return;
    int dir = (int)(slash - path);
    const char *places[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
    for (unsigned i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
        if (snprintf(candidate, sizeof(candidate), places[i], dir, path, link) >=
                (int)sizeof(candidate) ||
            strcmp(candidate, path) == 0)
            continue;
        if (map_file(&d->debug, candidate) == 0)
            return;
    }
}

/* ---- open, close ---- */

struct debuginfo *debuginfo_open(const char *path, uintptr_t start)
{
    struct debuginfo *d = pages_alloc(sizeof(*d));
    if (!d)
        return NULL;
    if (map_file(&d->object, path) < 0 || !d->object.first_load) {
        debuginfo_close(d);
        return NULL;
    }
    d->bias = start - (d->object.first_load->p_vaddr - d->object.first_load->p_offset);
    if (!d->object.symtab.size || !d->object.line.size)
        find_debug_file(d, path);
    if (d->object.symtab.size)
        read_functions(d, &d->object, d->object.symtab, d->object.strtab);
    else if (d->debug.symtab.size)
        read_functions(d, &d->debug, d->debug.symtab, d->debug.strtab);
    else
        read_functions(d, &d->object, d->object.dynsym, d->object.dynstr);
    return d;
}

void debuginfo_close(struct debuginfo *d)
{
    if (!d)
        return;
    unmap_file(&d->object);
    unmap_file(&d->debug);
    if (d->functions)
        pages_free(d->functions, d->functions_bytes);
    if (d->rows)
        pages_free(d->rows, d->rows_bytes);
    if (d->sequences)
        pages_free(d->sequences, d->sequences_bytes);
    if (d->compilations)
        pages_free(d->compilations, d->compilations_bytes);
    if (d->sources)
        pages_free(d->sources, d->sources_bytes);
    pages_free(d, sizeof(*d));
}

/* ---- the line table ---- */

/* Room for one more of `count` items of `item` bytes in *array, doubled
 * when full: 0, or -1 when there is no memory. */
static int reserve(void **array, size_t *bytes, size_t count, size_t item)
{
    if ((count + 1) * item <= *bytes)
        return 0;
    size_t size = *bytes ? *bytes * 2 : 64 * 1024;
    void *grown = *array ? pages_grow(*array, *bytes, size) : pages_alloc(size);
    if (!grown)
        return -1;
    *array = grown;
    *bytes = size;
    return 0;
}

static int add_source(struct debuginfo *d, const char *directory, const char *name)
{
    if (!name || reserve((void **)&d->sources, &d->sources_bytes, d->source_count,
                         sizeof(struct source)) < 0)
        return -1;
    d->sources[d->source_count++] = (struct source){directory, name};
    return 0;
}

/* A row; with `end`, the end of the sequence that began at row `first`,
 * which is kept if its addresses only grow (else it is left out: no row of
 * it could be found by address). 0, or -1 when there is no memory. */
static int add_row(struct debuginfo *d, uint64_t address, uint32_t file, uint32_t line, int end,
                   size_t first)
{
    if (reserve((void **)&d->rows, &d->rows_bytes, d->row_count, sizeof(struct row)) < 0)
        return -1;
    d->rows[d->row_count++] = (struct row){address, file, line};
    if (!end || d->row_count - first < 2)
        return 0;
    for (size_t i = first + 1; i < d->row_count; i++)
        if (d->rows[i].address < d->rows[i - 1].address)
            return 0;
    if (reserve((void **)&d->sequences, &d->sequences_bytes, d->sequence_count,
                sizeof(struct sequence)) < 0)
        return -1;
    d->sequences[d->sequence_count++] =
        (struct sequence){d->rows[first].address, address, first, d->row_count - first};
    return 0;
}

/* DWARF 5's forms that a line table's header uses. */
enum {
    FORM_BLOCK = 0x09,
    FORM_DATA1 = 0x0b,
    FORM_DATA2 = 0x05,
    FORM_DATA4 = 0x06,
    FORM_DATA8 = 0x07,
    FORM_DATA16 = 0x1e,
    FORM_STRING = 0x08,
    FORM_STRP = 0x0e,
    FORM_LINE_STRP = 0x1f,
    FORM_UDATA = 0x0f,
    FORM_SDATA = 0x0d,
};
enum { LNCT_PATH = 1, LNCT_DIRECTORY_INDEX = 2 };

/* One entry's field in form `form`: a string (*text) or a number (*value). */
static void read_form(struct cursor *c, const struct elf_file *f, uint64_t form, int offset_size,
                      const char **text, uint64_t *value)
{
    *text = NULL;
    *value = 0;
    switch (form) {
    case FORM_STRING: *text = read_string(c); break;
    case FORM_LINE_STRP: *text = string_at(f->line_str, read_fixed(c, offset_size)); break;
    case FORM_STRP: *text = string_at(f->str, read_fixed(c, offset_size)); break;
    case FORM_UDATA: *value = read_uleb(c); break;
    case FORM_SDATA: *value = (uint64_t)read_sleb(c); break;
    case FORM_DATA1: *value = read_fixed(c, 1); break;
    case FORM_DATA2: *value = read_fixed(c, 2); break;
    case FORM_DATA4: *value = read_fixed(c, 4); break;
    case FORM_DATA8: *value = read_fixed(c, 8); break;
    case FORM_DATA16: skip(c, 16); break;
    case FORM_BLOCK: skip(c, read_uleb(c)); break;
    default: c->bad = 1;
    }
}

/* A DWARF 5 list of entries (directories or files), each added to the
 * sources with its path and directory index; directories' own indices
 * into d->sources start at `first_directory`. 0, or -1. */
static int read_entries(struct debuginfo *d, struct cursor *c, const struct elf_file *f,
                        int offset_size, size_t first_directory, size_t directories)
{
    uint64_t format[16][2];
    unsigned formats = (unsigned)read_fixed(c, 1);
    if (formats > 16)
        return -1;
    for (unsigned i = 0; i < formats; i++) {
        format[i][0] = read_uleb(c);
        format[i][1] = read_uleb(c);
    }
    uint64_t count = read_uleb(c);
    for (uint64_t n = 0; n < count && !c->bad; n++) {
        const char *path = NULL, *directory = NULL;
        for (unsigned i = 0; i < formats; i++) {
            const char *text;
            uint64_t value;
            read_form(c, f, format[i][1], offset_size, &text, &value);
            if (format[i][0] == LNCT_PATH)
                path = text;
            else if (format[i][0] == LNCT_DIRECTORY_INDEX && value < directories)
                directory = d->sources[first_directory + value].name;
        }
        if (c->bad || add_source(d, directory, path) < 0)
            return -1;
    }
    return c->bad ? -1 : 0;
}

/* One unit of .debug_line at c->at: its files added to d->sources, its rows
 * to d->rows; c->at past it. `compilation`: the directory of the unit's
 * compilation, which DWARF before 5 names only in the unit's DIE (NULL: not
 * known). 0, or -1 when it cannot be read (the units after it are not
 * either: where the next starts is not known). */
static int read_unit(struct debuginfo *d, struct cursor *c, const struct elf_file *f,
                     const char *compilation)
{
    int offset_size = 4;
    uint64_t length = read_fixed(c, 4);
    if (length == 0xffffffffu) {
        offset_size = 8;
        length = read_fixed(c, 8);
    }
    if (c->bad || length > (uint64_t)(c->end - c->at))
        return -1;
    struct cursor unit = {c->at, c->at + length, 0};
    c->at += length;
    unsigned version = (unsigned)read_fixed(&unit, 2);
    if (version < 2 || version > 5)
        return 0; /* skipped: its length is known */
    if (version >= 5) {
        unsigned address_size = (unsigned)read_fixed(&unit, 1);
        read_fixed(&unit, 1); /* segment selector size */
        if (address_size != 8)
            return 0;
    }
    uint64_t header_length = read_fixed(&unit, offset_size);
    if (unit.bad || header_length > (uint64_t)(unit.end - unit.at))
        return 0;
    struct cursor program = {unit.at + header_length, unit.end, 0};
    unsigned min_length = (unsigned)read_fixed(&unit, 1);
    if (version >= 4)
        read_fixed(&unit, 1); /* maximum operations per instruction */
    read_fixed(&unit, 1);     /* default_is_stmt */
    int line_base = (int8_t)read_fixed(&unit, 1);
    unsigned line_range = (unsigned)read_fixed(&unit, 1);
    unsigned opcode_base = (unsigned)read_fixed(&unit, 1);
    const uint8_t *opcode_lengths = unit.at;
    skip(&unit, opcode_base ? opcode_base - 1 : 0);
    if (unit.bad || line_range == 0 || opcode_base == 0)
        return 0;

    /* The unit's files, into d->sources from `files` on. DWARF 5 numbers
     * them from 0, earlier versions from 1; directories are numbered from
     * 0 both ways (before 5, 0 is the unit's compilation directory). A
     * relative directory is kept so, as libdw keeps it. */
    size_t directories = d->source_count, files;
    if (version >= 5) {
        if (read_entries(d, &unit, f, offset_size, directories, 0) < 0)
            return 0;
        size_t directory_count = d->source_count - directories;
        files = d->source_count;
        if (read_entries(d, &unit, f, offset_size, directories, directory_count) < 0)
            return 0;
    } else {
        if (add_source(d, NULL, compilation ? compilation : "") < 0)
            return 0;
        for (const char *name; (name = read_string(&unit)) && name[0];)
            if (add_source(d, NULL, name) < 0)
                return 0;
        size_t directory_count = d->source_count - directories;
        files = d->source_count - 1; /* file 1 is the first named */
        for (const char *name; (name = read_string(&unit)) && name[0];) {
            uint64_t directory = read_uleb(&unit);
            read_uleb(&unit); /* modification time */
            read_uleb(&unit); /* length */
            const char *in =
                directory < directory_count ? d->sources[directories + directory].name : NULL;
            if (add_source(d, in, name) < 0)
                return 0;
        }
    }
    if (unit.bad)
        return 0;

    uint64_t address = 0, file = 1, line = 1;
    size_t first_file = version >= 5 ? files : files + 1, last_source = d->source_count;
    size_t first_row = d->row_count; /* of the sequence being read */
#define ROW(end)                                                                                   \
    do {                                                                                           \
        uint64_t at = files + file;                                                                \
        if (add_row(d, address, at >= first_file && at < last_source ? (uint32_t)at : UINT32_MAX,  \
                    (uint32_t)line, end, first_row) < 0)                                           \
            return -1;                                                                             \
    } while (0)
    while (program.at < program.end && !program.bad) {
        unsigned op = (unsigned)read_fixed(&program, 1);
        if (op >= opcode_base) {
            unsigned adjusted = op - opcode_base;
            address += (uint64_t)(adjusted / line_range) * min_length;
            line += (int64_t)line_base + adjusted % line_range;
            ROW(0);
            continue;
        }
        switch (op) {
        case 0: { /* extended */
            uint64_t size = read_uleb(&program);
            if (size == 0 || size > (uint64_t)(program.end - program.at)) {
                program.bad = 1;
                break;
            }
            const uint8_t *next = program.at + size;
            unsigned sub = (unsigned)read_fixed(&program, 1);
            if (sub == 1) { /* end_sequence */
                ROW(1);
                address = 0, file = 1, line = 1;
                first_row = d->row_count;
            } else if (sub == 2 && size == 9) { /* set_address */
                address = read_fixed(&program, 8);
            } else if (sub == 3 && version < 5) { /* define_file */
                const char *name = read_string(&program);
                uint64_t directory = read_uleb(&program);
                const char *in = directories + directory < files + 1
                                     ? d->sources[directories + directory].name
                                     : NULL;
                if (add_source(d, in, name) < 0)
                    return -1;
                last_source = d->source_count;
            }
            program.at = next;
            break;
        }
        case 1: ROW(0); break; /* copy */
        case 2: address += read_uleb(&program) * min_length; break;
        case 3: line += (uint64_t)read_sleb(&program); break;
        case 4: file = read_uleb(&program); break;
        case 5: read_uleb(&program); break; /* column */
        case 6:
        case 7:
        case 10:
        case 11: break;
        case 8: address += (uint64_t)((255 - opcode_base) / line_range) * min_length; break;
        case 9: address += read_fixed(&program, 2); break;
        case 12: read_uleb(&program); break; /* isa */
        default:
            for (unsigned i = 0; i < opcode_lengths[op - 1]; i++)
                read_uleb(&program);
        }
    }
#undef ROW
    return 0;
}

/* ---- compilation directories (DWARF before 5) ---- */

/* Skip one attribute's value in form `form` (DWARF 2 to 5, and GNU's). */
static void skip_form(struct cursor *c, uint64_t form, int offset_size, int address_size,
                      int version)
{
    switch (form) {
    case 0x19:
    case 0x21: break; /* flag_present, implicit_const */
    case 0x0b:
    case 0x11:
    case 0x0c:
    case 0x25:
    case 0x29: skip(c, 1); break;
    case 0x05:
    case 0x12:
    case 0x26:
    case 0x2a: skip(c, 2); break;
    case 0x27:
    case 0x2b: skip(c, 3); break;
    case 0x06:
    case 0x13:
    case 0x1c:
    case 0x28:
    case 0x2c: skip(c, 4); break;
    case 0x07:
    case 0x14:
    case 0x20: skip(c, 8); break;
    case 0x1e: skip(c, 16); break;
    case 0x01: skip(c, (uint64_t)address_size); break;
    case 0x10: skip(c, version == 2 ? (uint64_t)address_size : (uint64_t)offset_size); break;
    case 0x0e:
    case 0x17:
    case 0x1d:
    case 0x1f:
    case 0x1f20:
    case 0x1f21: skip(c, (uint64_t)offset_size); break;
    case 0x08: read_string(c); break;
    case 0x0d: read_sleb(c); break;
    case 0x0f:
    case 0x15:
    case 0x1a:
    case 0x1b:
    case 0x22:
    case 0x23:
    case 0x1f01:
    case 0x1f02: read_uleb(c); break;
    case 0x03: skip(c, read_fixed(c, 2)); break;
    case 0x04: skip(c, read_fixed(c, 4)); break;
    case 0x0a: skip(c, read_fixed(c, 1)); break;
    case 0x09:
    case 0x18: skip(c, read_uleb(c)); break;
    case 0x16: skip_form(c, read_uleb(c), offset_size, address_size, version); break;
    default: c->bad = 1;
    }
}

/* Every DWARF 2-4 unit's line table offset (its DIE's DW_AT_stmt_list) and
 * compilation directory (DW_AT_comp_dir), from .debug_info, into
 * d->compilations, sorted by offset. */
static void read_compilations(struct debuginfo *d, const struct elf_file *f)
{
    struct cursor c = {f->info.at, f->info.at + f->info.size, 0};
    while (c.at < c.end && !c.bad) {
        int offset_size = 4;
        uint64_t length = read_fixed(&c, 4);
        if (length == 0xffffffffu) {
            offset_size = 8;
            length = read_fixed(&c, 8);
        }
        if (c.bad || length > (uint64_t)(c.end - c.at))
            break;
        struct cursor unit = {c.at, c.at + length, 0};
        c.at += length;
        int version = (int)read_fixed(&unit, 2);
        if (version < 2 || version > 4)
            continue;
        uint64_t abbrev_offset = read_fixed(&unit, offset_size);
        int address_size = (int)read_fixed(&unit, 1);
        uint64_t code = read_uleb(&unit);
        if (unit.bad || abbrev_offset >= f->abbrev.size)
            continue;
        /* The first DIE's abbreviation: its attributes' names and forms. */
        struct cursor abbrev = {f->abbrev.at + abbrev_offset, f->abbrev.at + f->abbrev.size, 0};
        for (;;) {
            uint64_t at_code = read_uleb(&abbrev);
            if (at_code == 0 || abbrev.bad)
                break;
            read_uleb(&abbrev);     /* tag */
            read_fixed(&abbrev, 1); /* children */
            if (at_code == code)
                break;
            for (uint64_t name = 1, form = 1; (name || form) && !abbrev.bad;) {
                name = read_uleb(&abbrev);
                form = read_uleb(&abbrev);
                if (form == 0x21) /* implicit_const: its value here */
                    read_sleb(&abbrev);
            }
        }
        struct compilation found = {UINT64_MAX, NULL};
        while (!abbrev.bad && !unit.bad) {
            uint64_t name = read_uleb(&abbrev), form = read_uleb(&abbrev);
            if (!name && !form)
                break;
            if (form == 0x21)
                read_sleb(&abbrev);
            if (name == 0x10 && (form == 0x06 || form == 0x17 || form == 0x07)) /* stmt_list */
                found.line_offset = read_fixed(&unit, form == 0x07   ? 8
                                                      : form == 0x17 ? offset_size
                                                                     : 4);
            else if (name == 0x1b && (form == 0x08 || form == 0x0e || form == 0x1f))
                found.directory = form == 0x08 ? read_string(&unit) /* comp_dir */
                                               : string_at(form == 0x0e ? f->str : f->line_str,
                                                           read_fixed(&unit, offset_size));
            else
                skip_form(&unit, form, offset_size, address_size, version);
        }
        if (abbrev.bad || unit.bad || found.line_offset == UINT64_MAX || !found.directory ||
            reserve((void **)&d->compilations, &d->compilations_bytes, d->compilation_count,
                    sizeof(found)) < 0)
            continue;
        d->compilations[d->compilation_count++] = found;
    }
    if (d->compilation_count)
        qsort(d->compilations, d->compilation_count, sizeof(struct compilation), by_line_offset);
}

/* The compilation directory of the unit whose line table is at `offset`,
 * or NULL. */
static const char *compilation_directory(const struct debuginfo *d, uint64_t offset)
{
    size_t low = 0, high = d->compilation_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (d->compilations[middle].line_offset < offset)
            low = middle + 1;
        else
            high = middle;
    }
    return low < d->compilation_count && d->compilations[low].line_offset == offset
               ? d->compilations[low].directory
               : NULL;
}

static int by_start(const void *a, const void *b)
{
    const struct sequence *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->first < y->first ? -1 : 1;
}

static void read_lines(struct debuginfo *d)
{
    d->lines_read = 1;
    struct elf_file *f = d->object.line.size ? &d->object : &d->debug;
    unpack(f, &f->line);
    unpack(f, &f->line_str);
    unpack(f, &f->str);
    unpack(f, &f->info);
    unpack(f, &f->abbrev);
    read_compilations(d, f);
    struct cursor c = {f->line.at, f->line.at + f->line.size, 0};
    while (c.at < c.end && !c.bad) {
        /* Before DWARF 5, a unit's directory 0 is its compilation's,
         * named only in .debug_info: looked for there, for such units. */
        uint64_t version = c.end - c.at >= 6 ? (uint64_t)(c.at[4] | c.at[5] << 8) : 0;
        if (c.end - c.at >= 4 && c.at[0] == 0xff && c.at[1] == 0xff)
            version = c.end - c.at >= 14 ? (uint64_t)(c.at[12] | c.at[13] << 8) : 0;
        const char *compilation = version >= 2 && version <= 4
                                      ? compilation_directory(d, (uint64_t)(c.at - f->line.at))
                                      : NULL;
        if (read_unit(d, &c, f, compilation) < 0)
            break;
    }
    if (d->sequence_count)
        qsort(d->sequences, d->sequence_count, sizeof(struct sequence), by_start);
}

int debuginfo_line(struct debuginfo *d, uintptr_t address, const char **file, int *line)
{
    if (!d->lines_read)
        read_lines(d);
    uint64_t at = address - d->bias;
    size_t low = 0, high = d->sequence_count; /* the first sequence starting above `at` */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (d->sequences[middle].start <= at)
            low = middle + 1;
        else
            high = middle;
    }
    /* The nearest that holds `at`: sequences do not overlap but for code
     * the linker dropped, whose sequences start at 0. */
    const struct sequence *s = NULL;
    for (size_t i = low, looked = 0; i-- > 0 && looked < 64 && !s; looked++)
        if (at < d->sequences[i].end)
            s = &d->sequences[i];
    if (!s)
        return 0;
    const struct row *rows = d->rows + s->first;
    low = 0, high = s->count - 1; /* its last row is its end */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (rows[middle].address <= at)
            low = middle + 1;
        else
            high = middle;
    }
    const struct row *r = &rows[low - 1];
    if (r->file >= d->source_count)
        return 0;
    const struct source *source = &d->sources[r->file];
    if (source->name[0] == '/' || !source->directory || !source->directory[0])
        snprintf(d->path, sizeof(d->path), "%s", source->name);
    else
        snprintf(d->path, sizeof(d->path), "%s/%s", source->directory, source->name);
    *file = d->path;
    *line = (int)r->line;
    return 1;
}
