/* symbolize.c - addresses to names at report time (see symbolize.h).
 *
 * Strings handed out live until symbolizer_close(): they are copied into the
 * symbolizer's own string pages.
 *
 * Names and lines come from the objects' own ELF and DWARF, read by
 * debuginfo.c, on every machine, not from libdw, which many machines lack:
 * a report names the same frames with the same lines wherever it is made
 * (debuginfo.h says what is read). tests/integration/test_symbols.py checks
 * that the names and lines are libdw's where libdw is installed.
 *
 * This process's modules, and what was read of them, are kept from one
 * report to the next: reading an object's symbols and line table again
 * costs milliseconds a report (an OOM report each time, with
 * CUMEMTRACE_OOM=every). They are found again only when the set of loaded
 * objects changed (dl_iterate_phdr's counts of loads and unloads) or in a
 * forked child.
 *
 * Another process's modules (a dump) are the files its maps name, opened by
 * path only when they are regular files (a FIFO named there would block the
 * command for ever), as are separate debug files (debuginfo.c).
 * CUMEMTRACE_NO_DEBUGINFO (the fuzzers') opens no file: names from dladdr
 * or the maps alone. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "debuginfo.h"
#include "log.h"
#include "symbolize.h"

/* An object loaded in the process: where its code is, where its file
 * offset 0 is, its path, and what debuginfo.c read of it (opened at the
 * first address in it). */
struct module {
    uintptr_t low, high; /* live: its segments' span; offline: unused */
    uintptr_t start;     /* where file offset 0 is loaded */
    size_t path_at;      /* in the set's names */
    struct debuginfo *info;
    int tried;
};

struct module_set {
    struct module *list;
    size_t count, bytes;
    char *names;
    size_t names_used, names_bytes;
};

/* This process's modules, kept between reports, and by a forked child,
 * whose address space is its parent's. */
static struct {
    struct module_set *set;
    pid_t pid;                     /* the process that uses set */
    unsigned long long adds, subs; /* loads and unloads when it was found */
    int users;                     /* symbolizers open on set (atomic) */
} live;

/* One line of /proc/PID/maps, for symbolizing a process that is gone. */
struct mapping {
    uintptr_t start, end, offset;
    const char *path;
};

struct symbolizer {
    struct module_set *modules; /* NULL: no names or lines beyond dladdr's */
    int shared;                 /* modules is live's, not ours to close */
    struct mapping *maps;       /* offline only */
    size_t map_count, maps_bytes;
    demangler demangle;
    char *strings;
    size_t strings_used, strings_size;
    char *pages[48]; /* every string page, released at close */
    size_t page_sizes[48];
    int page_count;
};

static const char *keep(struct symbolizer *sym, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    if (sym->strings_used + n > sym->strings_size) {
        size_t size = sym->strings_size ? sym->strings_size * 2 : 1 << 20;
        while (size < sym->strings_used + n)
            size *= 2;
        /* Old strings stay where they are: never move them, start new pages. */
        char *pages = sym->page_count < 48 ? pages_alloc(size) : NULL;
        if (!pages)
            return NULL;
        sym->pages[sym->page_count] = pages;
        sym->page_sizes[sym->page_count++] = size;
        sym->strings = pages;
        sym->strings_used = 0;
        sym->strings_size = size;
    }
    char *copy = sym->strings + sym->strings_used;
    memcpy(copy, s, n);
    sym->strings_used += n;
    return copy;
}

static int find_libstdcxx(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *name = slash ? slash + 1 : info->dlpi_name;
    if (strncmp(name, "libstdc++.so", 12) != 0)
        return 0;
    *(void **)data = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return 1;
}

/* C++ programs such as PyTorch load libstdc++ privately (RTLD_LOCAL), so
 * RTLD_DEFAULT does not see its demangler: look for the loaded library. The
 * library loaded for the command (`may_load`) stays loaded. */
demangler symbol_demangler(void *(*lookup)(void *, const char *), int may_load)
{
    void *function = lookup ? lookup(RTLD_DEFAULT, "__cxa_demangle") : NULL;
    void *libstdcxx = NULL;
    if (lookup && !function && dl_iterate_phdr(find_libstdcxx, &libstdcxx) && libstdcxx)
        function = lookup(libstdcxx, "__cxa_demangle");
    if (lookup && !function && may_load &&
        (libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL)))
        function = lookup(libstdcxx, "__cxa_demangle");
    demangler found;
    *(void **)&found = function;
    return found;
}

