/* cli_common.c - loading, output and stack names shared by the commands. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "config.h"
#include "frames.h"

int cli_usage_error(const char *command, const char *message, const char *detail)
{
    fprintf(stderr, "cumemtrace: %s%s%s (see cumemtrace %s%s--help)\n", message, detail ? ": " : "",
            detail ? detail : "", command ? command : "", command ? " " : "");
    return CLI_USAGE;
}

int cli_load(const char *path, const struct report_options *options, struct loaded_report *loaded)
{
    char error[512];
    if (report_load(path, options, loaded, error, sizeof(error)) == 0)
        return 0;
    fprintf(stderr, "cumemtrace: cannot read '%s': %s\n", path, error);
    return -1;
}

int cli_load_summary(const char *path, const struct report_options *options,
                     struct loaded_report *loaded)
{
    char error[512];
    if (report_load_summary(path, options, loaded, error, sizeof(error)) == 0)
        return 0;
    fprintf(stderr, "cumemtrace: cannot read '%s': %s\n", path, error);
    return -1;
}

int cli_file_mode(void)
{
    const char *text = getenv("CUMEMTRACE_FILE_MODE");
    int mode = OUTPUT_DEFAULT_MODE;
    if (text && *text && config_parse_mode(text, &mode) < 0)
        fprintf(stderr,
                "cumemtrace: CUMEMTRACE_FILE_MODE='%s' is not octal permissions such as "
                "0600 or 0640; using 0600\n",
                text);
    return mode;
}

/* The number N when PATH names a descriptor of this process: /dev/fd/N,
 * /proc/self/fd/N, /proc/thread-self/fd/N, /proc/PID/fd/N of our own pid,
 * or a link to one (/dev/stdout, /dev/stderr, a link of the user's). Those
 * names are the caller's descriptor, whatever file is behind it (a regular
 * file a shell redirected there): never a name to replace. -1 if not. */
static int descriptor_named(const char *path)
{
    char name[OUTPUT_PATH_MAX], target[OUTPUT_PATH_MAX], own[64];
    snprintf(name, sizeof(name), "%s", path);
    snprintf(own, sizeof(own), "/proc/%d/fd/", (int)getpid());
    for (int hops = 0; hops < 40; hops++) {
        static const char *const prefixes[] = {"/dev/fd/", "/proc/self/fd/",
                                               "/proc/thread-self/fd/", NULL};
        const char *number = NULL;
        for (int i = 0; prefixes[i] && !number; i++)
            if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
                number = name + strlen(prefixes[i]);
        if (!number && strncmp(name, own, strlen(own)) == 0)
            number = name + strlen(own);
        if (number) {
            char *end;
            long fd = strtol(number, &end, 10);
            return *number >= '0' && *number <= '9' && *end == '\0' && fd <= 1 << 30 ? (int)fd : -1;
        }
        ssize_t n = readlink(name, target, sizeof(target) - 1);
        if (n <= 0)
            return -1;
        target[n] = '\0';
        if (target[0] == '/') {
            memcpy(name, target, (size_t)n + 1);
        } else { /* relative to the link's directory */
            char *slash = strrchr(name, '/');
            size_t keep = slash ? (size_t)(slash - name) + 1 : 0;
            if (keep + (size_t)n >= sizeof(name))
                return -1;
            memcpy(name + keep, target, (size_t)n + 1);
        }
    }
    return -1;
}

/* PATH names one of our descriptors (descriptor_named): written through a
 * duplicate of it, as it is, at its offset. 1 if it is open, -1 if that
 * descriptor is not open, 0 if PATH is no such name. */
static int open_descriptor(struct cli_output *output, const char *path)
{
    int named = descriptor_named(path);
    if (named < 0)
        return 0;
    int fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return -1;
    out_fd(&output->out, fd);
    output->as_is = 1;
    return 1;
}

/* PATH already there and not a regular file (nor a directory): a FIFO, a
 * device, a pipe. Opened for plain writing, never created, truncated or
 * replaced; should it be a regular file by the time it is open (swapped
 * meanwhile), it is left alone and replaced like any. 1 if it is open. */
