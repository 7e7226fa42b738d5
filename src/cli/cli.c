/* cli.c - the cumemtrace command.
 *
 *   cumemtrace run [options] -- COMMAND [ARGS...]   trace a command
 *   cumemtrace report FILE [--format text|json] [-o PATH]
 *   cumemtrace html FILE -o PATH
 *   cumemtrace export --format NAME FILE -o PATH
 *   cumemtrace diff A B                              what grew, by stack (cli_diff.c)
 *   cumemtrace merge FILES...                        one view across ranks (cli_merge.c)
 *   cumemtrace symbolize DUMP [options]              turn a crash dump into reports
 *
 * FILE is a JSON report or a crash dump (report_load.c tells them apart).
 * Exit status: `run` becomes the command (its status is the command's; 127 if
 * it cannot be started); otherwise 0 on success, 1 for a usage error, 2 when
 * an input cannot be read or an output cannot be written. Errors are one line
 * on stderr. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "config.h"
#include "dump_read.h"
#include "output.h"
#include "report.h"

static const char usage[] =
    "usage: cumemtrace run [--output TEMPLATE] [--format LIST] [--depth N] [--quiet]\n"
    "                      [--signal SIG|off] [--] COMMAND [ARGS...]\n"
    "       cumemtrace report FILE [--format text|json] [-o PATH]\n"
    "       cumemtrace html FILE -o PATH\n"
    "       cumemtrace export --format folded|perfetto|memviz FILE -o PATH\n"
    "       cumemtrace diff A B [--format text|json] [-o PATH]\n"
    "       cumemtrace merge FILES... [--format text|json] [-o PATH]\n"
    "       cumemtrace symbolize DUMP [--output BASE] [--format LIST]\n"
    "       cumemtrace --version | --help | COMMAND --help\n"
    "\n"
    "run        runs COMMAND with libcumemtrace.so preloaded; options set the\n"
    "           CUMEMTRACE_* variables of the same names (see README.md)\n"
    "report     prints the text report of a JSON report or a crash dump\n"
    "html       writes the HTML report of a report or dump\n"
    "export     writes a report or dump for other tools (flame graphs, Perfetto,\n"
    "           PyTorch's memory_viz)\n"
    "diff       what grew between two reports or snapshots, by stack\n"
    "merge      one view across the ranks of a job: totals side by side, the\n"
    "           stacks that hold most, the rank that diverges\n"
    "symbolize  reads a crash dump (CUMEMTRACE_OUTPUT.dump) and prints the report;\n"
    "           --output BASE also writes BASE.txt / BASE.json (--format, default json)\n"
    "\n"
    "exit status: run: the command's own (127 if it cannot be started);\n"
    "             others: 0 success, 1 usage error, 2 unreadable input or unwritable output\n";

static int fail_usage(const char *message, const char *detail)
{
    return cli_usage_error(NULL, message, detail);
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
    report_text(r, &out);
    out_flush(&out);
    int status = 0;
    if (base && config.formats && report_emit(r, base, 0) < 0)
        status = 2;
    report_release(r);
    free(r);
    return status;
}

static const char report_usage[] =
    "usage: cumemtrace report FILE [--format text|json] [-o PATH]\n"
    "\n"
    "Prints the report in FILE, a JSON report (cumemtrace-*.json) or a crash dump\n"
    "(*.dump), as text (the .txt report the library writes) or as JSON. Frames of a\n"
    "JSON report are printed as they were symbolized when it was written; a dump is\n"
    "symbolized now, against the files its maps name.\n"
    "  --format text|json   what to write (default text)\n"
    "  -o, --output PATH    write to PATH instead of stdout (replaced if it exists)\n"
    "exit status: 0 success, 1 usage error, 2 unreadable input or unwritable output\n";

static const char html_usage[] =
    "usage: cumemtrace html FILE -o PATH\n"
    "\n"
    "Writes the HTML report of FILE (a JSON report or a crash dump) to PATH.\n"
    "exit status: 0 success, 1 usage error, 2 unreadable input or unwritable output\n";

static const char export_usage[] =
    "usage: cumemtrace export --format folded|perfetto|memviz FILE -o PATH\n"
    "\n"
    "Writes FILE (a JSON report or a crash dump) for another tool:\n"
    "  folded     folded stacks, for flamegraph.pl and speedscope\n"
    "  perfetto   a Chrome trace / Perfetto JSON with counter tracks\n"
    "  memviz     a snapshot for PyTorch's memory_viz page\n"
    "exit status: 0 success, 1 usage error, 2 unreadable input or unwritable output\n";

static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    }
    return 0;
}

/* Options shared by report, html and export: FILE, --format, -o. */
struct file_options {
    const char *file, *format, *output;
};

static int parse_file_options(const char *command, int argc, char **argv,
                              struct file_options *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--format") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error(command, "missing value for", a);
            if (strcmp(a, "--format") == 0)
                o->format = argv[++i];
            else
                o->output = argv[++i];
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error(command, "unknown option", a);
        } else if (!o->file) {
            o->file = a;
        } else {
            return cli_usage_error(command, "one file at a time", a);
        }
    }
    if (!o->file)
        return cli_usage_error(command, "no report file given", NULL);
    return CLI_OK;
}