char *symbol_demangle(demangler demangle, const char *name)
{
    if (!demangle || !name || strncmp(name, "_Z", 2) != 0)
        return NULL;
    int status = -1;
    char *plain = demangle(name, NULL, NULL, &status);
    if (status == 0 && plain)
        return plain;
    free(plain);
    return NULL;
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long long *counts = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        counts[0] = info->dlpi_adds;
        counts[1] = info->dlpi_subs;
    }
    return 1; /* the counts are the same in every entry */
}

/* Room for a module, and its path kept in the set's names: 0, or -1. */
static int add_module(struct module_set *set, const char *path, uintptr_t low, uintptr_t high,
                      uintptr_t start)
{
    size_t length = strlen(path) + 1;
    if ((set->count + 1) * sizeof(struct module) > set->bytes) {
        size_t size = set->bytes ? set->bytes * 2 : 64 * sizeof(struct module);
        struct module *list =
            set->list ? pages_grow(set->list, set->bytes, size) : pages_alloc(size);
        if (!list)
            return -1;
        set->list = list;
        set->bytes = size;
    }
    if (set->names_used + length > set->names_bytes) {
        size_t size = set->names_bytes ? set->names_bytes * 2 : 16384;
        while (size < set->names_used + length)
            size *= 2;
        char *names =
            set->names ? pages_grow(set->names, set->names_bytes, size) : pages_alloc(size);
        if (!names)
            return -1;
        set->names = names;
        set->names_bytes = size;
    }
    memcpy(set->names + set->names_used, path, length);
    set->list[set->count++] = (struct module){low, high, start, set->names_used, NULL, 0};
    set->names_used += length;
    return 0;
}

static void close_modules(struct module_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->count; i++)
        debuginfo_close(set->list[i].info);
    if (set->list)
        pages_free(set->list, set->bytes);
    if (set->names)
        pages_free(set->names, set->names_bytes);
    pages_free(set, sizeof(*set));
}

/* What debuginfo.c read of module `m`, opened now if it was not yet. */
static struct debuginfo *module_info(struct module_set *set, struct module *m)
{
    if (!m->tried) {
        m->tried = 1;
        m->info = debuginfo_open(set->names + m->path_at, m->start);
    }
    return m->info;
}

/* One line of /proc/PID/maps, NUL-terminated, into `m` (its path pointing
 * into `line`): 1 for a mapping of a file by path, else 0. */
static int maps_line(const char *line, struct mapping *m)
{
    unsigned long start, stop, offset;
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &stop, &offset, &path_at) < 3 ||
        path_at <= 0 || line[path_at] != '/')
        return 0;
    *m = (struct mapping){start, stop, offset, line + path_at};
    return 1;
}

/* A name the loader was given through a descriptor ("/proc/self/fd/46",
 * "/dev/fd/3": a file checked, then loaded by its descriptor, as the
 * PyTorch tracker is): the descriptor is closed by now and the name leads
 * nowhere, so the file is named as the kernel's maps name it. */
static int through_descriptor(const char *path)
{
    return strncmp(path, "/proc/", 6) == 0 || strncmp(path, "/dev/fd/", 8) == 0;
}

/* The path /proc/self/maps gives the mapping of file offset 0 at `start`,
 * into `out`: 0, or -1 where there is none. Read in pieces, a line at a
 * time: a large program's maps are megabytes. */
static int mapped_path(uintptr_t start, char *out, size_t size)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buffer[8192];
    size_t held = 0;
    int found = -1;
    for (;;) {
        ssize_t n = read(fd, buffer + held, sizeof(buffer) - 1 - held);
        if (n <= 0)
            break;
        held += (size_t)n;
        buffer[held] = '\0';
        char *line = buffer, *eol;
        while (found < 0 && (eol = memchr(line, '\n', held - (size_t)(line - buffer)))) {
            *eol = '\0';
            struct mapping m;
            if (maps_line(line, &m) && m.start == start && m.offset == 0) {
                snprintf(out, size, "%s", m.path);
                char *deleted = strstr(out, " (deleted)");
                if (deleted && !deleted[10])
                    *deleted = '\0';
                found = 0;
            }
            line = eol + 1;
        }
        if (found == 0)
            break;
        held -= (size_t)(line - buffer);
        memmove(buffer, line, held);
        if (held == sizeof(buffer) - 1)
            held = 0; /* a line longer than the buffer: no path of ours */
    }
    close(fd);
    return found;
}

/* One loaded object, for dl_iterate_phdr: its segments' span and where its
 * file offset 0 is (the first segment's address less its offset). The
 * program itself has no name there: its file is /proc/self/exe's. */
