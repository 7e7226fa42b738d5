/* python_locations.h - the table of the Python locations (file, function,
 * line) that stacks name by id (PYTHON_FRAME_TAG | id, python.h), and the
 * keys that find them: (code, instruction offset) for the walk of a thread's
 * frames, (code, LOCATIONS_LINE | line) for the C API and to share one
 * location among the offsets of a line. Ids start at 1 and never change;
 * locations and their strings never move, so a reader holds a location
 * without a lock.
 *
 * Not thread-safe: the walker (python.c) calls every function but
 * locations_count and locations_at with its lock held. */
#ifndef CUMEMTRACE_PYTHON_LOCATIONS_H
#define CUMEMTRACE_PYTHON_LOCATIONS_H

#include <stddef.h>
#include <stdint.h>

#include "python.h"

/* A key's kind: a line, not an instruction offset. */
#define LOCATIONS_LINE (1ll << 40)

/* The id of the location of (code, check, version, key); 0 if not known. */
uint32_t locations_known(uintptr_t code, uintptr_t check, uint32_t version, int64_t key);
/* Room for two more keys and one more location; -1 when out of memory. */
int locations_reserve(void);
/* A new location; its id. After locations_reserve. */
uint32_t locations_new(const char *file, const char *function, int line);
/* (code, check, version, key) stands for location `id`, which it returns.
 * After locations_reserve; the key is not known yet. */
uint32_t locations_enter(uintptr_t code, uintptr_t check, uint32_t version, int64_t key,
                         uint32_t id);
/* A copy of s[0..length) that never moves, NUL-terminated; "?" when out of
 * memory. */
const char *locations_keep(const char *s, size_t length);
/* How many locations there are; location `id` (NULL if none). */
uint32_t locations_count(void);
const struct python_location *locations_at(uint32_t id);

#endif
