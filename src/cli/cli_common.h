/* cli_common.h - what the parts of the cumemtrace command share (cli*.c):
 * cli_common.c's loading, output and stack names, and the commands that
 * cli.c hands over to (cli_diff.c, cli_merge.c).
 *
 * Every error is one line on stderr, "cumemtrace: ...", and each command
 * returns the process's exit status: CLI_OK, CLI_USAGE (bad arguments) or
 * CLI_UNREADABLE (an input that cannot be read, an output that cannot be
 * written). */
#ifndef CUMEMTRACE_CLI_COMMON_H
#define CUMEMTRACE_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "output.h"
#include "report_load.h"

enum { CLI_OK = 0, CLI_USAGE = 1, CLI_UNREADABLE = 2 };
#define CLI_EXIT_STATUS                                                                            \
    "exit status: 0 success, 1 usage error, 2 unreadable input or unwritable output\n"

/* "cumemtrace: MESSAGE: DETAIL (see cumemtrace COMMAND --help)"; CLI_USAGE. */
int cli_usage_error(const char *command, const char *message, const char *detail);

/* Load a report or dump, to be written with `options`; on failure one line
 * names the file and the reason. */
int cli_load(const char *path, const struct report_options *options, struct loaded_report *loaded);
/* The same through report_load_summary: no timeline, series or blocks. */
int cli_load_summary(const char *path, const struct report_options *options,
                     struct loaded_report *loaded);

/* Where a command writes: stdout, or PATH. PATH that names a FIFO, a
 * device, a pipe (/dev/stdout, a shell's >(...)) is written to as it is;
 * otherwise a new file is written whole and then put in place of PATH, a
 * regular file or a link being replaced (output.h), in CUMEMTRACE_FILE_MODE
 * (0600). */
struct cli_output {
    struct out out;
    char path[OUTPUT_PATH_MAX]; /* "": stdout */
    int as_is;                  /* PATH is written to as it is */
};
int cli_output_open(struct cli_output *output, const char *path); /* CLI_OK or CLI_UNREADABLE */
/* The mode of files the command makes: CUMEMTRACE_FILE_MODE, else 0600. */
int cli_file_mode(void);
int cli_output_close(struct cli_output *output); /* CLI_OK or CLI_UNREADABLE */

/* Matching a Python frame's file across runs that launched the script by
 * other paths (`../train.py`, `/abs/train.py`, another checkout).
 * cli_script_folder: the folder of the script the report's Python program
 * ran, as the report names its frames' files (its command line, from the
 * directory the program started in, as a real path where the file is on
 * this machine, else normalized by name: output_real_path); "" when the
 * program is no Python script (-m, -c, not python*). cli_match_path: the
 * key a frame's `file` is matched by: "<script>/REST" for a file under
 * `folder`, else the normalized path. */
void cli_script_folder(const struct report *r, char *folder, size_t size);
void cli_match_path(const char *file, const char *folder, char *key, size_t size);

/* A stack as it reads the same in every run of the program: its frames as
 * "function at file:line" (a Python frame's file as cli_match_path makes
 * it, against cli_script_folder), "function [module]" or "module+0xoffset",
 * one per line, never a raw address (those change from run to run). Returns a
 * malloc'ed string, NULL when out of memory. */
char *cli_stack_key(const struct report *r, uint32_t stack_id);
/* A stack's site (frames.h: the user's own line, where there is one) as
 * cli_write_frames shows it, in `text`; "(no stack recorded)" without. */
void cli_stack_site(const struct report *r, uint32_t stack_id, char *text, size_t size);
/* Up to `limit` frames of a stack from its site outwards (from the
 * framework call the site made, when there is one), those frames.h hides
 * left out unless the report shows all frames, the site marked, each on its
 * own line after `indent`. */
void cli_write_frames(struct out *out, const struct report *r, uint32_t stack_id, int limit,
                      const char *indent);
/* The same frames as a JSON list of {function, file, line, module, python,
 * origin, site}. */
void cli_write_frames_json(struct out *out, const struct report *r, uint32_t stack_id, int limit);

/* The moments a report's memory is read at. A Python program ends (its
 * interpreter's exit hooks run) before its process does: the interpreter's
 * teardown then frees what module globals held, so what is live at exit is
 * mostly what the teardown left. CLI_AT_END reads what was held when the
 * program ended (report.h: r->held, r->end.device_bytes); CLI_AT_PEAK
 * each stack at its own highest live bytes and each device at its peak;
 * CLI_AT_EXIT what was live when the report was written. */
enum cli_moment { CLI_AT_END, CLI_AT_PEAK, CLI_AT_EXIT };
extern const char *const cli_moment_names[]; /* "end", "peak", "exit" */
/* The moment a report is read at when `wanted` is asked: CLI_AT_END only
 * for a report that saw the program's end, CLI_AT_EXIT instead. */
