/* symbolize.c - addresses to names at report time (see symbolize.h).
 *
 * Strings handed out live until symbolizer_close(): they are copied into the
 * symbolizer's own string pages.
 *
 * This process's modules, as libdw has read them (symbol tables, line
 * tables), are kept from one report to the next: reading them again costs
 * tens of milliseconds a report (an OOM report each time, with
 * CUMEMTRACE_OOM=every). They are read again only when the set of loaded
 * objects changed (dl_iterate_phdr's counts of loads and unloads) or in a
 * forked child. libdw itself, once loaded, is never unloaded: a dlclose
 * runs its destructors under the C library's exit-functions lock, which a
 * fork at that moment would leave held in the child for ever.
 *
 * The descriptors libdw keeps open on them are the tracer's, not the
 * program's: each is moved above the program's range, close-on-exec, as it
 * is handed to libdw (an exec'd image or a child never inherits one), and
 * its identity is kept. libdw closes them by number when the modules are
 * read again, so that is done only while every one is still the file it
 * was: a program that closed them and opened its own files at those
 * numbers (a daemon that tidies its descriptors) would lose its files
 * otherwise; the old modules are then let go unended, their descriptors
 * left to the program. A program left with only a few descriptors keeps
 * them: libdw gets none (and the report's files the ones there are).
 *
 * Another process's modules (a dump) are opened by us, by path, only when
 * they are regular files (a FIFO named there would block the command for
 * ever), and handed to libdw as descriptors; separate debug information is
 * looked for by build id under /usr/lib/debug, and by .gnu_debuglink beside
 * the module, again regular files only. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "log.h"
#include "output.h"
#include "symbolize.h"

/* The few libdw entry points we use, resolved with the lookup (dlsym) the
 * symbolizer was opened with. The types are
 * opaque to us; the signatures match elfutils' libdwfl.h. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
    void *find_elf;
    void *find_debuginfo;
    void *section_address;
    char **debuginfo_path;
} Dwfl_Callbacks;

struct libdw {
    void *handle;
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    void (*end)(Dwfl *);
    int (*linux_proc_report)(Dwfl *, pid_t);
    int (*report_end)(Dwfl *, void *, void *);
    Dwfl_Module *(*addrmodule)(Dwfl *, uintptr_t);
    void (*report_begin)(Dwfl *);
    Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, uintptr_t, _Bool);
    const char *(*module_addrinfo)(Dwfl_Module *, uintptr_t, uintptr_t *, Elf64_Sym *,
                                   void *, void *, void *);
    Dwfl_Line *(*module_getsrc)(Dwfl_Module *, uintptr_t);
    const char *(*lineinfo)(Dwfl_Line *, uintptr_t *, int *, int *, int *, int *);
    Dwfl_Callbacks callbacks;
    Dwfl_Callbacks offline;         /* for another process's modules */
};

typedef int find_debuginfo_fn(Dwfl_Module *, void **, const char *, uint64_t, const char *,
                              const char *, uint32_t, char **);
typedef int find_elf_fn(Dwfl_Module *, void **, const char *, uint64_t, char **, void **);
static find_debuginfo_fn *build_id_find_debuginfo;

/* This process's modules as libdw read them, kept between reports, and by a
 * forked child, whose address space is its parent's. */
static struct {
    int tried;                      /* libdw looked for */
    struct libdw dw;                /* handle NULL: not there */
    Dwfl *dwfl;
    pid_t pid;                      /* the process that uses dwfl */
    unsigned long long adds, subs;  /* loads and unloads when it was read */
    int users;                      /* symbolizers open on dwfl (atomic) */
    find_elf_fn *find_elf;          /* libdw's, behind live_find_elf */
    find_debuginfo_fn *find_debuginfo;  /* behind live_find_debuginfo */
    struct held {                   /* the descriptors libdw holds for dwfl */
        int fd;
        dev_t device;
        ino_t inode;
    } held[512];
    unsigned held_count;            /* atomic; past the table: not checkable */
} live;

/* One line of /proc/PID/maps, for symbolizing a process that is gone. */
struct mapping {
    uintptr_t start, end, offset;
    const char *path;
};

