/* cli.c - the cumemtrace command.
 *
 *   cumemtrace run [options] -- COMMAND [ARGS...]   trace a command
 *   cumemtrace report FILE                           the text report of FILE
 *   cumemtrace html FILE -o PATH                     its HTML page
 *   cumemtrace export --format NAME FILE -o PATH     for other tools
 *   cumemtrace diff A B                              what grew, by stack (cli_diff.c)
 *   cumemtrace merge FILES...                        one view across ranks (cli_merge.c)
 *   cumemtrace live PID                              a running process (cli_live.c)
 *   cumemtrace symbolize DUMP                        a crash dump made a report
 *   cumemtrace doctor                                what a run here records (cli_doctor.c)
 *
 * FILE is a JSON report or a crash dump (report_load.c tells them apart).
 * Every command parses its arguments with getopt_long (--opt=value works)
 * and has its own --help; `cumemtrace --help` prints each command's
 * synopsis, the first line of its own usage, so the two never disagree.
 * Exit status: `run` becomes the command (its status is the command's; 127
 * if it cannot be started); otherwise 0 on success, 1 for a usage error, 2
 * when an input cannot be read or an output cannot be written. Errors are
 * one line on stderr. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
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

static const char run_usage[] =
    "usage: cumemtrace run [OPTIONS] [--] COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with libcumemtrace.so preloaded (found next to this program or in\n"
    "../lib). Each option sets the CUMEMTRACE_* variable of the same name (README.md,\n"
    "Settings); the first argument that is not an option is COMMAND.\n";
/* After the options, which come from the rows of settings.def. */
static const char run_usage_end[] =
    "It also puts the Python packages (cumemtrace, the pytest plugin cumemtrace_pytest)\n"
    "on PYTHONPATH, and first builds PyTorch's tracker for COMMAND's Python (COMMAND\n"
    "itself if it is named python*, else python3) when none is cached:\n"
    "  cumemtrace run -- python -m pytest --cuda-leaks\n"
    "Without a GPU, CUDA programs need the simulator built with the tests: run them\n"
    "with LD_LIBRARY_PATH=build/sim (scripts/demo.sh does).\n"
    "Every value, and the place the reports will go, is checked before COMMAND starts.\n"
    "exit status: the command's own; 127 if it cannot be started, 1 usage error,\n"
    "             2 a bad option value, reports that could not be written where\n"
    "             --output says, or no libcumemtrace.so found\n";

