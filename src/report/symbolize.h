/* symbolize.h - turn return addresses into function, module and file:line.
 *
 * Only ever called while a report is written, never on the allocation path.
 * Names come from the objects' symbol tables and file and line from their
 * DWARF line tables, read by the built-in reader (debuginfo.h), nothing to
 * install; where an object cannot be read, names come from the dynamic
 * symbol table (dladdr). C++ names are demangled when the process has a C++ runtime
 * loaded; the tracer never loads one into the traced program (see
 * symbol_demangler), so names it could not demangle stay mangled in the
 * report, and the command, which loads one, demangles them when it reads the
 * report back. The demangler is found with the `lookup` (dlsym) the
 * symbolizer is opened with; with none, it is not used. */
#ifndef CUMEMTRACE_SYMBOLIZE_H
#define CUMEMTRACE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct symbol {
    uintptr_t address;
    const char *function; /* NULL if unknown; a C++ name demangled where it could be */
    uintptr_t function_offset;
    const char *module; /* path of the object, NULL if unknown */
    uintptr_t module_offset;
    const char *file; /* NULL without debug info */
    int line;
    int python;          /* a Python frame: function, file and line are Python's */
    const char *mangled; /* the C++ name as linked, where `function` is its demangled
                               form; NULL otherwise */
};

struct symbolizer;
struct symbolizer *symbolizer_open(void *(*lookup)(void *handle, const char *name));
/* For another process, after the fact: its /proc/PID/maps as text. Modules
 * are found by path, so the files must still be there. */
struct symbolizer *symbolizer_open_maps(const char *maps, size_t length,
                                        void *(*lookup)(void *handle, const char *name));
/* Module and function of an address, from the symbol tables; no file or
 * line. `call_site`: the address is a return address; look up the call
 * before it. */
void symbolize(struct symbolizer *sym, uintptr_t address, int call_site, struct symbol *out);
/* out's file and line, for a symbol symbolize() filled in: the first in a
 * module reads its whole line table (milliseconds for a large one), so a
 * report asks it only for the frames it shows. */
void symbolize_line(struct symbolizer *sym, int call_site, struct symbol *out);
void symbolizer_close(struct symbolizer *sym);

/* __cxa_demangle's signature. */
typedef char *(*demangler)(const char *name, char *buffer, size_t *length, int *status);
/* The C++ demangler of the runtime this process has loaded (also one loaded
 * privately, as PyTorch's is), found with `lookup`; NULL if there is none.
 * With `may_load`, libstdc++.so.6 is loaded for it where none is: only ever
 * in the command. In a traced program the library loaded would be the one
 * every C++ library it loads afterwards is given, whatever version those need. */
demangler symbol_demangler(void *(*lookup)(void *handle, const char *name), int may_load);
/* `name` demangled by `demangle`, in memory from malloc, if it is a C++
 * name that demangles; NULL otherwise. */
char *symbol_demangle(demangler demangle, const char *name);
int symbolizer_has_lines(const struct symbolizer *sym);

#endif