struct symbolizer {
    struct libdw dw;
    int shared;                /* dwfl is live's, not ours to end */
    struct mapping *maps;      /* offline only */
    size_t map_count, maps_bytes;
    Dwfl *dwfl;
    demangler demangle;
    char *strings;
    size_t strings_used, strings_size;
    char *pages[48];        /* every string page, released at close */
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

/* libdw's find_debuginfo callback for another process's modules: by build
 * id (only under the absolute directories of libdw's debug path,
 * /usr/lib/debug), else the .gnu_debuglink name beside the module, in its
 * .debug/, or under /usr/lib/debug; regular files only. */
static int find_regular_debuginfo(Dwfl_Module *module, void **userdata, const char *name,
                                  uint64_t base, const char *file, const char *debuglink,
                                  uint32_t crc, char **found)
{
    int fd = build_id_find_debuginfo ? build_id_find_debuginfo(module, userdata, name, base,
                                                               file, debuglink, crc, found)
                                     : -1;
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (fd >= 0 || !slash || !debuglink || strchr(debuglink, '/'))
        return fd;
    int dir = (int)(slash - file);
    const char *places[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
    for (unsigned i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
        char path[4200];
        if (snprintf(path, sizeof(path), places[i], dir, file, debuglink) >= (int)sizeof(path) ||
            strcmp(path, file) == 0)
            continue;
        fd = output_open_regular(path, 0);
        if (fd >= 0) {
            *found = strdup(path);      /* libdw frees it */
            return fd;
        }
    }
    return -1;
}

static int load_libdw(struct libdw *dw, void *(*lookup)(void *, const char *))
{
    if (!lookup)
        return -1;
    dw->handle = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!dw->handle) {
        static int said;    /* once a process: what it does without */
        const char *why = dlerror();
        int full = why && strstr(why, "Too many open files");  /* there, but no descriptor */
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            log_line("cannot load libdw.so.1 (%s); native frames are named by function and "
                     "module+offset, without file and line%s",
                     full ? "no descriptor free" : "elfutils", full ? "" : " (install libdw1)");
        return -1;
    }
    void *find_elf = lookup(dw->handle, "dwfl_linux_proc_find_elf");
    void *find_debuginfo = lookup(dw->handle, "dwfl_standard_find_debuginfo");
    *(void **)&dw->begin = lookup(dw->handle, "dwfl_begin");
    *(void **)&dw->end = lookup(dw->handle, "dwfl_end");
    *(void **)&dw->linux_proc_report = lookup(dw->handle, "dwfl_linux_proc_report");
    *(void **)&dw->report_end = lookup(dw->handle, "dwfl_report_end");
    *(void **)&dw->addrmodule = lookup(dw->handle, "dwfl_addrmodule");
    *(void **)&dw->report_begin = lookup(dw->handle, "dwfl_report_begin");
    *(void **)&dw->report_elf = lookup(dw->handle, "dwfl_report_elf");
    *(void **)&dw->module_addrinfo = lookup(dw->handle, "dwfl_module_addrinfo");
    *(void **)&dw->module_getsrc = lookup(dw->handle, "dwfl_module_getsrc");
    *(void **)&dw->lineinfo = lookup(dw->handle, "dwfl_lineinfo");
    if (!find_elf || !find_debuginfo || !dw->begin || !dw->end || !dw->linux_proc_report ||
        !dw->report_end || !dw->addrmodule || !dw->module_addrinfo || !dw->module_getsrc ||
        !dw->lineinfo || !dw->report_begin || !dw->report_elf) {
        dlclose(dw->handle);
        dw->handle = NULL;
        return -1;
    }
    dw->callbacks.find_elf = find_elf;
    dw->callbacks.find_debuginfo = find_debuginfo;
    dw->callbacks.section_address = lookup(dw->handle, "dwfl_offline_section_address");
    dw->offline = dw->callbacks;
    dw->offline.find_debuginfo = (void *)find_regular_debuginfo;
    *(void **)&build_id_find_debuginfo = lookup(dw->handle, "dwfl_build_id_find_debuginfo");
    return 0;
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
 * library loaded for the command (`may_load`) stays loaded, as libdw does. */
demangler symbol_demangler(void *(*lookup)(void *, const char *), int may_load)
{
    void *function = lookup ? lookup(RTLD_DEFAULT, "__cxa_demangle") : NULL;
    void *libstdcxx = NULL;
    if (lookup && !function && dl_iterate_phdr(find_libstdcxx, &libstdcxx) && libstdcxx)
        function = lookup(libstdcxx, "__cxa_demangle");
    if (lookup && !function && may_load && (libstdcxx = dlopen("libstdc++.so.6",
                                                               RTLD_LAZY | RTLD_LOCAL)))
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
    return 1;               /* the counts are the same in every entry */
}

/* Whether DEBUGINFOD_URLS names a server: only then is libdw's standard
 * search, which loads the debuginfod client (libcurl and some thirty
 * libraries, tens of milliseconds) before it looks at the variable, used
 * for this process's modules. */
static int debuginfod_wanted(void)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    return urls && urls[strspn(urls, " ")] != '\0';
}

/* `fd`, just opened for libdw, made the tracer's: above the program's
 * range and close-on-exec, its identity kept. The descriptor to hand on. */
static int live_hold(int fd)
{
    if (fd < 0)
        return fd;
    fd = log_move_high(fd);
    fcntl(fd, F_SETFD, FD_CLOEXEC);     /* where nothing was free up there */
    unsigned at = __atomic_fetch_add(&live.held_count, 1, __ATOMIC_RELAXED);
    struct stat st;
    if (at < sizeof(live.held) / sizeof(live.held[0]) && fstat(fd, &st) == 0)
        live.held[at] = (struct held){fd, st.st_dev, st.st_ino};
    else if (at < sizeof(live.held) / sizeof(live.held[0]))
        live.held[at].fd = -1;          /* unknown: never matches */
    return fd;
}

/* Whether every descriptor libdw holds for live.dwfl is still the file
 * handed to it, or closed (libdw closes a debug file it finds unusable):
 * only then may libdw close them. */
static int live_held_intact(void)
{
    unsigned count = __atomic_load_n(&live.held_count, __ATOMIC_RELAXED);
    if (count > sizeof(live.held) / sizeof(live.held[0]))
        return 0;
    for (unsigned i = 0; i < count; i++) {
        struct stat st;
        if (live.held[i].fd < 0)
            return 0;
        if (fstat(live.held[i].fd, &st) < 0 ? errno != EBADF
                                            : st.st_dev != live.held[i].device ||
                                                  st.st_ino != live.held[i].inode)
            return 0;
    }
    return 1;
}

/* Below this many free descriptors libdw opens no module: names come from
 * the dynamic symbol tables, and the report's own files can be made. */
#define SYMBOLIZER_SPARE 8

/* libdw's find_elf for this process: a module named by path is opened by
 * us, regular files only and close-on-exec from the start; the rest (the
 * vDSO, a deleted file, read from memory) by libdw. */
static int live_find_elf(Dwfl_Module *module, void **userdata, const char *name,
                         uint64_t base, char **file_name, void **elf)
{
    if (!log_descriptors_spare(SYMBOLIZER_SPARE))
        return -1;
    if (name && name[0] == '/') {
        int fd = output_open_regular(name, 0);
        char *copy = fd >= 0 ? strdup(name) : NULL;     /* libdw frees it */
        if (copy) {
            *file_name = copy;
            return live_hold(fd);
        }
        if (fd >= 0)
            close(fd);
    }
    return live_hold(live.find_elf(module, userdata, name, base, file_name, elf));
}

static int live_find_debuginfo(Dwfl_Module *module, void **userdata, const char *name,
                               uint64_t base, const char *file, const char *debuglink,
                               uint32_t crc, char **found)
{
    if (!log_descriptors_spare(SYMBOLIZER_SPARE))
        return -1;
    return live_hold(live.find_debuginfo(module, userdata, name, base, file, debuglink, crc,
                                         found));
}

/* live.dwfl ended, where libdw's descriptors are all still ours (above);
 * otherwise let go as it is. */
static void end_live(void)
{
    if (live_held_intact())
        live.dw.end(live.dwfl);
    else
        log_debug("symbolizer: the program reused a descriptor libdw held; the modules read "
                  "before are let go without closing it");
    live.dwfl = NULL;
    __atomic_store_n(&live.held_count, 0, __ATOMIC_RELAXED);
}

/* live.dwfl up to date with this process's modules: read again when objects
 * were loaded or unloaded since. */
static void refresh_live(void *(*lookup)(void *, const char *))
{
    if (!live.tried) {
        live.tried = 1;
        if (getenv("CUMEMTRACE_NO_LIBDW") || load_libdw(&live.dw, lookup) < 0) {
            live.dw.handle = NULL;
        } else {
            *(void **)&live.find_elf = live.dw.callbacks.find_elf;
            *(void **)&live.find_debuginfo = debuginfod_wanted()
                                                 ? live.dw.callbacks.find_debuginfo
                                                 : (void *)find_regular_debuginfo;
            live.dw.callbacks.find_elf = (void *)live_find_elf;
            live.dw.callbacks.find_debuginfo = (void *)live_find_debuginfo;
        }
    }
    if (!live.dw.handle)
        return;
    unsigned long long counts[2] = {0, 0};
    dl_iterate_phdr(count_loads, counts);
    if (live.dwfl && counts[0] == live.adds && counts[1] == live.subs)
        return;
    if (live.dwfl)
        end_live();
    log_debug("symbolizer: reading the modules of process %d", (int)getpid());
    live.dwfl = live.dw.begin(&live.dw.callbacks);
    if (live.dwfl && (live.dw.linux_proc_report(live.dwfl, getpid()) != 0 ||
                      live.dw.report_end(live.dwfl, NULL, NULL) != 0))
        end_live();
    live.adds = counts[0];
    live.subs = counts[1];
}

/* A forked child keeps its parent's `live` (the same objects at the same
 * addresses, and what libdw read of them), unless a symbolizer of the
 * parent was open at the fork: the thread using it is gone, and what it
 * was changing may be half done, so the child starts anew (the old one is
 * left alone: ending it could touch that state; libdw stays loaded). Every
 * change to `live` comes after the count of users went up, so a child that
 * sees none sees `live` whole. */
struct symbolizer *symbolizer_open(void *(*lookup)(void *handle, const char *name))
{
    struct symbolizer *sym = pages_alloc(sizeof(*sym));
    if (!sym)
        return NULL;
    if (live.pid != getpid()) {
        if (__atomic_load_n(&live.users, __ATOMIC_ACQUIRE) != 0) {
            live.tried = 0;
            live.dwfl = NULL;
            live.users = 0;
            live.held_count = 0;
        }
        live.pid = getpid();
    }
    __atomic_add_fetch(&live.users, 1, __ATOMIC_ACQ_REL);
    refresh_live(lookup);
    sym->dw = live.dw;
    sym->dwfl = live.dwfl;
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
        unsigned long start, stop, offset;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &start, &stop, &offset, &path_at) >= 3 &&
            path_at > 0 && line[path_at] == '/') {
            struct mapping *m = &sym->maps[sym->map_count++];
            m->start = start;
            m->end = stop;
            m->offset = offset;
            m->path = keep(sym, line + path_at);
        }
        p = eol + 1;
    }
}

