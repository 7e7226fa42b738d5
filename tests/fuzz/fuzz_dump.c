/* fuzz_dump.c - libFuzzer target: a crash dump parsed by dump_parse() and
 * symbolized against the names in its maps (debug information off: no file is opened),
 * then written as text, JSON and the exports, as `cumemtrace symbolize`,
 * `html` and `export` do. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "dump_read.h"

static int sink = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("CUMEMTRACE_NO_DEBUGINFO", "1", 1);
    sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct report *r = calloc(1, sizeof(*r));
    if (!r)
        return 0;
    struct report_options options;
    report_options_of(&config, &options);
    if (dump_parse(r, &options, (const char *)data, size) == 0) {
        struct out *out = malloc(sizeof(*out));
        if (out) {
            out_fd(out, sink);
            for (int format = 0; format < FORMAT_COUNT; format++)
                report_write_format(r, format, out);
            report_summary(r, NULL, out);
            out_flush(out);
            free(out);
        }
    }
    report_release(r);
    free(r);
    return 0;
}
