/* test_settings_doc.c - the README's table of settings is settings.def.
 *
 * The table (from its "| variable | default | meaning |" line to the first
 * line that is not a row) must be, byte for byte, what the rows of
 * settings.def make: a setting added, renamed or given another default without
 * the README, or the other way round, is a failure here.
 *
 *   test_settings_doc README.md           check
 *   test_settings_doc --write README.md   put the table made from settings.def in */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"

static const char header[] = "| variable | default | meaning |\n";

/* The table as the rows make it, in `text` (room for `size`). */
static void make_table(char *text, size_t size)
{
    size_t used = (size_t)snprintf(text, size, "%s|---|---|---|\n", header);
#define SETTING(field, NAME, type, min, max, initial, shown, short_, option, argument, help, doc)  \
    if (used < size)                                                                               \
        used += (size_t)snprintf(text + used, size - used,                                         \
                                 "| `CUMEMTRACE_" #NAME "` | %s | %s |\n", shown, doc);
#include "settings.def"
#undef SETTING
}

int main(int argc, char **argv)
{
    int write = argc > 2 && strcmp(argv[1], "--write") == 0;
    const char *path = argv[argc - 1];
    FILE *file = argc > 1 ? fopen(path, "r") : NULL;
    CHECK(file != NULL);
    if (!file)
        return check_done("test_settings_doc");
    static char readme[1 << 20], table[1 << 16];
    size_t length = fread(readme, 1, sizeof(readme) - 1, file);
    fclose(file);
    readme[length] = '\0';
    make_table(table, sizeof(table));

    char *start = strstr(readme, header), *end = start;
    CHECK(start != NULL);
    if (!start)
        return check_done("test_settings_doc");
    while (*end == '|')
        end = strchr(end, '\n') ? strchr(end, '\n') + 1 : end + strlen(end);
    size_t n = (size_t)(end - start);
    if (write) {
        file = fopen(path, "w");
        CHECK(file != NULL);
        if (file) {
            fwrite(readme, 1, (size_t)(start - readme), file);
            fputs(table, file);
            fputs(end, file);
            CHECK(fclose(file) == 0);
        }
        return check_done("test_settings_doc");
    }
    int same = n == strlen(table) && memcmp(start, table, n) == 0;
    if (!same)
        fprintf(stderr,
                "%s: the table of settings is not settings.def's; "
                "test_settings_doc --write %s puts it in. It should be:\n%s",
                path, path, table);
    CHECK(same);
    return check_done("test_settings_doc");
}
