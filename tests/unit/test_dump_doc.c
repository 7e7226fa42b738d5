/* test_dump_doc.c - docs/DUMP.md describes exactly the records the dump has.
 *
 * The first cell of each row of the doc's format table names records in
 * backquotes (`pid`, `ppid`; `maps` ... `end-maps`; `cumemtrace-dump 1`, a
 * name and its version). Together they must be the names of DUMP_RECORDS
 * (records.h), each once: a record added to the dump, or renamed, without
 * the doc is a failure here. Usage: test_dump_doc docs/DUMP.md */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "records.h"

static int documented[DUMP_RECORD_COUNT];
static int unknown;

/* Every `name ...` in a row's first cell. */
static void read_row(const char *row)
{
    const char *end = strchr(row + 1, '|');
    for (const char *p = strchr(row, '`'); p && end && p < end; p = strchr(p, '`')) {
        const char *close = strchr(p + 1, '`');
        if (!close)
            return;
        char name[64];
        size_t n = strcspn(p + 1, " `");
        snprintf(name, sizeof(name), "%.*s", (int)n, p + 1);
        int record = dump_record_of(name);
        if (record < 0) {
            fprintf(stderr, "docs/DUMP.md names a record the dump does not have: %s\n", name);
            unknown++;
        } else {
            documented[record]++;
        }
        p = close + 1;
    }
}

int main(int argc, char **argv)
{
    FILE *doc = argc > 1 ? fopen(argv[1], "r") : NULL;
    CHECK(doc != NULL);
    if (!doc)
        return check_done("test_dump_doc");
    char line[4096];
    int in_table = 0;
    while (fgets(line, sizeof(line), doc)) {
        if (strncmp(line, "| record |", 10) == 0)
            in_table = 1;
        else if (in_table && strncmp(line, "| `", 3) == 0)
            read_row(line);
        else if (in_table && line[0] != '|')
            in_table = 0;
    }
    fclose(doc);
    CHECK_EQ(unknown, 0);
    for (int record = 0; record < DUMP_RECORD_COUNT; record++) {
        if (documented[record] != 1)
            fprintf(stderr, "docs/DUMP.md lists the record %s %d times\n",
                    dump_record_names[record], documented[record]);
        CHECK_EQ(documented[record], 1);
    }
    return check_done("test_dump_doc");
}