static int open_as_is(struct cli_output *output, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return 0;
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    out_fd(&output->out, fd);
    output->as_is = 1;
    return 1;
}

int cli_output_open(struct cli_output *output, const char *path)
{
    output->path[0] = '\0';
    output->as_is = 0;
    if (!path) {
        out_fd(&output->out, STDOUT_FILENO);
        return CLI_OK;
    }
    snprintf(output->path, sizeof(output->path), "%s", path);
    int opened = open_descriptor(output, path);
    if (opened == 0)
        opened = open_as_is(output, path);
    if (opened == 0 && out_create(&output->out, path, cli_file_mode()) < 0)
        opened = -1;
    if (opened < 0) {
        fprintf(stderr, "cumemtrace: cannot write '%s': %s\n", path, strerror(errno));
        return CLI_UNREADABLE;
    }
    return CLI_OK;
}

int cli_output_close(struct cli_output *output)
{
    if (!output->path[0] || output->as_is) {
        out_flush(&output->out);
        int failed = output->out.failed;
        errno = output->out.error;
        if (output->as_is && close(output->out.fd) < 0 && !failed) {
            failed = 1;
        }
        if (failed) {
            fprintf(stderr, "cumemtrace: cannot write %s%s%s: %s\n",
                    output->path[0] ? "'" : "to stdout", output->path, output->path[0] ? "'" : "",
                    strerror(errno));
            return CLI_UNREADABLE;
        }
        return CLI_OK;
    }
    if (out_replace(&output->out, output->path, sizeof(output->path), "", NULL, NULL) < 0) {
        fprintf(stderr, "cumemtrace: cannot write '%s': %s\n", output->path, strerror(errno));
        return CLI_UNREADABLE;
    }
    return CLI_OK;
}

static const struct symbol *symbol_at(const struct report *r, uintptr_t address)
{
    long index = report_frame_index(r, address);
    return index >= 0 ? &r->symbols[index] : NULL;
}

static const struct stack *stack_at(const struct report *r, uint32_t stack_id)
{
    return stack_id >= 1 && stack_id <= r->stack_count ? &r->stacks[stack_id - 1] : NULL;
}

void cli_script_folder(const struct report *r, char *folder, size_t size)
{
    folder[0] = '\0';
    /* The script: the first argument of a python* program that is not one
     * of its options (-W and -X take the next one); none for -m and -c. */
    const char *argument = r->argv, *end = r->argv + r->argv_bytes;
    if (argument >= end || strncmp(output_base_name(argument), "python", 6) != 0)
        return;
    const char *script = NULL;
    for (argument += strlen(argument) + 1; argument < end; argument += strlen(argument) + 1) {
        if (strcmp(argument, "-m") == 0 || strcmp(argument, "-c") == 0 ||
            strcmp(argument, "-") == 0)
            return;
        if (strcmp(argument, "-W") == 0 || strcmp(argument, "-X") == 0) {
            argument += strlen(argument) + 1;
            continue;
        }
        if (argument[0] != '-') {
            script = argument;
            break;
        }
    }
    if (!script || script >= end)
        return;
    char joined[OUTPUT_PATH_MAX], real[OUTPUT_PATH_MAX];
    if (script[0] == '/' || r->start_dir[0]) {
        /* Named as the report names its frames: the real path, from the
         * directory the program started in. */
        int n = script[0] == '/' ? snprintf(joined, sizeof(joined), "%s", script)
                                 : snprintf(joined, sizeof(joined), "%s/%s", r->start_dir, script);
        if (n < 0 || (size_t)n >= sizeof(joined))
            return; /* longer than any path */
        output_real_path(joined, NULL, real, sizeof(real));
        char *slash = strrchr(real, '/');
        *slash = '\0';
        snprintf(folder, size, "%s", slash == real ? "/" : real);
        return;
    }
    const char *slash = strrchr(script, '/');
    /* A report that does not say where the program started: Python names
     * its frames the working directory joined to the script, and that
     * directory is in the script's own frame's file. */
    size_t n = strlen(script);
    for (size_t i = 0; i < r->address_count; i++) {
        const struct symbol *s = &r->symbols[i];
        size_t length = s->python && s->file ? strlen(s->file) : 0;
        if (length > n && s->file[length - n - 1] == '/' &&
            strcmp(s->file + length - n, script) == 0) {
            snprintf(joined, sizeof(joined), "%.*s/%.*s", (int)(length - n - 1), s->file,
                     slash ? (int)(slash - script) : 1, slash ? script : ".");
            output_path_normal(joined, folder, size);
            return;
        }
    }
    snprintf(joined, sizeof(joined), "%.*s", slash ? (int)(slash - script) : 1,
             slash ? script : ".");
    output_path_normal(joined, folder, size);
}