static int add_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct module_set *set = data;
    uintptr_t low = UINTPTR_MAX, high = 0, start = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        if (low == UINTPTR_MAX)
            start = info->dlpi_addr + ph->p_vaddr - ph->p_offset;
        if (info->dlpi_addr + ph->p_vaddr < low)
            low = info->dlpi_addr + ph->p_vaddr;
        if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > high)
            high = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
    char program[PATH_MAX];
    const char *path = info->dlpi_name;
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", program, sizeof(program) - 1);
        if (n <= 0)
            return 0;
        program[n] = '\0';
        path = program;
    }
    if (through_descriptor(path) && mapped_path(start, program, sizeof(program)) == 0)
        path = program;
    if (path[0] == '/' && low < high && add_module(set, path, low, high, start) < 0)
        return 1; /* no memory: the modules so far */
    return 0;
}

/* live.set up to date with this process's modules: found again when objects
 * were loaded or unloaded since. */
static void refresh_live(void)
{
    unsigned long long counts[2] = {0, 0};
    dl_iterate_phdr(count_loads, counts);
    if (live.set && counts[0] == live.adds && counts[1] == live.subs)
        return;
    close_modules(live.set);
    log_debug("symbolizer: reading the modules of process %d", (int)getpid());
    live.set = pages_alloc(sizeof(*live.set));
    if (live.set)
        dl_iterate_phdr(add_loaded, live.set);
    live.adds = counts[0];
    live.subs = counts[1];
}

/* A forked child keeps its parent's `live` (the same objects at the same
 * addresses, and what was read of them), unless a symbolizer of the parent
 * was open at the fork: the thread using it is gone, and what it was
 * changing may be half done, so the child starts anew (the old set is left
 * alone: closing it could touch that state). Every change to `live` comes
 * after the count of users went up, so a child that sees none sees `live`
 * whole. */
struct symbolizer *symbolizer_open(void *(*lookup)(void *handle, const char *name))
{
    struct symbolizer *sym = pages_alloc(sizeof(*sym));
    if (!sym)
        return NULL;
    if (live.pid != getpid()) {
        if (__atomic_load_n(&live.users, __ATOMIC_ACQUIRE) != 0) {
            live.set = NULL;
            live.users = 0;
        }
        live.pid = getpid();
    }
    __atomic_add_fetch(&live.users, 1, __ATOMIC_ACQ_REL);
    if (lookup)
        debuginfo_lookup(lookup);
    if (!getenv("CUMEMTRACE_NO_DEBUGINFO")) {
        refresh_live();
        sym->modules = live.set;
    }
    sym->shared = 1;
    sym->demangle = symbol_demangler(lookup, 0);
    return sym;
}

/* Where a file is loaded: the start of its mapping at file offset 0. */
static uintptr_t load_base(const struct symbolizer *sym, const char *path)
{
    for (size_t i = 0; i < sym->map_count; i++)
        if (sym->maps[i].offset == 0 && strcmp(sym->maps[i].path, path) == 0)
            return sym->maps[i].start;
    return 0;
}

static void parse_maps(struct symbolizer *sym, const char *text, size_t length)
{
    size_t lines = 0;
    for (size_t i = 0; i < length; i++)
        lines += text[i] == '\n';
    sym->maps_bytes = (lines + 1) * sizeof(struct mapping);
    sym->maps = pages_alloc(sym->maps_bytes);
    if (!sym->maps)
        return;
    const char *p = text, *end = text + length;
    while (p < end) {
        const char *eol = memchr(p, '\n', end - p);
        if (!eol)
            eol = end;
        char line[4200];
        size_t n = (size_t)(eol - p) < sizeof(line) - 1 ? (size_t)(eol - p) : sizeof(line) - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        struct mapping m;
        if (maps_line(line, &m)) {
            m.path = keep(sym, m.path);
            sym->maps[sym->map_count++] = m;
        }
        p = eol + 1;
    }
}

/* The module of every file the maps load at offset 0, at the start of its
 * first such mapping. */
static struct module_set *maps_modules(const struct symbolizer *sym)
{
    struct module_set *set = pages_alloc(sizeof(*set));
    for (size_t i = 0; set && i < sym->map_count; i++) {
        const struct mapping *m = &sym->maps[i];
        if (m->offset == 0 && load_base(sym, m->path) == m->start &&
            add_module(set, m->path, 0, 0, m->start) < 0) {
            close_modules(set);
            set = NULL;
        }
    }
    return set;
}