/* A report read from FILE (JSON or dump), or NULL after a one-line message. */
static struct loaded_report *load_file(const char *file)
{
    struct loaded_report *loaded = malloc(sizeof(*loaded));
    if (!loaded) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return NULL;
    }
    if (cli_load(file, loaded) < 0) {
        report_unload(loaded);
        free(loaded);
        return NULL;
    }
    return loaded;
}

static int command_report(int argc, char **argv)
{
    struct file_options o = {NULL, "text", NULL};
    int status = parse_file_options("report", argc, argv, &o);
    if (status != CLI_OK)
        return status;
    int json = strcmp(o.format, "json") == 0;
    if (!json && strcmp(o.format, "text") != 0)
        return cli_usage_error("report", "--format takes text or json", o.format);
    struct loaded_report *loaded = load_file(o.file);
    if (!loaded)
        return CLI_UNREADABLE;
    if (loaded->from_dump && !loaded->report.dump_complete)
        fprintf(stderr, "cumemtrace: '%s' is incomplete (the process died while writing it); "
                        "showing what it holds\n", o.file);
    struct cli_output *output = malloc(sizeof(*output));
    status = output ? cli_output_open(output, o.output) : CLI_UNREADABLE;
    if (status == CLI_OK) {
        if (json)
            report_json(&loaded->report, &output->out);
        else
            report_text(&loaded->report, &output->out);
        status = cli_output_close(output);
    }
    free(output);
    report_unload(loaded);
    free(loaded);
    return status;
}

/* The formats html and export write (report writes text and JSON); their
 * names and extensions are config.h's. */
static const struct emitted_format {
    const char *command;        /* "html" or "export" */
    int format;                 /* FORMAT_INDEX_* */
} emitted_formats[] = {
    {"html", FORMAT_INDEX_HTML},
    {"export", FORMAT_INDEX_FOLDED},
    {"export", FORMAT_INDEX_PERFETTO},
    {"export", FORMAT_INDEX_MEMVIZ},
};

/* html and export: load, then report_emit with one format bit. */
static int command_emit(const char *command, int argc, char **argv)
{
    struct file_options o = {NULL, NULL, NULL};
    int status = parse_file_options(command, argc, argv, &o);
    if (status != CLI_OK)
        return status;
    if (strcmp(command, "html") == 0) {
        if (o.format && strcmp(o.format, "html") != 0)
            return cli_usage_error(command, "html writes html only", o.format);
        o.format = "html";
    } else if (!o.format) {
        return cli_usage_error(command, "--format is needed", NULL);
    }
    if (!o.output)
        return cli_usage_error(command, "-o PATH is needed", NULL);
    const struct emitted_format *f = NULL;
    for (size_t i = 0; i < sizeof(emitted_formats) / sizeof(emitted_formats[0]); i++)
        if (strcmp(emitted_formats[i].command, command) == 0 &&
            strcmp(config_formats[emitted_formats[i].format].name, o.format) == 0)
            f = &emitted_formats[i];
    if (!f)
        return cli_usage_error(command, "unknown format", o.format);
    struct loaded_report *loaded = load_file(o.file);
    if (!loaded)
        return CLI_UNREADABLE;
    /* -o names the file to write: replace it (report_emit would otherwise
     * keep an existing file and write beside it, as the tracer must). */
    char path[PATH_MAX];
    struct stat st;
    if (output_path(o.output, config_formats[f->format].extension, path, sizeof(path)) == 0 &&
        stat(path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(path);
    config.formats = 1 << f->format;
    config.quiet = 1;
    status = report_emit(&loaded->report, o.output, 0) < 0 ? CLI_UNREADABLE : CLI_OK;
    report_unload(loaded);
    free(loaded);
    return status;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        const char *usage;
    } helps[] = {{"report", report_usage}, {"html", html_usage}, {"export", export_usage}};
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
    if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "symbolize") == 0) {
        /* run: only its own first argument; later ones may be the command's */
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            fputs(usage, stdout);
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
        if (strcmp(argv[1], helps[i].name) == 0 && wants_help(argc - 2, argv + 2)) {
            fputs(helps[i].usage, stdout);
            return 0;
        }
    }
    if (strcmp(argv[1], "run") == 0)
        return command_run(argc - 2, argv + 2);
    if (strcmp(argv[1], "symbolize") == 0)
        return command_symbolize(argc - 2, argv + 2);
    if (strcmp(argv[1], "report") == 0)
        return command_report(argc - 2, argv + 2);
    if (strcmp(argv[1], "html") == 0 || strcmp(argv[1], "export") == 0)
        return command_emit(argv[1], argc - 2, argv + 2);
    if (strcmp(argv[1], "diff") == 0)
        return command_diff(argc - 2, argv + 2);
    if (strcmp(argv[1], "merge") == 0)
        return command_merge(argc - 2, argv + 2);
    return fail_usage("unknown command", argv[1]);
}
