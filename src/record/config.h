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
#define REPORT_FORMATS(X)                                                                    \
    X(TEXT, text, ".txt")                                                                    \
    X(JSON, json, ".json")                                                                   \
    X(HTML, html, ".html")              /* one self-contained page */                       \
    X(FOLDED, folded, ".folded")        /* folded stacks for flamegraph.pl, speedscope */   \
    X(PERFETTO, perfetto, ".trace.json") /* Chrome Trace Event JSON (ui.perfetto.dev) */    \
    X(MEMVIZ, memviz, ".pickle")        /* a pickle for PyTorch's memory_viz */

enum format_index {
#define X(id, name, extension) FORMAT_INDEX_##id,
    REPORT_FORMATS(X)
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

struct config {
    int enabled;            /* CUMEMTRACE_ENABLE (default 1) */
    char output[512];       /* CUMEMTRACE_OUTPUT path template (%p %r %h %%) */
    int formats;            /* CUMEMTRACE_FORMAT: FORMAT_* bits (default json) */
    int depth;              /* CUMEMTRACE_DEPTH native frames (default 32, 0 = off) */
    uint64_t min_size;      /* CUMEMTRACE_MIN_SIZE: smaller blocks get no stack */
    int top;                /* CUMEMTRACE_TOP stacks in the text report (10) */
    int quiet;              /* CUMEMTRACE_QUIET: no summary on stderr */
    int debug;              /* CUMEMTRACE_DEBUG: say what the hooks do */
    int max_blocks;         /* CUMEMTRACE_MAX_BLOCKS listed one by one in JSON */
    int snapshot_signal;    /* CUMEMTRACE_SIGNAL: 0 = off (default SIGUSR2) */
    int file_mode;          /* CUMEMTRACE_FILE_MODE: of every file written (0600) */
    int torch_per_tensor;   /* CUMEMTRACE_TORCH_PER_TENSOR (0; acted on at load, init.c) */
    int oom;                /* CUMEMTRACE_OOM: OOM_* (default OOM_FIRST) */
    int crash;              /* CUMEMTRACE_CRASH: dump on fatal signals (default 1) */
    int dump_on_term;       /* CUMEMTRACE_DUMP_ON_TERM: also SIGTERM, SIGINT (0) */
    int follow;             /* CUMEMTRACE_FOLLOW: trace exec'd children (default 1) */
    int python;             /* CUMEMTRACE_PYTHON: Python frames in stacks (default 1) */
    int self_time;          /* CUMEMTRACE_SELF_TIME: time our own work in CUDA calls (0) */
    int all_frames;         /* CUMEMTRACE_ALL_FRAMES: no frame hidden in reports (0) */
    int live;               /* CUMEMTRACE_LIVE: answer `cumemtrace live` (default 1) */
    int sample_ms;          /* CUMEMTRACE_SAMPLE_MS: growth samples apart (1000, 0 = off) */
    uint64_t events;        /* CUMEMTRACE_EVENTS: timeline ring entries (0 = off; 1M
                               when unset and a format in FORMATS_WITH_TIMELINE is on) */
    int frameworks;         /* CUMEMTRACE_FRAMEWORKS: record the blocks frameworks carve
                               out of their caches (default 1) */
    int block_depth;        /* CUMEMTRACE_BLOCK_DEPTH: native frames of such a block
                               allocated by a thread running Python (default 0: its
                               Python frames say where); other threads: depth */
    char torch_tracker[512];   /* CUMEMTRACE_TORCH_TRACKER: libcumemtrace_torch.so to load
                                  ("": the one beside libcumemtrace.so) */
};

enum { OOM_OFF, OOM_FIRST, OOM_EVERY };

extern struct config config;

#define CONFIG_MAX_DEPTH 256

/* Read the environment. Safe to call more than once; the last call wins. */
void config_load(void);

/* Parsers, shared with the tests. Each returns 0 on success, -1 if `text` is
 * not a valid value (then *out is untouched). */
int config_parse_bool(const char *text, int *out);
int config_parse_int(const char *text, long min, long max, long *out);
int config_parse_size(const char *text, uint64_t *out);
int config_parse_formats(const char *text, int *out);   /* "text,json,html", "none" */
int config_parse_events(const char *text, uint64_t *out); /* 100000, 64K, 1M, 0 */
const char *config_format_names(int formats, char *text, size_t size);
/* "USR2", "SIGUSR1", "12", "off"; never a signal whose default action the
 * program relies on (see config.c): those give -2; the C library's own
 * real-time signals (32, 33: below SIGRTMIN) give -3. */
int config_parse_signal(const char *text, int *out);
int config_parse_mode(const char *text, int *out);       /* octal permissions: "0600", "640" */
int config_parse_oom(const char *text, int *out);        /* first, every, off */

#endif
