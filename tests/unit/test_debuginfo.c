/* test_debuginfo.c - the built-in reader (debuginfo.c) names the functions
 * and gives the file:line that libdw gives, at every code address of the
 * objects named on the command line and of the C library (their
 * executable segments, byte by
 * byte, up to 64 KiB each; a larger one, and the C library at 4096
 * places, stepped through evenly), lines
 * where a function holds the address (a return address always lies in
 * one; in the padding between two, libdw, which finds a unit by its
 * ranges, may give none where the line table still has a row). Where
 * libdw.so.1 is not installed there is nothing to compare with: skipped
 * (77), tests/integration/test_symbols.py checks the names and lines
 * themselves. */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "debuginfo.h"

/* libdw's offline reporting, declared as elfutils' libdwfl.h does. */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
    void *find_elf, *find_debuginfo, *section_address;
    char **debuginfo_path;
} Dwfl_Callbacks;
static struct {
    Dwfl *(*begin)(const Dwfl_Callbacks *);
    Dwfl_Module *(*report_offline)(Dwfl *, const char *, const char *, int);
    int (*report_end)(Dwfl *, void *, void *);
    void *(*module_getelf)(Dwfl_Module *, uintptr_t *);
    const char *(*module_addrinfo)(Dwfl_Module *, uintptr_t, uintptr_t *, Elf64_Sym *, void *,
                                   void *, void *);
    Dwfl_Line *(*module_getsrc)(Dwfl_Module *, uintptr_t);
    const char *(*lineinfo)(Dwfl_Line *, uintptr_t *, int *, int *, int *, int *);
    void (*end)(Dwfl *);
    Dwfl_Callbacks callbacks;
} dw;

static int load_libdw(void)
{
    void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    *(void **)&dw.begin = dlsym(h, "dwfl_begin");
    *(void **)&dw.report_offline = dlsym(h, "dwfl_report_offline");
    *(void **)&dw.report_end = dlsym(h, "dwfl_report_end");
    *(void **)&dw.module_getelf = dlsym(h, "dwfl_module_getelf");
    *(void **)&dw.module_addrinfo = dlsym(h, "dwfl_module_addrinfo");
    *(void **)&dw.module_getsrc = dlsym(h, "dwfl_module_getsrc");
    *(void **)&dw.lineinfo = dlsym(h, "dwfl_lineinfo");
    *(void **)&dw.end = dlsym(h, "dwfl_end");
    dw.callbacks.find_elf = dlsym(h, "dwfl_build_id_find_elf");
    dw.callbacks.find_debuginfo = dlsym(h, "dwfl_standard_find_debuginfo");
    dw.callbacks.section_address = dlsym(h, "dwfl_offline_section_address");
    return dw.begin && dw.report_offline && dw.module_addrinfo && dw.lineinfo ? 0 : -1;
}

/* The link-time span of the object's first executable segment. */
static int code_span(const char *path, uint64_t *low, uint64_t *high)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)map;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(map + e->e_phoff);
    int found = -1;
    for (int i = 0; i < e->e_phnum && found < 0; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
            *low = ph[i].p_vaddr;
            *high = ph[i].p_vaddr + ph[i].p_filesz;
            found = 0;
        }
    munmap((void *)map, (size_t)st.st_size);
    return found;
}

static int same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void compare(const char *path, uint64_t samples)
{
    uint64_t low = 0, high = 0;
    CHECK(code_span(path, &low, &high) == 0);
    Dwfl *dwfl = dw.begin(&dw.callbacks);
    Dwfl_Module *module = dwfl ? dw.report_offline(dwfl, path, path, -1) : NULL;
    CHECK(module != NULL && dw.report_end(dwfl, NULL, NULL) == 0);
    uintptr_t bias = 0;
    CHECK(dw.module_getelf(module, &bias) != NULL);
    /* Loaded where libdw placed it: file offset 0 at its bias (both are
     * ELF files whose first segment starts at offset 0). */
    struct debuginfo *d = debuginfo_open(path, bias);
    CHECK(d != NULL);
    if (!d || !module)
        return;
    uint64_t step = (high - low) / samples + 1;
    int names = 0, lines = 0, differ = 0;
    for (uint64_t at = low; at < high; at += step) {
        uintptr_t address = at + bias, ours_offset = 0, their_offset = 0;
        Elf64_Sym sym;
        const char *theirs =
            dw.module_addrinfo(module, address, &their_offset, &sym, NULL, NULL, NULL);
        const char *ours = debuginfo_function(d, address, &ours_offset);
        int same = same_text(ours, theirs) && (!ours || ours_offset == their_offset);
        names += theirs != NULL;
        Dwfl_Line *line = dw.module_getsrc(module, address);
        uintptr_t line_address;
        int their_line = 0, our_line = 0;
        const char *their_file =
            line ? dw.lineinfo(line, &line_address, &their_line, NULL, NULL, NULL) : NULL;
        const char *our_file = NULL;
        if (!debuginfo_line(d, address, &our_file, &our_line))
            our_file = NULL;
        if (theirs)
            same &= same_text(our_file, their_file) && our_line == their_line;
        lines += their_file != NULL;
        if (!same && differ++ < 5)
            fprintf(stderr, "%s+%#lx: ours %s+%#lx %s:%d, libdw's %s+%#lx %s:%d\n", path,
                    (unsigned long)at, ours ? ours : "-", (unsigned long)ours_offset,
                    our_file ? our_file : "-", our_line, theirs ? theirs : "-",
                    (unsigned long)their_offset, their_file ? their_file : "-", their_line);
    }
    printf("%s: %d addresses named, %d with lines, %d different\n", path, names, lines, differ);
    CHECK(names > 0);
    CHECK_EQ(differ, 0);
    debuginfo_close(d);
    dw.end(dwfl);
}

int main(int argc, char **argv)
{
    if (load_libdw() < 0) {
        printf("test_debuginfo: skipped: no libdw.so.1 to compare with\n");
        return 77;
    }
    for (int i = 1; i < argc; i++)
        compare(argv[i], 65536);
    /* And the C library, whose names and lines, where its debug package is
     * installed, are in a separate file found by build id. */
    Dl_info libc; /* by a function no sanitizer's runtime stands in for */
    if (dladdr((void *)gnu_get_libc_version, &libc) && libc.dli_fname && libc.dli_fname[0] == '/')
        compare(libc.dli_fname, 4096);
    /* A file that is not ELF, or not there, is no module. */
    struct debuginfo *self = debuginfo_open(argv[0], 0);
    CHECK(self != NULL);
    debuginfo_close(self);
    CHECK(debuginfo_open("/dev/null", 0) == NULL);
    CHECK(debuginfo_open("/nonexistent/x", 0) == NULL);
    return check_done("test_debuginfo");
}
