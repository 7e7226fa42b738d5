/* debuginfo.h - function names and file:line of code addresses, read from
 * an object file's own ELF symbol tables and DWARF line table, for
 * symbolize.c.
 *
 * Built in, so that names and lines need nothing installed: no libdw, no
 * libelf. It reads what a report shows of a native frame and no more: the
 * function containing an address (.symtab, else .dynsym: a stripped library
 * still names its exported functions) and the line table's row for it
 * (.debug_line, DWARF 2 to 5), file as the line table names it, joined
 * with its directory (before DWARF 5, directory 0 is the unit's
 * compilation directory, read from its DIE in .debug_info). No inline frames, no DIEs: a frame inlined into its
 * caller is named by its caller's symbol, and its line is the inlined
 * code's, as the line table says (what libdw's dwfl_module_getsrc gave).
 * Debug sections compressed with zlib (SHF_COMPRESSED, ELFCOMPRESS_ZLIB)
 * are inflated with the system's libz.so.1, loaded with dlopen when one is
 * first met; without it, or compressed otherwise (zstd), they are not read.
 * Where the object has no line table, or no .symtab, its separate debug file
 * is looked for: by build id under /usr/lib/debug/.build-id, then by
 * .gnu_debuglink beside the object, in its .debug/, and under
 * /usr/lib/debug; regular files only.
 *
 * Every file is mapped read-only and checked before each read: a truncated
 * or hostile file gives no name or no line, never a read outside it.
 * Memory is the tracer's own (arena.h), never the program's malloc, but
 * for the C library's qsort. Not thread-safe: one report at a time. */
#ifndef CUMEMTRACE_DEBUGINFO_H
#define CUMEMTRACE_DEBUGINFO_H

#include <stdint.h>

struct debuginfo;

/* How libz's functions are looked up (dlsym's signature): in the traced
 * process, the tracer's look-up past its own dlsym; unset, dlsym. */
void debuginfo_lookup(void *(*lookup)(void *handle, const char *name));

/* The object at `path` (a regular file), loaded with its file offset 0 at
 * address `start`; NULL when it cannot be read as a 64-bit little-endian
 * ELF file of this machine's kind. */
struct debuginfo *debuginfo_open(const char *path, uintptr_t start);

/* The symbol containing code address `address` (as loaded): its name as
 * linked, and *offset, address less the symbol's start. NULL when no symbol
 * holds it. The name lives until debuginfo_close. */
const char *debuginfo_function(struct debuginfo *d, uintptr_t address, uintptr_t *offset);

/* The line table's source file and line of code address `address`: 1, or
 * 0 when there is none. The line table is read at the first call (once an
 * object), not before. *file lives until the next call on `d`. */
int debuginfo_line(struct debuginfo *d, uintptr_t address, const char **file, int *line);

void debuginfo_close(struct debuginfo *d);

#endif
