/* fuzz_live.c - libFuzzer target: what `cumemtrace live PID` reads from its
 * peer (src/report/live_format.h), read and shown as `live --once` shows
 * it. The peer is the traced process, or whoever holds its name: anything
 * it sends must be safe to read and show. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("CUMEMTRACE_NO_DEBUGINFO", "1", 1); /* frames named from the maps, no file opened */
    sink = fopen("/dev/null", "w");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text || !sink) {
        free(text);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    live_show_answer(text, size, sink);
    free(text);
    return 0;
}
