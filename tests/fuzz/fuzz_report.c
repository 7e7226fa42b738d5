/* fuzz_report.c - libFuzzer target: a JSON report (or a dump: the first
 * bytes decide, as for the command) read back by report_load_text(), then
 * written as text and JSON, as `cumemtrace report` does. Anything the
 * loader accepts must be safe to write. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "report_load.h"

static int sink = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("CUMEMTRACE_NO_DEBUGINFO", "1", 1); /* a dump's maps: names only, no file opened */
    sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct loaded_report *loaded = malloc(sizeof(*loaded));
    char error[512];
    struct report_options options;
    report_options_of(&config, &options);
    if (loaded && report_load_text(text, size, &options, loaded, error, sizeof(error)) == 0) {
        struct out *out = malloc(sizeof(*out));
        if (out) {
            out_fd(out, sink);
            report_text(&loaded->report, out);
            report_summary(&loaded->report, NULL, out);
            report_json(&loaded->report, out);
            out_flush(out);
            free(out);
        }
    }
    if (loaded)
        report_unload(loaded);
    free(loaded);
    free(text);
    return 0;
}
