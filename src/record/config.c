/* config.c - read CUMEMTRACE_* variables (see config.h).
 *
 * Every variable has a default; a bad value is reported once, in one line,
 * and the default is used. Nothing here allocates memory. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "log.h"

struct config config = {
    .enabled = 1,
    .output = "cumemtrace-%p",
    .formats = FORMAT_JSON,
    .depth = 32,
    .min_size = 0,
    .top = 5,
    .quiet = 0,
    .debug = 0,
    .max_blocks = 10000,
    .snapshot_signal = SIGUSR2,
    .file_mode = 0600,
    .oom = OOM_FIRST,
    .crash = 1,
    .dump_on_term = 0,
    .follow = 1,
    .python = 1,
    .live = 1,
    .sample_ms = 1000,
    .frameworks = 1,
};

int config_parse_bool(const char *text, int *out)
{
    static const char *yes[] = {"1", "yes", "true", "on"};
    static const char *no[] = {"0", "no", "false", "off"};
    for (unsigned i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) { *out = 1; return 0; }
        if (strcasecmp(text, no[i]) == 0) { *out = 0; return 0; }
    }
    return -1;
}

int config_parse_int(const char *text, long min, long max, long *out)
{
    char *end;
    if (!isdigit((unsigned char)text[0]) && text[0] != '-')
        return -1;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end != '\0' || value < min || value > max)
        return -1;
    *out = value;
    return 0;
}

/* "4096", "64K", "1.5M" is not accepted: sizes are whole numbers with an
 * optional K, M, G or T suffix (powers of 1024), optionally followed by B. */
int config_parse_size(const char *text, uint64_t *out)
{
    char *end;
    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno)
        return -1;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    }
    if (shift && toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B')
        end += 2;
    else if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end != '\0')
        return -1;
    if (shift && value > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)value << shift;
    return 0;
}

const struct config_format config_formats[FORMAT_COUNT] = {
#define X(id, name, extension) [FORMAT_INDEX_##id] = {#name, extension},
    REPORT_FORMATS(X)
#undef X
};

/* A comma-separated list of format names, or "none". */
int config_parse_formats(const char *text, int *out)
{
    int formats = 0;
    const char *p = text;
    if (strcasecmp(text, "none") == 0) {
        *out = 0;
        return 0;
    }
    while (*p) {
        size_t n = strcspn(p, ",");
        int i;
        for (i = 0; i < FORMAT_COUNT; i++)
            if (n == strlen(config_formats[i].name) &&
                strncasecmp(p, config_formats[i].name, n) == 0)
                break;
        if (i == FORMAT_COUNT)
            return -1;
        formats |= 1 << i;
        p += n;
        if (*p == ',')
            p++;
    }
    if (formats == 0)
        return -1;
    *out = formats;
    return 0;
}

/* "text,json" for FORMAT_TEXT | FORMAT_JSON, "none" for 0. */
const char *config_format_names(int formats, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < FORMAT_COUNT; i++) {
        if (!(formats & (1 << i)))
            continue;
        size_t n = strlen(config_formats[i].name) + (used ? 1 : 0);
        if (used + n >= size)
            break;
        if (used)
            text[used++] = ',';
        strcpy(text + used, config_formats[i].name);
        used += strlen(config_formats[i].name);
    }
    if (used == 0 && size > 4)
        strcpy(text, "none");
    return text;
}

/* A count of events: a whole number with an optional K or M (powers of
 * 1024, as for sizes), at most TIMELINE_MAX_EVENTS (64M). */
int config_parse_events(const char *text, uint64_t *out)
{
    uint64_t count;
    size_t n = strlen(text);
    if (n > 0 && (text[n - 1] == 'B' || text[n - 1] == 'b'))
        return -1;          /* a count, not bytes */
    if (config_parse_size(text, &count) < 0 || count > (64ull << 20))
        return -1;
    *out = count;
    return 0;
}

/* Signals a snapshot may not take: the ones whose default action programs
 * and their supervisors rely on (terminate on TERM, INT, HUP, QUIT, PIPE,
 * ALRM, XCPU, XFSZ; the crashes; job control; CHLD), and the ones no handler
 * can have. What is left: USR1, USR2, PROF, WINCH, URG, VTALRM, IO, PWR,
 * STKFLT, and the real-time signals. */
