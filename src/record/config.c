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
#define SETTING(field, NAME, type, min, max, initial, ...) .field = initial,
#include "settings.def"
#undef SETTING
};

int config_parse_bool(const char *text, int *out)
{
    static const char *yes[] = {"1", "yes", "true", "on"};
    static const char *no[] = {"0", "no", "false", "off"};
    for (unsigned i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return 0;
        }
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
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    case 'T':
        shift = 40;
        end++;
        break;
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
        return -1; /* a count, not bytes */
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
    } names[] = {{"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},    {"ILL", SIGILL},
                 {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},      {"FPE", SIGFPE},
                 {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},    {"USR2", SIGUSR2},
                 {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},    {"CHLD", SIGCHLD},
                 {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},    {"TTIN", SIGTTIN},
                 {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},    {"XFSZ", SIGXFSZ},
                 {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},  {"IO", SIGIO},
                 {"PWR", SIGPWR},       {"SYS", SIGSYS},   {"STKFLT", SIGSTKFLT}};
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
        return -3; /* the C library's own real-time signals (32, 33) */
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

/* The rows of settings.def, as config_load reads them. */
enum setting_type {
    SETTING_BOOL,
    SETTING_INT,
    SETTING_SIZE,
    SETTING_EVENTS,
    SETTING_FORMATS,
    SETTING_SIGNAL,
    SETTING_MODE,
    SETTING_OOM,
    SETTING_TEXT,
    SETTING_TEMPLATE
};

static const struct setting {
    const char *variable;
    enum setting_type type;
    void *field;
    long min, max;
} settings[] = {
#define SETTING(field, NAME, type, min, max, ...)                                                  \
    {"CUMEMTRACE_" #NAME, SETTING_##type, &config.field, min, max},
#include "settings.def"
#undef SETTING
};

/* `value` as a message shows it, in `shown`: within one line, and nothing
 * a terminal would act on: a newline, a quote, a backslash, control bytes
 * and bytes above ASCII escaped (\n, \', \\, \xHH); cut short with "...". */
static void escape_value(const char *value, char *shown, size_t size)
{
    size_t used = 0;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        char piece[5];
        if (*p == '\n' || *p == '\'' || *p == '\\')
            snprintf(piece, sizeof(piece), "\\%c", *p == '\n' ? 'n' : *p);
        else if (*p < 0x20 || *p >= 0x7f)
            snprintf(piece, sizeof(piece), "\\x%02x", *p);
        else
            snprintf(piece, sizeof(piece), "%c", *p);
        size_t n = strlen(piece);
        if (used + n + 4 > size) {
            memcpy(shown + used, "...", 3);
            used += 3;
            break;
        }
        memcpy(shown + used, piece, n);
        used += n;
    }
    shown[used] = '\0';
}

/* One setting from its variable, if set; a malformed value keeps the
 * field as it is, and says so in one line. */
static void load(const struct setting *s)
{
    int *number = s->field;
    uint64_t *count = s->field;
    char *text = s->field, names[64], joined[CONFIG_TEXT_MAX];
    const char *name;
    long parsed;
    int refused;
    if (s->type == SETTING_EVENTS) /* unset: on (1M entries) only for the formats that draw
                                memory over time */
        *count = (config.formats & FORMATS_WITH_TIMELINE) ? CONFIG_DEFAULT_EVENTS : 0;
    const char *value = env(s->variable);
    if (!value)
        return;
    char shown[128];
    escape_value(value, shown, sizeof(shown));
    switch (s->type) {
    case SETTING_BOOL:
        if (config_parse_bool(value, number) < 0)
            log_line("%s='%s' is not one of 1/0, yes/no, true/false, on/off; using %d", s->variable,
                     shown, *number);
        break;
    case SETTING_INT:
        if (config_parse_int(value, s->min, s->max, &parsed) < 0)
            log_line("%s='%s' is not a whole number from %ld to %ld; using %d", s->variable, shown,
                     s->min, s->max, *number);
        else
            *number = (int)parsed;
        break;
    case SETTING_SIZE:
        if (config_parse_size(value, count) < 0)
            log_line("%s='%s' is not a size such as 4096, 64K or 1M; using %llu", s->variable,
                     shown, (unsigned long long)*count);
        break;
    case SETTING_EVENTS:
        if (config_parse_events(value, count) < 0)
            log_line("%s='%s' is not a count of events such as 100000, 64K or 1M "
                     "(at most 64M), or 0; using %llu",
                     s->variable, shown, (unsigned long long)*count);
        break;
    case SETTING_FORMATS:
        if (config_parse_formats(value, number) < 0)
            log_line("%s='%s' is not a list of text, json, html, folded, perfetto, "
                     "memviz, or 'none'; using %s",
                     s->variable, shown, config_format_names(*number, names, sizeof(names)));
        break;
    case SETTING_SIGNAL:
        refused = config_parse_signal(value, number);
        if (refused == -1)
            log_line("%s='%s' is not a signal name such as USR2, a number, or 'off'; "
                     "using %s",
                     s->variable, shown, *number ? "USR2" : "off");
        else if (refused == -2)
            log_line("%s='%s': the program relies on that signal's own action "
                     "(TERM, INT, HUP, QUIT, PIPE, a crash, ...); using %s",
                     s->variable, shown, *number ? "USR2" : "off");
        else if (refused == -3)
            log_line("%s='%s': reserved by the C library; real-time signals are "
                     "%d to %d; using %s",
                     s->variable, shown, SIGRTMIN, SIGRTMAX, *number ? "USR2" : "off");
        break;
    case SETTING_MODE:
        if (config_parse_mode(value, number) < 0)
            log_line("%s='%s' is not octal permissions such as 0600 or 0640; using %04o",
                     s->variable, shown, (unsigned)*number);
        break;
    case SETTING_OOM:
        if (config_parse_oom(value, number) < 0)
            log_line("%s='%s' is not 'first', 'every' or 'off'; using %s", s->variable, shown,
                     *number == OOM_EVERY ? "every"
                     : *number == OOM_OFF ? "off"
                                          : "first");
        break;
    case SETTING_TEXT:
        if (strlen(value) >= CONFIG_TEXT_MAX)
            log_line("%s is longer than %d characters; using %s%s%s", s->variable,
                     CONFIG_TEXT_MAX - 1, text[0] ? "'" : "the default", text, text[0] ? "'" : "");
        else
            strcpy(text, value);
        break;
    case SETTING_TEMPLATE:
        /* A directory (a name ending in '/'): the default name inside it. */
        name = value[strlen(value) - 1] == '/' ? text : "";
        if (strlen(value) + strlen(name) >= CONFIG_TEXT_MAX) {
            log_line("%s is longer than %zu characters; using '%s'", s->variable,
                     (size_t)CONFIG_TEXT_MAX - 1 - strlen(name), text);
        } else {
            snprintf(joined, sizeof(joined), "%s%s", value, name);
            strcpy(text, joined);
        }
        break;
    }
}

void config_load(void)
{
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
        load(&settings[i]);
    log_set_debug(config.debug);
}

/* Checking without using: `cumemtrace run` checks every value it is given
 * before it starts the program, and the library the environment it is
 * loaded with, before the first CUDA call reads it (config_load). */

const struct config config_defaults = {
#define SETTING(field, NAME, type, min, max, initial, ...) .field = initial,
#include "settings.def"
#undef SETTING
};

/* The variables of the project that are not settings: read by its tools
 * (symbolize.c, torch_tracker.py) or by its tests (CUMEMTRACE_TEST_*,
 * the GPU suite's CUMEMTRACE_SNAPSHOT). Never called misspelt. */
static const char *const other_variables[] = {"NO_LIBDW", "NO_SYSTEM_CUDA", "SNAPSHOT"};

static const struct setting *setting_named(const char *variable)
{
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
        if (strcmp(settings[i].variable, variable) == 0)
            return &settings[i];
    return NULL;
}

int config_check(const char *variable, const char *value, char *why, size_t size)
{
    const struct setting *s = setting_named(variable);
    if (!s)
        return -2;
    int number, refused;
    long parsed;
    uint64_t count;
    switch (s->type) {
    case SETTING_BOOL:
        if (config_parse_bool(value, &number) < 0)
            snprintf(why, size, "is not one of 1/0, yes/no, true/false, on/off");
        else
            return 0;
        break;
    case SETTING_INT:
        if (config_parse_int(value, s->min, s->max, &parsed) < 0)
            snprintf(why, size, "is not a whole number from %ld to %ld", s->min, s->max);
        else
            return 0;
        break;
    case SETTING_SIZE:
        if (config_parse_size(value, &count) < 0)
            snprintf(why, size, "is not a size such as 4096, 64K or 1M");
        else
            return 0;
        break;
    case SETTING_EVENTS:
        if (config_parse_events(value, &count) < 0)
            snprintf(why, size,
                     "is not a count of events such as 100000, 64K or 1M "
                     "(at most 64M), or 0");
        else
            return 0;
        break;
    case SETTING_FORMATS:
        if (config_parse_formats(value, &number) < 0)
            snprintf(why, size,
                     "is not a list of text, json, html, folded, perfetto, "
                     "memviz, or 'none'");
        else
            return 0;
        break;
    case SETTING_SIGNAL:
        refused = config_parse_signal(value, &number);
        if (refused == -1)
            snprintf(why, size, "is not a signal name such as USR2, a number, or 'off'");
        else if (refused == -2)
            snprintf(why, size,
                     "is a signal whose own action the program relies on "
                     "(TERM, INT, HUP, QUIT, PIPE, a crash, ...): use USR1, USR2, ... or off");
        else if (refused == -3)
            snprintf(why, size, "is reserved by the C library; real-time signals are %d to %d",
                     SIGRTMIN, SIGRTMAX);
        else
            return 0;
        break;
    case SETTING_MODE:
        if (config_parse_mode(value, &number) < 0)
            snprintf(why, size, "is not octal permissions such as 0600 or 0640");
        else
            return 0;
        break;
    case SETTING_OOM:
        if (config_parse_oom(value, &number) < 0)
            snprintf(why, size, "is not 'first', 'every' or 'off'");
        else
            return 0;
        break;
    case SETTING_TEXT:
    case SETTING_TEMPLATE:
        /* A directory: the default name is added, as load() does. */
        count = strlen(value) +
                (s->type == SETTING_TEMPLATE && value[0] && value[strlen(value) - 1] == '/'
                     ? strlen(config_defaults.output)
                     : 0);
        if (count >= CONFIG_TEXT_MAX)
            snprintf(why, size, "is longer than %d characters", CONFIG_TEXT_MAX - 1);
        else if (!value[0])
            snprintf(why, size, "is empty");
        else
            return 0;
        break;
    }
    return -1;
}

/* The edit distance of a and b, an exchange of two neighbours counting one
 * (QIUET is one from QUIET); names longer than 63 count as far. */
static size_t distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 64;
    size_t rows[3][64], *before = rows[0], *previous = rows[1], *row = rows[2];
    for (size_t j = 0; j <= m; j++)
        previous[j] = j;
    for (size_t i = 1; i <= n; i++) {
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = previous[j - 1] + cost;
            if (previous[j] + 1 < best)
                best = previous[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            row[j] = best;
        }
        size_t *oldest = before;
        before = previous;
        previous = row;
        row = oldest;
    }
    return previous[m];
}