/* The settings that `cumemtrace run` has an option for. */
static const struct run_option {
    int short_;           /* 0: none */
    const char *option;   /* "": not an option of run */
    const char *argument; /* "": a flag, which sets the variable to 1 */
    const char *help;
    const char *variable;
} run_options[] = {
#define SETTING(field, NAME, type, min, max, initial, shown, short_, option, argument, help, doc)  \
    {short_, option, argument, help, "CUMEMTRACE_" #NAME},
#include "settings.def"
#undef SETTING
};
#define RUN_OPTION_COUNT (sizeof(run_options) / sizeof(run_options[0]))

/* `cumemtrace run --help`: the usage, an aligned line per option, the end. */
static void run_help(void)
{
    fputs(run_usage, stdout);
    for (size_t i = 0; i < RUN_OPTION_COUNT; i++) {
        const struct run_option *o = &run_options[i];
        if (!o->option[0])
            continue;
        char left[64];
        if (o->short_)
            snprintf(left, sizeof(left), "  -%c, --%s %s", o->short_, o->option, o->argument);
        else
            snprintf(left, sizeof(left), "  --%s %s", o->option, o->argument);
        printf("%-25s %s\n", left, o->help);
    }
    fputs(run_usage_end, stdout);
}

static const char report_usage[] =
    "usage: cumemtrace report FILE [--format text|json] [-o PATH] [--top N]\n"
    "       [--all-frames]\n"
    "\n"
    "Prints the report in FILE, a JSON report (cumemtrace-*.json) or a crash dump\n"
    "(*.dump), as text (the .txt report the library writes) or as JSON. Frames of a\n"
    "JSON report are printed as they were symbolized when it was written; a dump is\n"
    "symbolized now, against the files its maps name. C++ names are shown demangled\n"
    "(with libstdc++, loaded for it), the JSON keeping the name as linked in \"mangled\".\n"
    "  -f, --format text|json  what to write (default text)\n"
    "  -o, --output PATH       write to PATH instead of stdout: a FIFO, device or pipe as\n"
    "                          it is; a regular file is replaced (mode CUMEMTRACE_FILE_MODE)\n"
    "  --top N                 the summary the run printed on stderr, N entries per\n"
    "                          section (text)\n"
    "  --all-frames            hide no frame (start-up, interpreter, frameworks)\n" CLI_EXIT_STATUS;

static const char html_usage[] =
    "usage: cumemtrace html FILE -o PATH [--all-frames]\n"
    "\n"
    "Writes the HTML report of FILE (a JSON report or a crash dump) to PATH: one\n"
    "self-contained page.\n"
    "  -o, --output PATH       the page to write (.html is added when missing; the path\n"
    "                          written is said on stderr)\n"
    "  --all-frames            its icicles and tables show every frame at first\n" CLI_EXIT_STATUS;

static const char export_usage[] =
    "usage: cumemtrace export --format folded|perfetto|memviz FILE -o PATH\n"
    "       [--all-frames]\n"
    "\n"
    "Writes FILE (a JSON report or a crash dump) for another tool:\n"
    "  folded     folded stacks, for flamegraph.pl and speedscope\n"
    "  perfetto   a Chrome trace / Perfetto JSON with counter tracks\n"
    "  memviz     a snapshot for PyTorch's memory_viz page\n"
    "  -o, --output PATH       the file to write (the format's extension is added when\n"
    "                          missing; the path written is said on stderr)\n"
    "  --all-frames            folded: hide no frame\n" CLI_EXIT_STATUS;

static const char symbolize_usage[] =
    "usage: cumemtrace symbolize DUMP [--output BASE] [--format LIST] [--all-frames]\n"
    "\n"
    "Reads a crash dump (CUMEMTRACE_OUTPUT.dump), symbolizes it against the files its\n"
    "maps name, and prints the text report.\n"
    "  -o, --output BASE       also write BASE.json, BASE.txt, ... (--format)\n"
    "  -f, --format LIST       the files --output writes (default json)\n"
    "  --all-frames            hide no frame\n" CLI_EXIT_STATUS;

static const struct option file_options[] = {{"format", required_argument, NULL, 'f'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"all-frames", no_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"top", required_argument, NULL, 't'},
                                             {NULL, 0, NULL, 0}};

/* The Python packages (the pytest plugin cumemtrace_pytest, cumemtrace's
 * mark() and snapshot()) on PYTHONPATH for the traced program, after what
 * is there, and the plugin in what pytest loads. */
static void add_python_path(void)
{
    char folder[PATH_MAX];
    if (cli_python_folder(folder, sizeof(folder)) < 0)
        return;
    const char *old = getenv("PYTHONPATH");
    char path[PATH_MAX * 4];
    snprintf(path, sizeof(path), "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", folder);
    setenv("PYTHONPATH", path, 1);
    /* pytest loads the plugin, whichever way cumemtrace was installed (a
     * pip install registers it too, by the same name: loaded once). */
    const char *options = getenv("PYTEST_ADDOPTS");
    snprintf(path, sizeof(path), "%s%s-p cumemtrace_pytest", options && *options ? options : "",
             options && *options ? " " : "");
    setenv("PYTEST_ADDOPTS", path, 1);
}

/* Before the traced program starts: the PyTorch tracker for its Python,
 * built into the cache if missing (torch_tracker.py; it says in one line
 * what it builds, or why it cannot). Never in the way of the run: a Python
 * that is not there, no PyTorch, or a failed build leave the program to run
 * with PyTorch's cache segments only. Skipped where the tracer would not
 * look in the cache (CUMEMTRACE_TORCH_TRACKER) or for PyTorch at all. */
static void ensure_torch_tracker(const char *program)
{
    const char *frameworks = getenv("CUMEMTRACE_FRAMEWORKS");
    const char *enable = getenv("CUMEMTRACE_ENABLE");
    const char *tracker = getenv("CUMEMTRACE_TORCH_TRACKER");
    if ((frameworks && strcmp(frameworks, "0") == 0) || (enable && strcmp(enable, "0") == 0) ||
        (tracker && *tracker))
        return;
    const char *args[] = {"ensure", "--quiet", NULL};
    cli_tracker_helper(cli_traced_python(program), args, NULL, 0);
}

/* Every CUMEMTRACE_* setting run is started with, from its options (the
 * option named, `given[row]`) or from the environment (the variable named):
 * a malformed value, which the library would replace by its default minutes
 * into the run, refused in one line; CLI_OK or CLI_UNREADABLE. */
static int check_values(const char *const *given)
{
    char why[200];
    for (size_t i = 0; i < RUN_OPTION_COUNT; i++) {
        const char *value = getenv(run_options[i].variable);
        if (!value || (!value[0] && !given[i]))
            continue; /* unset, or set empty outside run: the library's default */
        if (config_check(run_options[i].variable, value, why, sizeof(why)) == 0)
            continue;
        if (given[i])
            fprintf(stderr, "cumemtrace run: %s '%s' %s\n", given[i], value, why);
        else
            fprintf(stderr, "cumemtrace run: %s='%s' %s\n", run_options[i].variable, value, why);
        return CLI_UNREADABLE;
    }
    return CLI_OK;
}

/* Where the reports will go (CUMEMTRACE_OUTPUT, as config_load joins a
 * directory's default name), checked before the program starts rather than
 * found unusable at its end: CLI_OK, or CLI_UNREADABLE after one line.
 * Also says, once, that --format none writes no snapshot either. The
 * values are valid (check_values). */
static int check_output(const char *option)
{
    const char *value = getenv("CUMEMTRACE_OUTPUT");
    const char *signal = getenv("CUMEMTRACE_SIGNAL");
    const char *format = getenv("CUMEMTRACE_FORMAT");
    const char *enable = getenv("CUMEMTRACE_ENABLE");
    int formats = config_defaults.formats, on = 1, snapshot_signal = SIGUSR2;
    if (enable && *enable && config_parse_bool(enable, &on) == 0 && !on)
        return CLI_OK; /* every call passed through: nothing is written */
    if (format && *format)
        config_parse_formats(format, &formats);
    if (signal && *signal)
        config_parse_signal(signal, &snapshot_signal);
    if (!formats && snapshot_signal)
        fprintf(stderr, "cumemtrace run: --format none: the snapshot signal (--signal) and "
                        "out-of-memory reports will write no file either; crash dumps still do\n");
    char template_[2 * CONFIG_TEXT_MAX], why[OUTPUT_PATH_MAX + 80];
    config_output_template(template_, sizeof(template_));
    if (output_check(template_, why, sizeof(why)) == 0)
        return CLI_OK;
    fprintf(stderr, "cumemtrace run: %s '%s' cannot hold the reports: %s\n",
            option ? option : "CUMEMTRACE_OUTPUT", value && *value ? value : config_defaults.output,
            why);
    return CLI_UNREADABLE;
}

static int command_run(int argc, char **argv)
{
    /* getopt's tables from run_options: an option without a short one
     * returns 256 + its row. */
    struct option longs[RUN_OPTION_COUNT + 2];
    char shorts[2 * RUN_OPTION_COUNT + 4] = "+:";
    size_t count = 0, used = 2;
    for (size_t i = 0; i < RUN_OPTION_COUNT; i++) {
        const struct run_option *o = &run_options[i];
        if (!o->option[0])
            continue;
        int takes = o->argument[0] != '\0';
        longs[count++] = (struct option){o->option, takes ? required_argument : no_argument, NULL,
                                         o->short_ ? o->short_ : 256 + (int)i};
        if (o->short_) {
            shorts[used++] = (char)o->short_;
            if (takes)
                shorts[used++] = ':';
        }
    }
    longs[count++] = (struct option){"help", no_argument, NULL, 'h'};
    longs[count] = (struct option){NULL, 0, NULL, 0};
    shorts[used++] = 'h';
    shorts[used] = '\0';
    struct cli_args args = {"run", argc, argv, shorts, longs, 0};
    /* How each setting was given: "--top" or "-o", as typed; NULL: not */
    const char *given[RUN_OPTION_COUNT] = {NULL};
    char typed[RUN_OPTION_COUNT][40];
    size_t output_row = 0;
    while (strcmp(run_options[output_row].variable, "CUMEMTRACE_OUTPUT") != 0)
        output_row++;
    for (int c; (c = cli_getopt(&args)) != -1;) {
        if (c == 'h') {
            run_help();
            return CLI_OK;
        }
        const struct option *o = longs;
        while (o->name && o->val != c)
            o++;
        if (!o->name)
            return CLI_USAGE;
        /* "--" ends the options: never a value (--output -- CMD wrote "--.json") */
        if (optarg && strcmp(optarg, "--") == 0) {
            char name[32];
            snprintf(name, sizeof(name), "--%s", o->name);
            return cli_usage_error("run", "missing value for", name);
        }
        size_t k = 0;
        while (k < RUN_OPTION_COUNT && strcmp(run_options[k].option, o->name) != 0)
            k++;
        setenv(run_options[k].variable, optarg ? optarg : "1", 1);
        snprintf(typed[k], sizeof(typed[k]), "--%s", o->name);
        given[k] = typed[k];
    }
    if (optind >= argc)
        return cli_usage_error("run", "no command to run", NULL);
    int status = check_values(given);
    if (status == CLI_OK)
        status = check_output(given[output_row]);
    if (status != CLI_OK)
        return status;

    char library[PATH_MAX];
    if (cli_find_library(library, sizeof(library)) < 0) {
        fprintf(stderr, "cumemtrace: cannot find libcumemtrace.so next to this program or in "
                        "../lib\n");
        return CLI_UNREADABLE;
    }
    /* After what is already preloaded: a sanitizer runtime must stay first. */
    const char *old = getenv("LD_PRELOAD");
    char preload[PATH_MAX * 2];
    snprintf(preload, sizeof(preload), "%s%s%s", old ? old : "", old && *old ? " " : "", library);
    ensure_torch_tracker(argv[optind]);
    setenv("LD_PRELOAD", preload, 1);
    add_python_path();
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "cumemtrace: cannot run '%s': %s\n", argv[optind], strerror(errno));
    return 127;
}

