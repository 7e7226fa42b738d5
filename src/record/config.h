/* config.h - the tracer's settings, read once from CUMEMTRACE_* variables.
 *
 * A malformed value never stops the traced program: config_load() prints one
 * line naming the variable, the value and the default it uses instead. */
#ifndef CUMEMTRACE_CONFIG_H
#define CUMEMTRACE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* The report formats, one row each: its name (CUMEMTRACE_FORMAT, the
 * command's --format) and the extension of its file. config.c reads names
 * with it, report/emit.c writes a file of each with the writer report_NAME,
 * the command finds a format's name and extension in it. */
#define REPORT_FORMATS(X)                                                                          \
    X(TEXT, text, ".txt")                                                                          \
    X(JSON, json, ".json")                                                                         \
    X(HTML, html, ".html")               /* one self-contained page */                             \
    X(FOLDED, folded, ".folded")         /* folded stacks for flamegraph.pl, speedscope */         \
    X(PERFETTO, perfetto, ".trace.json") /* Chrome Trace Event JSON (ui.perfetto.dev) */           \
    X(MEMVIZ, memviz, ".pickle")         /* a pickle for PyTorch's memory_viz */

enum format_index {
#define X(id, name, extension) FORMAT_INDEX_##id,
    REPORT_FORMATS(X) /* FORMAT_name, one a format */
#undef X
    FORMAT_COUNT
};

/* config.formats is a set of these bits. */
enum {
#define X(id, name, extension) FORMAT_##id = 1 << FORMAT_INDEX_##id,
    REPORT_FORMATS(X)
#undef X
};

struct config_format {
    const char *name;
    const char *extension;
};
extern const struct config_format config_formats[FORMAT_COUNT];
/* Formats that draw memory over time: they turn the event timeline on. */
#define FORMATS_WITH_TIMELINE (FORMAT_HTML | FORMAT_PERFETTO | FORMAT_MEMVIZ)
#define CONFIG_DEFAULT_EVENTS (1u << 20)

enum { OOM_OFF, OOM_FIRST, OOM_EVERY };

#define CONFIG_MAX_DEPTH 256
#define CONFIG_TEXT_MAX 512

/* Each type's member of struct config, whose members are settings.def's
 * rows: every setting, its default, its variable, its option and its
 * README text are there. */
#define CONFIG_FIELD_BOOL(field) int field
#define CONFIG_FIELD_INT(field) int field
#define CONFIG_FIELD_SIZE(field) uint64_t field
#define CONFIG_FIELD_EVENTS(field) uint64_t field
#define CONFIG_FIELD_FORMATS(field) int field /* FORMAT_* bits */
#define CONFIG_FIELD_SIGNAL(field) int field  /* 0: off */
#define CONFIG_FIELD_MODE(field) int field
#define CONFIG_FIELD_OOM(field) int field /* OOM_* */
#define CONFIG_FIELD_TEXT(field) char field[CONFIG_TEXT_MAX]
#define CONFIG_FIELD_TEMPLATE(field) char field[CONFIG_TEXT_MAX]

struct config {
#define SETTING(field, NAME, type, ...) CONFIG_FIELD_##type(field);
#include "settings.def"
#undef SETTING
};

extern struct config config;

/* Read the environment. Safe to call more than once; the last call wins. */
void config_load(void);

/* Parsers, shared with the tests. Each returns 0 on success, -1 if `text` is
 * not a valid value (then *out is untouched). */
int config_parse_bool(const char *text, int *out);
int config_parse_int(const char *text, long min, long max, long *out);
int config_parse_size(const char *text, uint64_t *out);
int config_parse_formats(const char *text, int *out);     /* "text,json,html", "none" */
int config_parse_events(const char *text, uint64_t *out); /* 100000, 64K, 1M, 0 */
const char *config_format_names(int formats, char *text, size_t size);
/* "USR2", "SIGUSR1", "12", "off"; never a signal whose default action the
 * program relies on (see config.c): those give -2; the C library's own
 * real-time signals (32, 33: below SIGRTMIN) give -3. */
int config_parse_signal(const char *text, int *out);
int config_parse_mode(const char *text, int *out); /* octal permissions: "0600", "640" */
int config_parse_oom(const char *text, int *out);  /* first, every, off */

/* Checking values without using them (`cumemtrace run` before it starts the
 * program, the library when it loads). config_check: 0 when `value` is a
 * valid value of `variable` ("CUMEMTRACE_TOP"), -1 when it is not (`why`
 * then says why in words that follow the value: "is not a whole number from
 * 1 to 100000"), -2 when `variable` is no setting. */
int config_check(const char *variable, const char *value, char *why, size_t size);
/* The setting whose variable is spelt closest to `variable` (a transposition
 * or up to three letters away), or NULL. */
const char *config_closest(const char *variable);
/* 1 for a setting's variable or another the project reads (CUMEMTRACE_TEST_*,
 * CUMEMTRACE_NO_LIBDW, ...), else 0. */
int config_known(const char *variable);
/* The CUMEMTRACE_* variables of the environment that config_load would
 * ignore: unknown names (said here, with `say`, each with the closest
 * setting) and malformed values (left for config_load to say, with the value
 * it uses instead). Returns how many. Allocates nothing. */
int config_check_environment(int say);
/* The report path template config_load makes of CUMEMTRACE_OUTPUT (the
 * default name joined to a directory), in `text`; returns `text`. */
const char *config_output_template(char *text, size_t size);
/* Every setting's value while its variable is unset. */
extern const struct config config_defaults;

#endif