int cli_moment_for(const struct report *r, int wanted);
/* The moment in words, for a heading: "at the program's end, before ...". */
const char *cli_moment_text(const struct report *r, int moment);
/* Device memory on one device slot, and summed over the report's devices,
 * at a moment (at the end of an older report that did not keep it: at exit). */
uint64_t cli_device_bytes(const struct report *r, int slot, int moment);
uint64_t cli_bytes_at(const struct report *r, int moment);
/* How many stacks a report read at `moment` lists, and the k-th's id with
 * its bytes then: at the end, what each held (r->held); else the stacks
 * written out (r->shown), at their live or their peak bytes. */
size_t cli_moment_stacks(const struct report *r, int moment);
uint32_t cli_moment_stack(const struct report *r, int moment, size_t k, uint64_t *bytes);

/* Bytes per stack across several reports, each read at its moment
 * (moments[i]; NULL: CLI_AT_EXIT for all), stacks matched by their
 * keys (cli_stack_key): one entry per distinct key, with its bytes in each
 * report (0 where it is absent), and where to read its frames from (the
 * report holding most of it). Sorted by key. A framework's cache segments
 * are left out of a report that records the cache's blocks
 * (report_cache_segment): its blocks' stacks hold the same memory. */
struct stack_sum {
    char *key;
    uint64_t *bytes; /* [report] */
    int report;      /* frames: this report's stack `stack_id` */
    uint32_t stack_id;
};
struct stack_sums {
    struct stack_sum *items;
    size_t count;
};
int cli_sum_stacks(struct stack_sums *sums, struct loaded_report *const *reports, int count,
                   const int *moments);
void cli_free_sums(struct stack_sums *sums);

/* "+1.50 MiB", "-512 B", "0 B" */
void cli_format_change(long long change, char *text, size_t size);

/* getopt_long over a command's arguments, argv[0] being the command's name:
 * `shorts` starts with ':' ("+:" to stop at the first operand, for run).
 * Returns the next option as getopt_long does, -1 after the last (optind
 * then indexes the first operand), or '?' once a one-line usage error
 * ("unknown option: --colour", "missing value for: --top") is printed. */
struct option;
struct cli_args {
    const char *command;
    int argc;
    char **argv;
    const char *shorts;
    const struct option *longs;
    int started;
};
int cli_getopt(struct cli_args *args);
/* A count (0 to 1000000) into *out: CLI_OK, or CLI_USAGE after "not a count". */
int cli_parse_count(const char *command, const char *text, long *out);

/* The options diff and merge share. Files are the arguments that are not
 * options, in order, in `files` (room for argc of them). */
struct compare_options {
    const char *format;           /* "text" (the default) or "json" */
    const char *output;           /* -o PATH; NULL: stdout */
    long top, frames;             /* --top N, --frames N; set defaults before */
    const char *at;               /* diff's --at end|peak|exit; NULL: not given */
    struct report_options report; /* the reports' (--all-frames) */
    int help;                     /* --help was given: usage printed, nothing to do */
    char **files;
    int file_count;
};
/* CLI_OK, or CLI_USAGE with the error printed. `usage` is printed for --help.
 * argv[0] is the command's name. */
int cli_parse_compare(const char *command, const char *usage, int argc, char **argv,
                      struct compare_options *o);

/* The commands of cli_diff.c, cli_merge.c and cli_live.c, and their usage texts (the
 * first line, "usage: cumemtrace NAME ...", is the synopsis). argv[0] is
 * the command's name. */
/* The installation's parts, found from this program's path (cli_install.c):
 * libcumemtrace.so; the folder of the Python packages (cumemtrace,
 * cumemtrace_pytest). 0, or -1 when not found. */
int cli_find_library(char *path, size_t size);
int cli_python_folder(char *folder, size_t size);
/* Runs `PYTHON .../cumemtrace/torch_tracker.py ARGS...` (args ends with
 * NULL; at most 13) and waits: its standard output into `output` (up to
 * size - 1 bytes, NUL-terminated; the rest read and dropped) or, with
 * output NULL, the command's own. Its exit status; -1 when it could not run
 * (errno ENOENT: no such Python, or no helper installed). */
int cli_tracker_helper(const char *python, const char *const *args, char *output, size_t size);
/* The Python a traced command runs: the command itself when its name
 * starts with "python", else python3 (found on PATH). */
const char *cli_traced_python(const char *program);

extern const char diff_usage[], merge_usage[], live_usage[], doctor_usage[];
int command_doctor(int argc, char **argv);
int command_diff(int argc, char **argv);
int command_merge(int argc, char **argv);
int command_live(int argc, char **argv); /* cli_live.c */
/* One answer of a live peer (NUL-terminated `text`, whatever it holds) shown
 * as `live --holders` shows it (its holders as the answer to request 1),
 * on `to` (a message there too when it is not one), against this
 * process's maps: what the fuzzing target feeds (tests/fuzz). 0, or 1 when
 * it is not one. */
int live_show_answer(char *text, size_t length, FILE *to);

#endif