const char *config_closest(const char *variable)
{
    const char *closest = NULL;
    size_t best = 4; /* more edits than three: no guess */
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        size_t d = distance(variable, settings[i].variable);
        if (d < best) {
            best = d;
            closest = settings[i].variable;
        }
    }
    return closest;
}

int config_known(const char *variable)
{
    static const char prefix[] = "CUMEMTRACE_";
    if (setting_named(variable))
        return 1;
    if (strncmp(variable, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    const char *name = variable + sizeof(prefix) - 1;
    if (strncmp(name, "TEST_", 5) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(other_variables) / sizeof(other_variables[0]); i++)
        if (strcmp(name, other_variables[i]) == 0)
            return 1;
    return 0;
}

extern char **environ;

int config_check_environment(int say)
{
    static const char prefix[] = "CUMEMTRACE_";
    int problems = 0;
    char name[128], why[160];
    for (char **e = environ; e && *e; e++) {
        const char *equals = strchr(*e, '=');
        size_t n = equals ? (size_t)(equals - *e) : 0;
        if (n <= sizeof(prefix) - 1 || n >= sizeof(name) ||
            strncmp(*e, prefix, sizeof(prefix) - 1) != 0)
            continue;
        memcpy(name, *e, n);
        name[n] = '\0';
        const char *value = equals + 1;
        if (!config_known(name)) {
            const char *closest = config_closest(name);
            problems++;
            if (say && closest)
                log_line("%s is not a setting (did you mean %s?); ignored", name, closest);
            else if (say)
                log_line("%s is not a setting (README.md, Settings, lists them); ignored", name);
        } else if (value[0] && config_check(name, value, why, sizeof(why)) == -1) {
            problems++; /* config_load says it, with the value used instead */
        }
    }
    return problems;
}

const char *config_output_template(char *text, size_t size)
{
    const char *value = env("CUMEMTRACE_OUTPUT");
    if (!value)
        value = config_defaults.output;
    snprintf(text, size, "%s%s", value,
             value[strlen(value) - 1] == '/' ? config_defaults.output : "");
    return text;
}