struct symbolizer *symbolizer_open_maps(const char *maps, size_t length,
                                        void *(*lookup)(void *handle, const char *name))
{
    struct symbolizer *sym = pages_alloc(sizeof(*sym));
    if (!sym)
        return NULL;
    parse_maps(sym, maps, length);
    if (getenv("CUMEMTRACE_NO_DEBUGINFO") == NULL)
        sym->modules = maps_modules(sym);
    sym->demangle = symbol_demangler(lookup, 1); /* only the command reads dumps */
    return sym;
}

int symbolizer_has_lines(const struct symbolizer *sym)
{
    return sym && sym->modules != NULL;
}

/* The module holding code address `address`: live, by its segments' span;
 * offline, by the mapping that holds it. NULL if none. */
static struct module *module_of(struct symbolizer *sym, uintptr_t address)
{
    struct module_set *set = sym->modules;
    if (!set)
        return NULL;
    if (!sym->maps) {
        for (size_t i = 0; i < set->count; i++)
            if (address >= set->list[i].low && address < set->list[i].high)
                return &set->list[i];
        return NULL;
    }
    for (size_t i = 0; i < sym->map_count; i++) {
        const struct mapping *m = &sym->maps[i];
        if (address < m->start || address >= m->end)
            continue;
        uintptr_t base = load_base(sym, m->path);
        for (size_t j = 0; j < set->count; j++)
            if (set->list[j].start == base &&
                strcmp(set->names + set->list[j].path_at, m->path) == 0)
                return &set->list[j];
        return NULL;
    }
    return NULL;
}

/* out->function from a symbol's `name`: demangled where it can be, with
 * the name as linked kept in out->mangled. */
static void name_function(struct symbolizer *sym, const char *name, struct symbol *out)
{
    char *plain = symbol_demangle(sym->demangle, name);
    out->function = keep(sym, plain ? plain : name);
    out->mangled = plain ? keep(sym, name) : NULL;
    free(plain); /* __cxa_demangle's own malloc */
}

void symbolize(struct symbolizer *sym, uintptr_t address, int call_site, struct symbol *out)
{
    uintptr_t lookup = call_site && address ? address - 1 : address;
    memset(out, 0, sizeof(*out));
    out->address = address;

    Dl_info info;
    if (sym->maps) {
        for (size_t i = 0; i < sym->map_count; i++) {
            const struct mapping *m = &sym->maps[i];
            if (lookup >= m->start && lookup < m->end) {
                out->module = m->path;
                out->module_offset = address - load_base(sym, m->path);
                break;
            }
        }
    } else if (dladdr((void *)lookup, &info) && info.dli_fname) {
        out->module = keep(sym, info.dli_fname[0] ? info.dli_fname : NULL);
        out->module_offset = address - (uintptr_t)info.dli_fbase;
        if (info.dli_sname) {
            name_function(sym, info.dli_sname, out);
            out->function_offset = address - (uintptr_t)info.dli_saddr;
        }
    }
    struct module *m = module_of(sym, lookup);
    if (m && out->module && through_descriptor(out->module))
        out->module = keep(sym, sym->modules->names + m->path_at);
    struct debuginfo *debug = m ? module_info(sym->modules, m) : NULL;
    uintptr_t offset = 0;
    const char *name = debug ? debuginfo_function(debug, lookup, &offset) : NULL;
    if (name) {
        name_function(sym, name, out);
        out->function_offset = offset + (lookup != address ? 1 : 0);
    }
}

void symbolize_line(struct symbolizer *sym, int call_site, struct symbol *out)
{
    uintptr_t lookup = call_site && out->address ? out->address - 1 : out->address;
    struct module *m = sym ? module_of(sym, lookup) : NULL;
    struct debuginfo *debug = m ? module_info(sym->modules, m) : NULL;
    const char *file;
    int number;
    if (debug && debuginfo_line(debug, lookup, &file, &number)) {
        out->file = keep(sym, file);
        out->line = number;
    }
}

void symbolizer_close(struct symbolizer *sym)
{
    if (!sym)
        return;
    if (sym->shared)
        __atomic_sub_fetch(&live.users, 1, __ATOMIC_ACQ_REL);
    else
        close_modules(sym->modules);
    for (int i = 0; i < sym->page_count; i++)
        pages_free(sym->pages[i], sym->page_sizes[i]);
    if (sym->maps)
        pages_free(sym->maps, sym->maps_bytes);
    pages_free(sym, sizeof(*sym));
}