struct symbolizer *symbolizer_open_maps(const char *maps, size_t length,
                                        void *(*lookup)(void *handle, const char *name))
{
    struct symbolizer *sym = pages_alloc(sizeof(*sym));
    if (!sym)
        return NULL;
    parse_maps(sym, maps, length);
    if (getenv("CUMEMTRACE_NO_LIBDW") == NULL && load_libdw(&sym->dw, lookup) == 0 &&
        sym->dw.callbacks.section_address) {
        sym->dwfl = sym->dw.begin(&sym->dw.offline);
        if (sym->dwfl) {
            sym->dw.report_begin(sym->dwfl);
            for (size_t i = 0; i < sym->map_count; i++) {
                const struct mapping *m = &sym->maps[i];
                if (m->offset != 0 || load_base(sym, m->path) != m->start)
                    continue;
                int fd = output_open_regular(m->path, 0);     /* libdw owns it from here */
                if (fd >= 0 && !sym->dw.report_elf(sym->dwfl, m->path, m->path, fd, m->start, 0))
                    close(fd);
            }
            if (sym->dw.report_end(sym->dwfl, NULL, NULL) != 0) {
                sym->dw.end(sym->dwfl);
                sym->dwfl = NULL;
            }
        }
    }
    sym->demangle = symbol_demangler(lookup, 1);    /* only the command reads dumps */
    return sym;
}

