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

enum { OOM_OFF, OOM_FIRST, OOM_EVERY };

#define CONFIG_MAX_DEPTH 256
#define CONFIG_TEXT_MAX 512

/* Every setting, one row each; nothing else declares one. The struct config
 * and its defaults, config_load's reading of the variables, `cumemtrace
 * run`'s options and the README's table of settings (tests/unit/
 * test_settings_doc.c holds it equal) all come from these rows:
 *
 *   X(field, NAME, type, min, max, initial, shown, short, option, argument, help, doc)
 *
 *   field     its member of struct config
 *   NAME      the variable is CUMEMTRACE_NAME
 *   type      how a value is read (config_parse_*): BOOL; INT, from min to
 *             max; SIZE; EVENTS; FORMATS; SIGNAL; MODE; OOM; TEXT, at most
 *             CONFIG_TEXT_MAX - 1 bytes; TEMPLATE, TEXT where a name ending
 *             in '/' is a directory, the default name inside it
 *   initial   the value while the variable is unset (EVENTS: see its doc)
 *   shown     that default, as the README shows it
 *   short, option, argument   `cumemtrace run`'s option that sets it (0,
 *             "", "": none; argument "": a flag, which sets 1)
 *   help      one line, for run's --help
 *   doc       what it does, the README's words
 *
 * The README's order: OUTPUT before the others that name files, FORMAT
 * before EVENTS (whose default depends on it). */