static int command_symbolize(int argc, char **argv)
{
    const char *base = NULL;
    struct report_options options;
    report_options_of(&config, &options);
    struct cli_args args = {"symbolize", argc, argv, ":o:f:h", file_options, 0};
    for (int c; (c = cli_getopt(&args)) != -1;) {
        switch (c) {
        case 'o': base = optarg; break;
        case 'a': options.all_frames = 1; break;
        case 'f':
            if (config_parse_formats(optarg, &options.formats) < 0)
                return cli_usage_error("symbolize",
                                       "--format takes a list of text, json, html, "
                                       "folded, perfetto, memviz, or none",
                                       optarg);
            break;
        case 'h': fputs(symbolize_usage, stdout); return CLI_OK;
        default: return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error("symbolize", "no dump given", NULL);
    if (optind + 1 < argc)
        return cli_usage_error("symbolize", "one dump at a time", argv[optind + 1]);
    const char *dump = argv[optind];

    struct report *r = calloc(1, sizeof(*r));
    if (!r || dump_read(dump, &options, r) < 0) {
        fprintf(stderr, "cumemtrace: cannot read dump '%s': %s\n", dump,
                errno == EPROTO ? "not a cumemtrace dump" : strerror(errno));
        if (r)
            report_release(r);
        free(r);
        return CLI_UNREADABLE;
    }
    if (!r->dump_complete)
        fprintf(stderr,
                "cumemtrace: '%s' is incomplete (the process died while writing it); "
                "showing what it holds\n",
                dump);
    struct out out;
    out_fd(&out, STDOUT_FILENO);
    report_text(r, &out);
    out_flush(&out);
    int status = CLI_OK;
    /* --output names what to write: a file already there is replaced. */
    static struct report_files files = {.replace = 1};
    r->options.file_mode = cli_file_mode();
    if (base && options.formats && report_emit(r, base, 0, &files) < 0)
        status = CLI_UNREADABLE;
    report_release(r);
    free(r);
    return status;
}

/* Options of report, html and export: FILE, --format, -o, --all-frames;
 * `usage` printed for --help (then *help is set). */
struct file_options {
    const char *file, *format, *output;
    const char *top; /* report's --top N, as given; NULL: none */
    int help;
    struct report_options report; /* the report's (--all-frames) */
};

static int parse_file_options(const char *command, const char *usage, int argc, char **argv,
                              struct file_options *o)
{
    struct cli_args args = {command, argc, argv, ":f:o:h", file_options, 0};
    report_options_of(&config, &o->report);
    for (int c; (c = cli_getopt(&args)) != -1;) {
        switch (c) {
        case 'f': o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case 'a': o->report.all_frames = 1; break;
        case 't': o->top = optarg; break;
        case 'h':
            fputs(usage, stdout);
            o->help = 1;
            return CLI_OK;
        default: return CLI_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(command, "no report file given", NULL);
    if (optind + 1 < argc)
        return cli_usage_error(command, "one file at a time", argv[optind + 1]);
    o->file = argv[optind];
    return CLI_OK;
}

/* A report read from FILE (JSON or dump), to be written with `options`, or
 * NULL after a one-line message. */
static struct loaded_report *load_file(const char *file, const struct report_options *options)
{
    struct loaded_report *loaded = malloc(sizeof(*loaded));
    if (!loaded) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return NULL;
    }
    if (cli_load(file, options, loaded) < 0) {
        report_unload(loaded);
        free(loaded);
        return NULL;
    }
    return loaded;
}

/* After -o PATH was written: the path, on stderr, and that it is not the
 * one typed when an extension was added. Nothing for stdout, a FIFO, a
 * device or a pipe. */
static void say_written(const struct cli_output *output, const char *typed)
{
    if (!output->path[0] || output->as_is)
        return;
    if (strcmp(output->path, typed) == 0)
        fprintf(stderr, "cumemtrace: wrote %s\n", output->path);
    else
        fprintf(stderr, "cumemtrace: wrote %s (-o %s with the format's extension)\n", output->path,
                typed);
}

/* The summary a run printed, its last line naming `file` as the full report. */
static void summary_of(const struct report *r, const char *file, struct out *out)
{
    static struct report_files files = {.count = 1};
    files.file[0].format = FORMAT_INDEX_JSON;
    snprintf(files.file[0].path, sizeof(files.file[0].path), "%s", file);
    report_summary(r, &files, out);
}

static int command_report(int argc, char **argv)
{
    struct file_options o = {.format = "text"};
    int status = parse_file_options("report", report_usage, argc, argv, &o);
    if (status != CLI_OK || o.help)
        return status;
    int json = strcmp(o.format, "json") == 0;
    if (!json && strcmp(o.format, "text") != 0)
        return cli_usage_error("report", "--format takes text or json", o.format);
    long top = 0;
    if (o.top && (json || config_parse_int(o.top, 1, 100000, &top) < 0))
        return cli_usage_error("report",
                               json ? "--top is for the text summary"
                                    : "--top takes a whole number from 1 to 100000",
                               o.top);
    if (top)
        o.report.top = (int)top;
    struct loaded_report *loaded = load_file(o.file, &o.report);
    if (!loaded)
        return CLI_UNREADABLE;
    if (loaded->from_dump && !loaded->report.dump_complete)
        fprintf(stderr,
                "cumemtrace: '%s' is incomplete (the process died while writing it); "
                "showing what it holds\n",
                o.file);
    struct cli_output *output = malloc(sizeof(*output));
    status = output ? cli_output_open(output, o.output) : CLI_UNREADABLE;
    if (status == CLI_OK) {
        if (json)
            report_json(&loaded->report, &output->out);
        else if (top)
            summary_of(&loaded->report, o.file, &output->out);
        else
            report_text(&loaded->report, &output->out);
        status = cli_output_close(output);
        if (status == CLI_OK && o.output)
            say_written(output, o.output);
    }
    free(output);
    report_unload(loaded);
    free(loaded);
    return status;
}

/* The formats html and export write (report writes text and JSON); their
 * names and extensions are config.h's. */
static const struct emitted_format {
    const char *command; /* "html" or "export" */
    int format;          /* FORMAT_INDEX_* */
} emitted_formats[] = {
    {"html", FORMAT_INDEX_HTML},
    {"export", FORMAT_INDEX_FOLDED},
    {"export", FORMAT_INDEX_PERFETTO},
    {"export", FORMAT_INDEX_MEMVIZ},
};

/* -o PATH for html and export: PATH and its extension, or PATH as it is
 * when it names a FIFO, a device or a pipe (cli_output_open). */
static int emitted_path(const char *output, const char *extension, char *path, size_t size)
{
    struct stat st;
    if (stat(output, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return snprintf(path, size, "%s", output) < (int)size ? 0 : -1;
    return output_path(output, extension, path, size);
}

/* html and export: load, then one writer to the file -o names. */
static int command_emit(const char *command, int argc, char **argv)
{
    int html = strcmp(command, "html") == 0;
    struct file_options o = {.format = NULL};
    int status = parse_file_options(command, html ? html_usage : export_usage, argc, argv, &o);
    if (status != CLI_OK || o.help)
        return status;
    if (html) {
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
    char path[OUTPUT_PATH_MAX];
    if (emitted_path(o.output, config_formats[f->format].extension, path, sizeof(path)) < 0) {
        fprintf(stderr, "cumemtrace: cannot write '%s': %s\n", o.output, strerror(ENAMETOOLONG));
        return CLI_UNREADABLE;
    }
    struct loaded_report *loaded = load_file(o.file, &o.report);
    if (!loaded)
        return CLI_UNREADABLE;
    struct cli_output *output = malloc(sizeof(*output));
    status = output ? cli_output_open(output, path) : CLI_UNREADABLE;
    if (status == CLI_OK) {
        report_write_format(&loaded->report, f->format, &output->out);
        status = cli_output_close(output);
        if (status == CLI_OK)
            say_written(output, o.output);
    }
    free(output);
    report_unload(loaded);
    free(loaded);
    return status;
}

/* Every command, in the order `cumemtrace --help` lists them. */
static int command_html(int argc, char **argv)
{
    return command_emit("html", argc, argv);
}

static int command_export(int argc, char **argv)
{
    return command_emit("export", argc, argv);
}

static const struct command {
    const char *name;
    const char *usage; /* its first line is the synopsis */
    const char *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", run_usage, "trace COMMAND: libcumemtrace.so preloaded", command_run},
    {"report", report_usage, "the text (or JSON) report of a JSON report or a crash dump",
     command_report},
    {"html", html_usage, "the HTML page of a report", command_html},
    {"export", export_usage, "a report for flame graphs, Perfetto, PyTorch's memory_viz",
     command_export},
    {"diff", diff_usage, "what grew between two reports, by stack", command_diff},
    {"merge", merge_usage, "the ranks of a job side by side, the one that diverges", command_merge},
    {"live", live_usage, "a traced process's memory, refreshed every second", command_live},
    {"symbolize", symbolize_usage, "a crash dump made a report", command_symbolize},
    {"doctor", doctor_usage, "what a run here records, and why", command_doctor},
};
#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static void print_usage(FILE *to)
{
    fputs("usage: cumemtrace COMMAND [OPTIONS] [ARGS...]\n\n", to);
    /* Each synopsis: the lines before the first blank one, "usage: " and
     * the indentation that aligns the lines after the first taken off. */
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        for (const char *line = commands[i].usage; *line && *line != '\n';) {
            size_t n = strcspn(line, "\n");
            fprintf(to, "  %s%.*s\n", line == commands[i].usage ? "" : "    ", (int)n - 7,
                    line + 7);
            line += n + (line[n] == '\n');
        }
    fputs("  cumemtrace --version | --help | COMMAND --help\n\n", to);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(to, "%-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nFILE is a JSON report (cumemtrace-*.json) or a crash dump (*.dump).\n"
          "exit status: run: the command's own (127 if it cannot be started);\n"
          "             others: 0 success, 1 usage error, 2 unreadable input or unwritable "
          "output\n",
          to);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "no command", NULL);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("cumemtrace %s\n", CUMEMTRACE_VERSION);
        return CLI_OK;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return cli_usage_error(NULL, "unknown command", argv[1]);
}