int symbolizer_has_lines(const struct symbolizer *sym)
{
    return sym && sym->dwfl != NULL;
}

/* out->function from a symbol's `name`: demangled where it can be, with
 * the name as linked kept in out->mangled. */
static void name_function(struct symbolizer *sym, const char *name, struct symbol *out)
{
    char *plain = symbol_demangle(sym->demangle, name);
    out->function = keep(sym, plain ? plain : name);
    out->mangled = plain ? keep(sym, name) : NULL;
    free(plain);            /* __cxa_demangle's own malloc */
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
    if (!sym->dwfl)
        return;
    Dwfl_Module *module = sym->dw.addrmodule(sym->dwfl, lookup);
    if (!module)
        return;
    uintptr_t offset = 0;
    Elf64_Sym symbol;
    const char *name = sym->dw.module_addrinfo(module, lookup, &offset, &symbol, NULL, NULL, NULL);
    if (name) {
        name_function(sym, name, out);
        out->function_offset = offset + (lookup != address ? 1 : 0);
    }
}

void symbolize_line(struct symbolizer *sym, int call_site, struct symbol *out)
{
    uintptr_t lookup = call_site && out->address ? out->address - 1 : out->address;
    Dwfl_Module *module = sym && sym->dwfl ? sym->dw.addrmodule(sym->dwfl, lookup) : NULL;
    Dwfl_Line *line = module ? sym->dw.module_getsrc(module, lookup) : NULL;
    if (!line)
        return;
    uintptr_t line_address;
    int number = 0;
    const char *file = sym->dw.lineinfo(line, &line_address, &number, NULL, NULL, NULL);
    if (file) {
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
    if (sym->dwfl && !sym->shared)
        sym->dw.end(sym->dwfl);
    if (sym->dw.handle && !sym->shared)
        dlclose(sym->dw.handle);
    for (int i = 0; i < sym->page_count; i++)
        pages_free(sym->pages[i], sym->page_sizes[i]);
    if (sym->maps)
        pages_free(sym->maps, sym->maps_bytes);
    pages_free(sym, sizeof(*sym));
}