#define CONFIG_SETTINGS(X)                                                                       \
    X(output, OUTPUT, TEMPLATE, 0, 0, "cumemtrace-%p", "`cumemtrace-%p`", 'o', "output",         \
      "TEMPLATE",                                                                                \
      "report path template (CUMEMTRACE_OUTPUT)",                                                \
      "report path; `%p` pid, `%r` rank (`RANK`, else `LOCAL_RANK`), `%h` host, `%%`; the "      \
      "format's extension is added; a name ending in `/` is a directory, where the default "     \
      "name is used. A name already taken gets `-PID` (then `-PID-2`, ...) before the "          \
      "extension: nothing is ever replaced (see [Files](#files))")                               \
    X(file_mode, FILE_MODE, MODE, 0, 0, 0600, "`0600`", 0, "", "",                               \
      "permissions of every file written, in octal",                                             \
      "permissions of every file written (reports, dumps; also the `cumemtrace` command's "      \
      "outputs), in octal (`0640`, `0644`); the umask still applies. Reports hold the whole"     \
      " command line, hence private by default")                                                 \
    X(formats, FORMAT, FORMATS, 0, 0, FORMAT_JSON, "`json`", 'f', "format", "LIST",              \
      "text,json,html,folded,perfetto,memviz or none",                                           \
      "files to write, a comma-separated list or `none`: `text` (`.txt`), `json` (`.json`),"     \
      " `html` (`.html`, one self-contained page), `folded` (`.folded`, stacks for "             \
      "flamegraph.pl and speedscope), `perfetto` (`.trace.json`, Chrome trace for "              \
      "ui.perfetto.dev and chrome://tracing), `memviz` (`.pickle`, for PyTorch's memory_viz"     \
      " page)")                                                                                  \
    X(events, EVENTS, EVENTS, 0, 0, 0, "`0`", 0, "events", "N",                                  \
      "event timeline entries (0 off)",                                                          \
      "entries in the event timeline, a ring of the newest allocations, frees, failures and"     \
      " marks with their times (`100000`, `64K`, `1M`; at most `64M`; 40 bytes each, `0` "       \
      "off); when unset, `1M` if `html`, `perfetto` or `memviz` is among the formats. The "      \
      "oldest are dropped when it is full, and counted")                                         \
    X(depth, DEPTH, INT, 0, CONFIG_MAX_DEPTH, 32, "`32`", 0, "depth", "N",                       \
      "native frames per stack",                                                                 \
      "native frames per stack (0 turns stacks off)")                                            \
    X(native, NATIVE, BOOL, 0, 0, 1, "`1`", 0, "", "",                                           \
      "native frames in stacks",                                                                 \
      "`0`: no native frames, Python frames only (a Python program's verdicts are the same "     \
      "either way: a framework's blocks and the driver's never share a stack)")                  \
    X(min_size, MIN_SIZE, SIZE, 0, 0, 0, "`0`", 0, "min-size", "SIZE",                           \
      "smaller blocks get no stack",                                                             \
      "blocks smaller than this (e.g. `64K`) are counted but get no stack")                      \
    X(top, TOP, INT, 1, 100000, 5, "`5`", 0, "top", "N",                                         \
      "entries per section in the summary",                                                   \
      "entries per section in the stderr summary (the findings above them, the `.txt` and "   \
      "`cumemtrace report` list every entry)")                                                \
    X(all_frames, ALL_FRAMES, BOOL, 0, 0, 0, "`0`", 0, "all-frames", "",                         \
      "hide no frame in the reports",                                                            \
      "`1`: the text, HTML and folded reports show every frame; by default they hide "           \
      "process and thread start-up, the C runtime, the Python interpreter's own frames "         \
      "(libffi, the standard library) and the frameworks' dispatch frames (see *Frames that"     \
      " matter*). The JSON report always keeps every frame and marks the hidden ones (a "        \
      "frame hidden in every stack without its file and line, unless this is `1`)")              \
    X(user_packages, USER_PACKAGES, TEXT, 0, 0, "", "(none)", 0, "user-packages", "LIST",      \
      "installed packages whose Python is yours",                                              \
      "installed packages (`transformers,peft`) whose Python frames are the user's own: a "      \
      "site may be in them. By default an installed package's Python (site-packages, "          \
      "dist-packages) is a library's: the site is the user's line that called it, the "         \
      "package named beside it (see *Frames that matter*)")                                      \
    X(max_blocks, MAX_BLOCKS, INT, 0, 100000000, 10000, "`10000`", 0, "", "",                    \
      "live blocks listed one by one in the JSON",                                               \
      "live blocks listed one by one in the JSON (largest first)")                               \
    X(quiet, QUIET, BOOL, 0, 0, 0, "`0`", 'q', "quiet", "",                                      \
      "no summary on stderr",                                                                    \
      "no summary on stderr")                                                                    \
    X(enabled, ENABLE, BOOL, 0, 0, 1, "`1`", 0, "", "",                                          \
      "0 passes every call through untouched",                                                   \
      "`0` passes every call through untouched")                                                 \
    X(debug, DEBUG, BOOL, 0, 0, 0, "`0`", 0, "", "",                                             \
      "say what the hooks do",                                                                   \
      "say what the hooks do")                                                                   \
    X(python, PYTHON, BOOL, 0, 0, 1, "`1`", 0, "", "",                                           \
      "Python frames in stacks",                                                                 \
      "Python frames in stacks (CPython 3.10-3.14 with or without the GIL; other versions "      \
      "when the allocating thread holds it)")                                                    \
    X(self_time, SELF_TIME, BOOL, 0, 0, 0, "`0`", 0, "", "",                                     \
      "time our own work in CUDA calls",                                                         \
      "`1`: time the tracer's own work in every CUDA call (the real call excluded; about "       \
      "50-100 ns of clock reads added per call); JSON `tracer.self_time_ns` and per mark, a"     \
      " line in the text report. How `bench/gpu_cost.py` tells what the tracer costs a step"     \
      " when run-to-run noise is larger than the cost")                                          \
    X(growth, GROWTH, BOOL, 0, 0, 1, "`1`", 0, "", "",                                           \
      "find the growing sites (0 off)",                                                          \
      "`0`: no growth observations, no growing sites (see *Growing sites*: the sites are "       \
      "observed at the program's own events, or at its marks)")                                  \
    X(sample_ms, SAMPLE_MS, INT, 0, 86400000, 1000, "`1000`", 0, "", "",                         \
      "framework counters read apart, in ms",                                                    \
      "how often, in ms, the frameworks' own figures are read from Python "                      \
      "(`torch.cuda.memory_stats()`, CuPy's pool, JAX's live arrays: these at least every "      \
      "100 ms, within 1% of the program's time); `0`: the default")                              \
    X(snapshot_signal, SIGNAL, SIGNAL, 0, 0, SIGUSR2, "`USR2`", 0, "signal", "SIG|off",          \
      "the snapshot signal",                                                                     \
      "signal that writes a snapshot (`<output>-signal-N`): `USR1`, `USR2`, `PROF`, "            \
      "`WINCH`, `URG`, `VTALRM`, `IO`, `PWR`, `STKFLT` or a real-time signal's number "          \
      "(`SIGRTMIN`..`SIGRTMAX`: 32 and 33 are the C library's and refused); `off`. Signals "     \
      "whose own action programs rely on are refused, with one line: `TERM`, `INT`, `HUP`, "     \
      "`QUIT`, `PIPE`, `ALRM`, `CHLD`, the crashes (`SEGV`, `BUS`, `ABRT`, `FPE`, `ILL`, "       \
      "`TRAP`, `SYS`, `XCPU`, `XFSZ`), job control, `KILL`, `STOP`")                             \
    X(oom, OOM, OOM, 0, 0, OOM_FIRST, "`first`", 0, "", "",                                      \
      "report at an OOM: first, every, off",                                                     \
      "report at an out-of-memory failure (`<output>-oom`): `first`, `every`, `off`")            \
    X(crash, CRASH, BOOL, 0, 0, 1, "`1`", 0, "", "",                                             \
      "crash dump on fatal signals",                                                             \
      "crash dump (`<output>.dump`) on SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL")                \
    X(dump_on_term, DUMP_ON_TERM, BOOL, 0, 0, 0, "`0`", 0, "", "",                               \
      "also on SIGTERM and SIGINT",                                                              \
      "also on SIGTERM and SIGINT")                                                              \
    X(live, LIVE, BOOL, 0, 0, 1, "`1`", 0, "", "",                                               \
      "answer cumemtrace live",                                                                  \
      "answer `cumemtrace live PID` (a sleeping thread and an abstract unix socket per "         \
      "traced process, from its first CUDA call; only the process's own user is answered, "      \
      "and the command shows only an answer from PID itself, of PID's owner: a name taken "      \
      "first by another process is said in one line by both); `0`: neither")                     \
    X(follow, FOLLOW, BOOL, 0, 0, 1, "`1`", 0, "", "",                                           \
      "trace programs the traced one starts",                                                    \
      "`0`: programs started by the traced one are not traced (the library takes itself out"     \
      " of `LD_PRELOAD` when it loads; every other entry is kept, however long the list)")       \
    X(frameworks, FRAMEWORKS, BOOL, 0, 0, 1, "`1`", 0, "", "",                                   \
      "record the blocks frameworks carve out of their caches",                                  \
      "record the blocks PyTorch, CuPy and JAX carve out of their caches, each with its own"     \
      " stack (see *Inside the frameworks' caches*); `0`: their caches' segments only, as "      \
      "the driver hands them out")                                                               \
    X(torch_tracker, TORCH_TRACKER, TEXT, 0, 0, "",                                              \
      "(the cache's, else beside the library)", 0, "", "",                                       \
      "the libcumemtrace_torch.so to load",                                                      \
      "the `libcumemtrace_torch.so` to load for PyTorch, instead of the one `cumemtrace "        \
      "run` builds into the per-user cache (or `tools/build-torch-tracker.sh` beside the "       \
      "library); refused, in one line, by any PyTorch but the one it was built for")             \
    X(block_depth, BLOCK_DEPTH, INT, 0, CONFIG_MAX_DEPTH, 0, "`0`", 0, "", "",                   \
      "native frames of a framework block allocated by a thread running Python",                 \
      "native frames of a framework's block where the framework names the operation itself:"     \
      " on a thread that runs Python, its Python frames name the line and, through the "         \
      "framework's own Python, the operation; on PyTorch's autograd engine threads (no "         \
      "Python), the backward node being run is recorded as one frame, its `apply()` (e.g. "      \
      "`AddmmBackward0::apply`). Other threads that run no Python get `CUMEMTRACE_DEPTH`; a"     \
      " value of `CUMEMTRACE_DEPTH` or more unwinds every block's frames")                       \
    X(holders, HOLDERS, BOOL, 0, 0, 1, "`1`", 0, "", "",                                         \
      "name the Python objects that hold the tensors",                                           \
      "at a report made with Python's GIL (a snapshot, PyTorch's OOM observer, Python's exit)"   \
      ", walk from Python's roots (module globals, class attributes, live threads' frames, "     \
      "closures) to the tensors, and name what holds each growing or large group "               \
      "(`__main__.model.outs`, a list of 2,500 tensors); at most "                               \
      "`CUMEMTRACE_HOLDERS_MS` and 4 million objects. `0`: no walk")                             \
    X(holders_ms, HOLDERS_MS, INT, 1, 600000, 1000, "`1000`", 0, "", "",                         \
      "the holders walk's time budget, in ms",                                                   \
      "the most the holders walk may take, in milliseconds; a walk cut short says so in one "    \
      "line, and names what it reached")                                                         \
    X(torch_per_tensor, TORCH_PER_TENSOR, BOOL, 0, 0, 0, "`0`", 0, "", "",                       \
      "every PyTorch tensor its own cudaMalloc",                                                 \
      "`1`: every PyTorch tensor is its own `cudaMalloc`, traced with its own stack (sets "      \
      "`PYTORCH_NO_CUDA_MEMORY_CACHING=1` before the program starts; on the H100 MLP step "      \
      "of docs/PERFORMANCE.md PyTorch itself then runs 2.6x slower, the tracer adds ~5% to "     \
      "that). Not needed to see each tensor's line any more: see *Inside the frameworks' "       \
      "caches*")


/* Each type's member of struct config. */
#define CONFIG_FIELD_BOOL(field) int field
#define CONFIG_FIELD_INT(field) int field
#define CONFIG_FIELD_SIZE(field) uint64_t field
#define CONFIG_FIELD_EVENTS(field) uint64_t field
#define CONFIG_FIELD_FORMATS(field) int field      /* FORMAT_* bits */
#define CONFIG_FIELD_SIGNAL(field) int field       /* 0: off */
#define CONFIG_FIELD_MODE(field) int field
#define CONFIG_FIELD_OOM(field) int field          /* OOM_* */
#define CONFIG_FIELD_TEXT(field) char field[CONFIG_TEXT_MAX]
#define CONFIG_FIELD_TEMPLATE(field) char field[CONFIG_TEXT_MAX]

struct config {
#define X(field, NAME, type, ...) CONFIG_FIELD_##type(field);
    CONFIG_SETTINGS(X)
#undef X
};



extern struct config config;

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