static int relied_on(int number)
{
    static const int refused[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
                                  SIGBUS,  SIGFPE,  SIGKILL, SIGSEGV, SIGPIPE, SIGALRM,
                                  SIGTERM, SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN,
                                  SIGTTOU, SIGXCPU, SIGXFSZ, SIGSYS};
    for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (number == refused[i])
            return 1;
    return 0;
}

int config_parse_signal(const char *text, int *out)
{
    static const struct {
        const char *name;
        int number;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"ILL", SIGILL},
                 {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},   {"BUS", SIGBUS},   {"FPE", SIGFPE},
                 {"KILL", SIGKILL}, {"USR1", SIGUSR1},   {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
                 {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM}, {"CHLD", SIGCHLD},
                 {"CONT", SIGCONT}, {"STOP", SIGSTOP},   {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
                 {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
                 {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
                 {"IO", SIGIO},     {"PWR", SIGPWR},     {"SYS", SIGSYS},   {"STKFLT", SIGSTKFLT}};
    long number = -1;
    if (strcasecmp(text, "off") == 0 || strcmp(text, "0") == 0) {
        *out = 0;
        return 0;
    }
    if (strncasecmp(text, "SIG", 3) == 0)
        text += 3;
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(text, names[i].name) == 0)
            number = names[i].number;
    if (number < 0 && config_parse_int(text, 1, SIGRTMAX, &number) < 0)
        return -1;
    if (relied_on((int)number))
        return -2;
    if (number > SIGSYS && (number < SIGRTMIN || number > SIGRTMAX))
        return -3;          /* the C library's own real-time signals (32, 33) */
    *out = (int)number;
    return 0;
}

int config_parse_mode(const char *text, int *out)
{
    char *end;
    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    long mode = strtol(text, &end, 8);
    if (errno || *end != '\0' || mode < 0 || mode > 0777)
        return -1;
    *out = (int)mode;
    return 0;
}

int config_parse_oom(const char *text, int *out)
{
    if (strcasecmp(text, "first") == 0)
        *out = OOM_FIRST;
    else if (strcasecmp(text, "every") == 0)
        *out = OOM_EVERY;
    else if (strcasecmp(text, "off") == 0 || strcmp(text, "0") == 0)
        *out = OOM_OFF;
    else
        return -1;
    return 0;
}

static const char *env(const char *name)
{
    const char *value = getenv(name);
    return value && value[0] ? value : NULL;
}

static void load_bool(const char *name, int *field, const char *fallback)
{
    const char *value = env(name);
    if (value && config_parse_bool(value, field) < 0)
        log_line("%s='%s' is not one of 1/0, yes/no, true/false, on/off; using %s",
                 name, value, fallback);
}

static void load_int(const char *name, int *field, long min, long max)
{
    const char *value = env(name);
    long parsed;
    if (!value)
        return;
    if (config_parse_int(value, min, max, &parsed) < 0)
        log_line("%s='%s' is not a whole number from %ld to %ld; using %d",
                 name, value, min, max, *field);
    else
        *field = (int)parsed;
}

void config_load(void)
{
    const char *value;

    load_bool("CUMEMTRACE_ENABLE", &config.enabled, "1");
    load_bool("CUMEMTRACE_QUIET", &config.quiet, "0");
    load_bool("CUMEMTRACE_DEBUG", &config.debug, "0");
    log_set_debug(config.debug);
    load_int("CUMEMTRACE_DEPTH", &config.depth, 0, CONFIG_MAX_DEPTH);
    load_int("CUMEMTRACE_TOP", &config.top, 1, 100000);
    load_int("CUMEMTRACE_MAX_BLOCKS", &config.max_blocks, 0, 100000000);
    load_bool("CUMEMTRACE_CRASH", &config.crash, "1");
    load_bool("CUMEMTRACE_DUMP_ON_TERM", &config.dump_on_term, "0");
    load_bool("CUMEMTRACE_FOLLOW", &config.follow, "1");
    load_bool("CUMEMTRACE_PYTHON", &config.python, "1");
    load_bool("CUMEMTRACE_SELF_TIME", &config.self_time, "0");
    load_bool("CUMEMTRACE_ALL_FRAMES", &config.all_frames, "0");
    load_bool("CUMEMTRACE_LIVE", &config.live, "1");
    load_bool("CUMEMTRACE_TORCH_PER_TENSOR", &config.torch_per_tensor, "0");
    load_int("CUMEMTRACE_SAMPLE_MS", &config.sample_ms, 0, 86400000);
    load_bool("CUMEMTRACE_FRAMEWORKS", &config.frameworks, "1");
    load_int("CUMEMTRACE_BLOCK_DEPTH", &config.block_depth, 0, CONFIG_MAX_DEPTH);

    int refused = 0;
    if ((value = env("CUMEMTRACE_SIGNAL")) &&
        (refused = config_parse_signal(value, &config.snapshot_signal)) == -1)
        log_line("CUMEMTRACE_SIGNAL='%s' is not a signal name such as USR2, a number, or 'off'; "
                 "using %s", value, config.snapshot_signal ? "USR2" : "off");
    else if (refused == -2)
        log_line("CUMEMTRACE_SIGNAL='%s': the program relies on that signal's own action "
                 "(TERM, INT, HUP, QUIT, PIPE, a crash, ...); using %s",
                 value, config.snapshot_signal ? "USR2" : "off");
    else if (refused == -3)
        log_line("CUMEMTRACE_SIGNAL='%s': reserved by the C library; real-time signals are "
                 "%d to %d; using %s", value, SIGRTMIN, SIGRTMAX,
                 config.snapshot_signal ? "USR2" : "off");

    if ((value = env("CUMEMTRACE_FILE_MODE")) && config_parse_mode(value, &config.file_mode) < 0)
        log_line("CUMEMTRACE_FILE_MODE='%s' is not octal permissions such as 0600 or 0640; "
                 "using %04o", value, (unsigned)config.file_mode);

    if ((value = env("CUMEMTRACE_OOM")) && config_parse_oom(value, &config.oom) < 0)
        log_line("CUMEMTRACE_OOM='%s' is not 'first', 'every' or 'off'; using first", value);

    if ((value = env("CUMEMTRACE_MIN_SIZE")) &&
        config_parse_size(value, &config.min_size) < 0)
        log_line("CUMEMTRACE_MIN_SIZE='%s' is not a size such as 4096, 64K or 1M; using %llu",
                 value, (unsigned long long)config.min_size);

    if ((value = env("CUMEMTRACE_FORMAT")) &&
        config_parse_formats(value, &config.formats) < 0) {
        char names[64];
        log_line("CUMEMTRACE_FORMAT='%s' is not a list of text, json, html, folded, perfetto, "
                 "memviz, or 'none'; using %s",
                 value, config_format_names(config.formats, names, sizeof(names)));
    }

    /* Unset: on (1M entries) only for the formats that draw memory over time. */
    config.events = (config.formats & FORMATS_WITH_TIMELINE) ? CONFIG_DEFAULT_EVENTS : 0;
    if ((value = env("CUMEMTRACE_EVENTS")) && config_parse_events(value, &config.events) < 0)
        log_line("CUMEMTRACE_EVENTS='%s' is not a count of events such as 100000, 64K or 1M "
                 "(at most 64M), or 0; using %llu", value, (unsigned long long)config.events);

    if ((value = env("CUMEMTRACE_OUTPUT"))) {
        /* A directory (a name ending in '/'): the default name inside it. */
        const char *name = value[strlen(value) - 1] == '/' ? config.output : "";
        char joined[sizeof(config.output)];
        if (strlen(value) + strlen(name) >= sizeof(config.output)) {
            log_line("CUMEMTRACE_OUTPUT is longer than %zu characters; using '%s'",
                     sizeof(config.output) - 1 - strlen(name), config.output);
        } else {
            snprintf(joined, sizeof(joined), "%s%s", value, name);
            strcpy(config.output, joined);
        }
    }

    if ((value = env("CUMEMTRACE_TORCH_TRACKER"))) {
        if (strlen(value) >= sizeof(config.torch_tracker))
            log_line("CUMEMTRACE_TORCH_TRACKER is longer than %zu characters; using the "
                     "library beside libcumemtrace.so", sizeof(config.torch_tracker) - 1);
        else
            strcpy(config.torch_tracker, value);
    }
}
