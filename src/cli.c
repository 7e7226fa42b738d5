/* cli.c - the cumemtrace command.
 *
 *   cumemtrace run [options] -- COMMAND [ARGS...]   trace a command
 *   cumemtrace symbolize DUMP [options]             turn a crash dump into reports
 *
 * Exit status: `run` becomes the command (its status is the command's; 127 if
 * it cannot be started); otherwise 0 on success, 1 for a usage error, 2 when
 * an input cannot be read or an output cannot be written. Errors are one line
 * on stderr. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "dump_read.h"
#include "output.h"
#include "report.h"

static const char usage[] =
    "usage: cumemtrace run [--output TEMPLATE] [--format LIST] [--depth N] [--quiet]\n"
    "                      [--signal SIG|off] [--] COMMAND [ARGS...]\n"
    "       cumemtrace symbolize DUMP [--output BASE] [--format LIST]\n"
    "       cumemtrace --version | --help\n"
    "\n"
    "run        runs COMMAND with libcumemtrace.so preloaded; options set the\n"
    "           CUMEMTRACE_* variables of the same names (see README.md)\n"
    "symbolize  reads a crash dump (CUMEMTRACE_OUTPUT.dump) and prints the report;\n"
    "           --output BASE also writes BASE.txt / BASE.json (--format, default json)\n"
    "\n"
    "exit status: run: the command's own (127 if it cannot be started);\n"
    "             others: 0 success, 1 usage error, 2 unreadable input or unwritable output\n";

static int fail_usage(const char *message, const char *detail)
{
    fprintf(stderr, "cumemtrace: %s%s%s (see cumemtrace --help)\n", message, detail ? ": " : "",
            detail ? detail : "");
    return 1;
}

/* libcumemtrace.so next to this program (a build tree) or in ../lib. */
static int find_library(char *path, size_t size)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    const char *candidates[] = {"%s/libcumemtrace.so", "%s/../lib/libcumemtrace.so",
                                "%s/../" CUMEMTRACE_LIBDIR "/libcumemtrace.so"};
    for (unsigned i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        snprintf(path, size, candidates[i], self);
        if (access(path, R_OK) == 0)
            return 0;
    }
    return -1;
}

static int command_run(int argc, char **argv)
{
    static const struct {
        const char *option, *variable;
    } options[] = {{"--output", "CUMEMTRACE_OUTPUT"}, {"--format", "CUMEMTRACE_FORMAT"},
                   {"--depth", "CUMEMTRACE_DEPTH"}, {"--signal", "CUMEMTRACE_SIGNAL"},
                   {"--min-size", "CUMEMTRACE_MIN_SIZE"}, {"--top", "CUMEMTRACE_TOP"}};
    int i = 0;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--quiet") == 0) {
            setenv("CUMEMTRACE_QUIET", "1", 1);
            continue;
        }
        if (argv[i][0] != '-')
            break;
        unsigned k = 0;
        for (; k < sizeof(options) / sizeof(options[0]); k++)
            if (strcmp(argv[i], options[k].option) == 0)
                break;
        if (k == sizeof(options) / sizeof(options[0]))
            return fail_usage("unknown option", argv[i]);
        if (i + 1 >= argc)
            return fail_usage("missing value for", argv[i]);
        setenv(options[k].variable, argv[++i], 1);
    }
    if (i >= argc)
        return fail_usage("no command to run", NULL);

    char library[PATH_MAX];
    if (find_library(library, sizeof(library)) < 0) {
        fprintf(stderr, "cumemtrace: cannot find libcumemtrace.so next to this program or in "
                        "../lib\n");
        return 2;
    }
    /* After what is already preloaded: a sanitizer runtime must stay first. */
    const char *old = getenv("LD_PRELOAD");
    char preload[PATH_MAX * 2];
    snprintf(preload, sizeof(preload), "%s%s%s", old ? old : "", old && *old ? " " : "",
             library);
    setenv("LD_PRELOAD", preload, 1);
    execvp(argv[i], argv + i);
    fprintf(stderr, "cumemtrace: cannot run '%s': %s\n", argv[i], strerror(errno));
    return 127;
}

static int command_symbolize(int argc, char **argv)
{
    const char *dump = NULL, *base = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--output") == 0 && i + 1 < argc)
            base = argv[++i];
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            if (config_parse_formats(argv[++i], &config.formats) < 0)
                return fail_usage("--format takes text, json, text,json or none", argv[i]);
        } else if (argv[i][0] == '-')
            return fail_usage("unknown option", argv[i]);
        else if (!dump)
            dump = argv[i];
        else
            return fail_usage("one dump at a time", argv[i]);
    }
    if (!dump)
        return fail_usage("no dump given", NULL);

    struct report *r = calloc(1, sizeof(*r));
    if (!r || dump_read(dump, r) < 0) {
        fprintf(stderr, "cumemtrace: cannot read dump '%s': %s\n", dump,
                errno == EPROTO ? "not a cumemtrace dump" : strerror(errno));
        if (r)
            report_release(r);
        free(r);
        return 2;
    }
    if (!r->dump_complete)
        fprintf(stderr, "cumemtrace: '%s' is incomplete (the process died while writing it); "
                        "showing what it holds\n", dump);
    struct out out;
    out_fd(&out, STDOUT_FILENO);
    report_text(r, &out, 0);
    out_flush(&out);
    int status = 0;
    if (base && config.formats && report_emit(r, base, 0) < 0)
        status = 2;
    report_release(r);
    free(r);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return fail_usage("no command", NULL);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("cumemtrace %s\n", CUMEMTRACE_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "run") == 0)
        return command_run(argc - 2, argv + 2);
    if (strcmp(argv[1], "symbolize") == 0)
        return command_symbolize(argc - 2, argv + 2);
    return fail_usage("unknown command", argv[1]);
}