void cli_match_path(const char *file, const char *folder, char *key, size_t size)
{
    char normal[OUTPUT_PATH_MAX];
    output_path_normal(file, normal, sizeof(normal));
    size_t n = strlen(folder);
    if (n && strcmp(folder, "/") != 0 && strncmp(normal, folder, n) == 0 && normal[n] == '/')
        snprintf(key, size, "<script>%s", normal + n);
    else if (n && strcmp(folder, ".") == 0 && normal[0] != '/' && strncmp(normal, "../", 3) != 0)
        snprintf(key, size, "<script>/%s", normal);
    else
        snprintf(key, size, "%s", normal);
}

/* A frame as stack keys name it; a Python frame's file as cli_match_path
 * makes it against the program's `script` folder. */
static size_t frame_text(const struct symbol *s, const char *script, char *text, size_t size)
{
    int n;
    char file[OUTPUT_PATH_MAX];
    if (s && s->python && s->file && script)
        cli_match_path(s->file, script, file, sizeof(file));
    else
        snprintf(file, sizeof(file), "%s", s && s->file ? s->file : "?");
    if (!s)
        n = snprintf(text, size, "?");
    else if (s->python)
        n = snprintf(text, size, "%s at %s:%d [python]", s->function ? s->function : "?", file,
                     s->line);
    else if (s->file)
        n = snprintf(text, size, "%s at %s:%d", s->function ? s->function : "?", s->file, s->line);
    else if (s->function)
        n = snprintf(text, size, "%s [%s]", s->function,
                     s->module ? output_base_name(s->module) : "?");
    else if (s->module)
        n = snprintf(text, size, "%s+0x%lx", output_base_name(s->module),
                     (unsigned long)s->module_offset);
    else
        n = snprintf(text, size, "?");
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

/* cli_stack_key with the report's script folder already found. */
static char *stack_key(const struct report *r, uint32_t stack_id, const char *script)
{
    const struct stack *s = stack_at(r, stack_id);
    size_t size = 64, used = 0;
    char *key = malloc(size);
    if (!key)
        return NULL;
    key[0] = '\0';
    for (uint32_t i = 0; s && i < s->depth; i++) {
        char frame[2048];
        size_t n =
            frame_text(symbol_at(r, r->frames[s->first_frame + i]), script, frame, sizeof(frame));
        if (used + n + 2 > size) {
            while (used + n + 2 > size)
                size *= 2;
            char *bigger = realloc(key, size);
            if (!bigger) {
                free(key);
                return NULL;
            }
            key = bigger;
        }
        memcpy(key + used, frame, n);
        used += n;
        key[used++] = '\n';
        key[used] = '\0';
    }
    return key;
}

char *cli_stack_key(const struct report *r, uint32_t stack_id)
{
    char script[OUTPUT_PATH_MAX];
    cli_script_folder(r, script, sizeof(script));
    return stack_key(r, stack_id, script);
}

void cli_stack_site(const struct report *r, uint32_t stack_id, char *text, size_t size)
{
    frames_site_text(r, stack_id, text, size);
    if (!text[0])
        snprintf(text, size, "(no stack recorded)");
}

/* Where a short list of frames starts: the operation a framework's thread
 * ran, else the framework call the site made, else the site; the CUDA call
 * inside is the same in every stack. */
static uint32_t first_shown(const struct frame_view *view)
{
    long first = view->operation >= 0 ? view->operation : view->call >= 0 ? view->call : view->site;
    return first > 0 ? (uint32_t)first : 0;
}

void cli_write_frames(struct out *out, const struct report *r, uint32_t stack_id, int limit,
                      const char *indent)
{
    const struct stack *s = stack_at(r, stack_id);
    if (!s || s->depth == 0) {
        out_printf(out, "%s(no stack recorded)\n", indent);
        return;
    }
    struct frame_view view;
    frames_view(r, s, &view);
    int written = 0, more = 0;
    for (uint32_t i = first_shown(&view); i < s->depth; i++) {
        if (frames_marker(r, r->frames[s->first_frame + i]) && written < limit) {
            out_printf(out,
                       "%s-- this thread runs no Python; the main thread's frames at that "
                       "moment:\n",
                       indent);
            continue;
        }
        if (frames_left_out(r, s, i, &view))
            continue;
        if (written == limit) {
            more++;
            continue;
        }
        char frame[2048], shown[4 * sizeof(frame)];
        frame_text(symbol_at(r, r->frames[s->first_frame + i]), NULL, frame, sizeof(frame));
        out_printf(out, "%s%s%s\n", indent, output_text(frame, shown, sizeof(shown)),
                   (long)i == view.site ? "   <- site" : "");
        written++;
    }
    if (more)
        out_printf(out, "%s... %d more frames\n", indent, more);
}

void cli_write_frames_json(struct out *out, const struct report *r, uint32_t stack_id, int limit)
{
    const struct stack *s = stack_at(r, stack_id);
    struct frame_view view = {-1, -1, -1, -1, -1};
    if (s)
        frames_view(r, s, &view);
    out_str(out, "[");
    int written = 0;
    for (uint32_t i = first_shown(&view); s && i < s->depth && written < limit; i++) {
        if (frames_left_out(r, s, i, &view))
            continue;
        uintptr_t address = r->frames[s->first_frame + i];
        const struct symbol *symbol = symbol_at(r, address);
        out_str(out, written++ ? ",{\"function\":" : "{\"function\":");
        out_json_string(out, symbol ? symbol->function : NULL);
        out_str(out, ",\"file\":");
        out_json_string(out, symbol ? symbol->file : NULL);
        if (symbol && symbol->file)
            out_printf(out, ",\"line\":%d", symbol->line);
        else
            out_str(out, ",\"line\":null");
        out_str(out, ",\"module\":");
        out_json_string(out, symbol && symbol->module ? output_base_name(symbol->module) : NULL);
        out_printf(out, ",\"python\":%s,\"origin\":\"%s\",\"site\":%s}",
                   symbol && symbol->python ? "true" : "false",
                   origin_name(frames_origin(r, address)), (long)i == view.site ? "true" : "false");
    }
    out_str(out, "]");
}

const char *const cli_moment_names[] =
    {[CLI_AT_END] = "end", [CLI_AT_PEAK] = "peak", [CLI_AT_EXIT] = "exit"};

int cli_moment_for(const struct report *r, int wanted)
{
    return wanted == CLI_AT_END && !r->end.ended ? CLI_AT_EXIT : wanted;
}

const char *cli_moment_text(const struct report *r, int moment)
{
    if (moment == CLI_AT_END)
        return "at the program's end, before the interpreter's teardown";
    if (moment == CLI_AT_PEAK)
        return "at each stack's own peak";
    if (strcmp(r->reason, "exit") != 0)
        return "live when the report was written";
    return r->end.ended ? "live at exit, after the interpreter's teardown" : "live at exit";
}

uint64_t cli_device_bytes(const struct report *r, int slot, int moment)
{
    const struct counters *c = report_counters(r, slot, COUNTER_DEVICE_MEMORY);
    if (moment == CLI_AT_PEAK)
        return c->bytes_peak;
    if (moment == CLI_AT_END && r->end.ended && r->end.has_device_bytes)
        return r->end.device_bytes[slot];
    return c->bytes_current;
}

uint64_t cli_bytes_at(const struct report *r, int moment)
{
    uint64_t total = 0;
    for (int d = 0; d < r->device_count; d++)
        total += cli_device_bytes(r, r->devices[d].slot, moment);
    return total;
}

void cli_format_change(long long change, char *text, size_t size)
{
    char bytes[24];
    unsigned long long magnitude =
        change < 0 ? 0ULL - (unsigned long long)change : (unsigned long long)change;
    format_bytes(magnitude, bytes, sizeof(bytes));
    snprintf(text, size, "%s%s", change > 0 ? "+" : change < 0 ? "-" : "", bytes);
}

struct stack_entry {
    char *key;
    int report;
    uint32_t stack_id;
    uint64_t bytes;
};

static int by_key(const void *a, const void *b)
{
    const struct stack_entry *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->report != y->report ? (x->report < y->report ? -1 : 1)
                                  : (x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id);
}

size_t cli_moment_stacks(const struct report *r, int moment)
{
    return moment == CLI_AT_END ? r->held_count : r->shown_count;
}

uint32_t cli_moment_stack(const struct report *r, int moment, size_t k, uint64_t *bytes)
{
    if (moment == CLI_AT_END) {
        *bytes = r->held[k].bytes;
        return r->held[k].stack_id;
    }
    const struct stack_stats *s = &r->stacks[r->shown[k] - 1].stats;
    *bytes = moment == CLI_AT_PEAK ? s->peak_live_bytes : s->live_bytes;
    return r->shown[k];
}

int cli_sum_stacks(struct stack_sums *sums, struct loaded_report *const *reports, int count,
                   const int *moments)
{
    sums->items = NULL;
    sums->count = 0;
    size_t total = 0, used = 0;
    for (int i = 0; i < count; i++)
        total += cli_moment_stacks(&reports[i]->report, moments ? moments[i] : CLI_AT_EXIT);
    struct stack_entry *entries = calloc(total + 1, sizeof(*entries));
    sums->items = calloc(total + 1, sizeof(*sums->items));
    int failed = !entries || !sums->items;
    char *script = malloc(OUTPUT_PATH_MAX);
    failed |= !script;
    for (int i = 0; i < count && !failed; i++) {
        const struct report *r = &reports[i]->report;
        int moment = moments ? moments[i] : CLI_AT_EXIT;
        cli_script_folder(r, script, OUTPUT_PATH_MAX);
        for (size_t k = 0; k < cli_moment_stacks(r, moment); k++) {
            uint64_t bytes;
            uint32_t id = cli_moment_stack(r, moment, k, &bytes);
            /* A cache's segments hold its blocks, counted by their own stacks. */
            if (id == 0 || id > r->stack_count || report_cache_segment(r, id))
                continue;
            struct stack_entry *e = &entries[used];
            e->key = stack_key(r, id, script);
            if (!e->key) {
                failed = 1;
                break;
            }
            e->report = i;
            e->stack_id = id;
            e->bytes = bytes;
            used++;
        }
    }
    if (!failed)
        qsort(entries, used, sizeof(*entries), by_key);
    /* One sum per key; the key's string moves to the sum. */
    uint64_t most = 0;
    for (size_t i = 0; i < used && !failed; i++) {
        struct stack_sum *s = sums->count ? &sums->items[sums->count - 1] : NULL;
        if (!s || strcmp(s->key, entries[i].key) != 0) {
            s = &sums->items[sums->count];
            s->bytes = calloc((size_t)count, sizeof(uint64_t));
            if (!s->bytes) {
                failed = 1;
                break;
            }
            sums->count++;
            s->key = entries[i].key;
            entries[i].key = NULL;
            s->report = entries[i].report;
            s->stack_id = entries[i].stack_id;
            most = 0;
        }
        s->bytes[entries[i].report] += entries[i].bytes;
        if (entries[i].bytes > most) {
            most = entries[i].bytes;
            s->report = entries[i].report;
            s->stack_id = entries[i].stack_id;
        }
    }
    for (size_t i = 0; i < used; i++)
        free(entries[i].key);
    free(entries);
    free(script);
    if (failed) {
        cli_free_sums(sums);
        fprintf(stderr, "cumemtrace: out of memory\n");
        return -1;
    }
    return 0;
}

void cli_free_sums(struct stack_sums *sums)
{
    for (size_t i = 0; i < sums->count; i++) {
        free(sums->items[i].key);
        free(sums->items[i].bytes);
    }
    free(sums->items);
    sums->items = NULL;
    sums->count = 0;
}

/* A count for --top or --frames: 0 to a million. */
int cli_parse_count(const char *command, const char *text, long *out)
{
    char *end;
    long n = strtol(text, &end, 10);
    if (!*text || *end || n < 0 || n > 1000000)
        return cli_usage_error(command, "not a count", text);
    *out = n;
    return CLI_OK;
}

/* The text of the argument getopt_long just refused, for the message. */
static void refused(const struct cli_args *a, char *text, size_t size)
{
    const char *arg = optind >= 1 && optind <= a->argc ? a->argv[optind - 1] : "";
    if (optopt && (arg[0] != '-' || arg[1] != '-'))
        snprintf(text, size, "-%c", optopt);
    else
        snprintf(text, size, "%s", arg);
}

int cli_getopt(struct cli_args *a)
{
    if (!a->started) {
        optind = 0; /* glibc: start afresh for this argument list */
        opterr = 0;
        a->started = 1;
    }
    char text[256];
    int c = getopt_long(a->argc, a->argv, a->shorts, a->longs, NULL);
    if (c == ':') {
        refused(a, text, sizeof(text));
        char *equals = strchr(text, '=');
        if (equals)
            *equals = '\0';
        cli_usage_error(a->command, "missing value for", text);
        return '?';
    }
    if (c == '?') {
        refused(a, text, sizeof(text));
        if (optopt && strncmp(text, "--", 2) == 0 && strchr(text, '='))
            cli_usage_error(a->command, "this option takes no value", text);
        else
            cli_usage_error(a->command, "unknown option", text);
    }
    return c;
}

int cli_parse_compare(const char *command, const char *usage, int argc, char **argv,
                      struct compare_options *o)
{
    static const struct option longs[] = {{"format", required_argument, NULL, 'f'},
                                          {"output", required_argument, NULL, 'o'},
                                          {"top", required_argument, NULL, 't'},
                                          {"frames", required_argument, NULL, 'n'},
                                          {"all-frames", no_argument, NULL, 'a'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"at", required_argument, NULL, 'A'},
                                          {NULL, 0, NULL, 0}};
    struct cli_args args = {command, argc, argv, ":o:h", longs, 0};
    o->format = "text";
    report_options_of(&config, &o->report);
    for (int c; (c = cli_getopt(&args)) != -1;) {
        switch (c) {
        case 'f': o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case 'a': o->report.all_frames = 1; break;
        case 'A':
            if (strcmp(command, "diff") != 0)
                return cli_usage_error(command, "unknown option", "--at");
            o->at = optarg;
            break;
        case 't':
        case 'n':
            if (cli_parse_count(command, optarg, c == 't' ? &o->top : &o->frames) != CLI_OK)
                return CLI_USAGE;
            break;
        case 'h':
            fputs(usage, stdout);
            o->help = 1;
            return CLI_OK;
        default: return CLI_USAGE;
        }
    }
    for (int i = optind; i < argc; i++)
        o->files[o->file_count++] = argv[i];
    if (o->at && strcmp(o->at, "end") != 0 && strcmp(o->at, "peak") != 0 &&
        strcmp(o->at, "exit") != 0)
        return cli_usage_error(command, "--at takes end, peak or exit", o->at);
    int html = strcmp(command, "merge") == 0 && strcmp(o->format, "html") == 0;
    if (strcmp(o->format, "text") != 0 && strcmp(o->format, "json") != 0 && !html)
        return cli_usage_error(command,
                               strcmp(command, "merge") == 0 ? "--format takes text, json or html"
                                                             : "--format takes text or json",
                               o->format);
    return CLI_OK;
}
