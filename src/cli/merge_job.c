/* merge_job.c - the files of a job and the rank each one is (see merge_job.h).
 *
 * A survey reads the first SURVEY_FIRST bytes of a file, and at most
 * SURVEY_BYTES where those do not tell. A JSON report is written
 * {"format":...,"version":...,"reason":...,"process":{...},...}
 * (report_json.c; spaces between may be added by a tool that re-indents
 * it): the text up to the end of the process object, closed with '}', is
 * itself a JSON object, read with json.c. A file whose first
 * bytes are not that is left to the loader, which says why it is not a
 * report. A crash dump's first lines are its pid and its signal (0: written
 * at exit in place of the report). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "merge_job.h"
#include "records.h"

#define SURVEY_FIRST 4096 /* read first: a report's process object is a few hundred bytes */
#define SURVEY_BYTES (64 * 1024)
#define TREE_DEPTH 64 /* folders below a folder given, at most */

const char *job_kind_name(int kind)
{
    static const char *const names[] = {"exit", "other", "oom", "crash", "unknown"};
    return kind >= 0 && kind <= JOB_UNKNOWN ? names[kind] : "unknown";
}

static int add_file(struct job *job, const char *path)
{
    if (job->count == job->capacity) {
        size_t capacity = job->capacity ? job->capacity * 2 : 64;
        struct job_file *bigger = realloc(job->files, capacity * sizeof(*bigger));
        if (!bigger)
            return -1;
        job->files = bigger;
        job->capacity = capacity;
    }
    char *copy = strdup(path);
    if (!copy)
        return -1;
    job->files[job->count++] = (struct job_file){.path = copy,
                                                 .kind = JOB_UNKNOWN,
                                                 .rank = -1,
                                                 .local_rank = -1,
                                                 .world_size = -1,
                                                 .pid = -1};
    return 0;
}

static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n > s && strcmp(name + n - s, suffix) == 0;
}

/* A folder's reports, its folders' after, each level in version order
 * (rank-2 before rank-10). Links to folders are not followed: a tree
 * cannot loop. */
static int add_tree(struct job *job, const char *folder, int depth)
{
    struct dirent **entries;
    int n = scandir(folder, &entries, NULL, versionsort);
    if (n < 0) {
        fprintf(stderr, "cumemtrace: cannot read the folder '%s': %s\n", folder, strerror(errno));
        return -1;
    }
    int status = 0;
    for (int pass = 0; pass < 2 && status == 0; pass++) {
        for (int i = 0; i < n && status == 0; i++) {
            const char *name = entries[i]->d_name;
            if (name[0] == '.')
                continue; /* ., .., and hidden files (a report's temporary) */
            size_t size = strlen(folder) + strlen(name) + 2;
            char *path = malloc(size);
            if (!path) {
                status = -1;
                break;
            }
            snprintf(path, size, "%s%s%s", folder, ends_with(folder, "/") ? "" : "/", name);
            struct stat st;
            if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && pass == 1) {
                if (depth < TREE_DEPTH)
                    status = add_tree(job, path, depth + 1);
            } else if (pass == 0 && (ends_with(name, ".json") || ends_with(name, ".dump")) &&
                       stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                if (add_file(job, path) == 0)
                    job->files[job->count - 1].found = 1;
                else
                    status = -1;
            }
            free(path);
        }
    }
    for (int i = 0; i < n; i++)
        free(entries[i]);
    free(entries);
    if (status < 0 && errno == ENOMEM)
        fprintf(stderr, "cumemtrace: out of memory\n");
    return status;
}

int job_add(struct job *job, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return add_tree(job, path, 0);
    if (add_file(job, path) < 0) {
        fprintf(stderr, "cumemtrace: out of memory\n");
        return -1;
    }
    return 0;
}

/* Up to `most` bytes of the file (at most SURVEY_BYTES), NUL-terminated;
 * its length, or -1. */
static long read_start(const char *path, char *text, size_t most)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1; /* a pipe or FIFO: read once, by the loader */
    }
    size_t used = 0;
    while (used < most) {
        ssize_t n = read(fd, text + used, most - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    text[used] = '\0';
    return (long)used;
}

/* Where the JSON value starting at `at` ends (one past its closing brace),
 * strings and their escapes skipped; NULL when it does not end in `text`. */
static const char *object_end(const char *at, const char *end)
{
    int depth = 0, in_string = 0;
    for (; at < end; at++) {
        if (in_string) {
            if (*at == '\\')
                at++;
            else if (*at == '"')
                in_string = 0;
        } else if (*at == '"') {
            in_string = 1;
        } else if (*at == '{') {
            depth++;
        } else if (*at == '}' && --depth == 0) {
            return at + 1;
        }
    }
    return NULL;
}

static int number_of(const struct json_value *object, const char *key)
{
    double d;
    if (json_number(json_get(object, key), &d) < 0 || d < -1 || d > 2147483647.0)
        return -1;
    return (int)d;
}

/* A JSON report's reason and process: 0, or -1 when its first bytes are
 * not a report's (or out of memory). */
static int survey_report(struct job_file *file, char *text, long length)
{
    char *process = strstr(text, "\"process\"");
    const char *start = process ? process + strlen("\"process\"") : NULL;
    while (start &&
           (*start == ' ' || *start == '\n' || *start == '\r' || *start == '\t' || *start == ':'))
        start++; /* a report pretty-printed (jq .) says "process": { */
    const char *end = start && *start == '{' ? object_end(start, text + length) : NULL;
    if (!end)
        return -1;
    char saved[2] = {end[0], end[1]};
    char *cut = (char *)end;
    cut[0] = '}';
    cut[1] = '\0';
    struct json_document doc = {0};
    char error[128];
    int status = json_parse(text, (size_t)(end - text + 1), &doc, error, sizeof(error));
    cut[0] = saved[0];
    cut[1] = saved[1];
    const char *format = status == 0 ? json_string(json_get(doc.root, "format")) : NULL;
    const char *reason = status == 0 ? json_string(json_get(doc.root, "reason")) : NULL;
    const struct json_value *p = status == 0 ? json_get(doc.root, "process") : NULL;
    if (!format || strcmp(format, "cumemtrace-report") != 0 || !reason || !p) {
        json_free(&doc);
        return -1;
    }
    file->kind = strcmp(reason, "exit") == 0    ? JOB_EXIT
                 : strcmp(reason, "oom") == 0   ? JOB_OOM
                 : strcmp(reason, "crash") == 0 ? JOB_CRASH
                                                : JOB_OTHER;
    file->pid = number_of(p, "pid");
    file->rank = number_of(p, "rank");
    file->local_rank = number_of(p, "local_rank");
    file->world_size = number_of(p, "world_size");
    json_free(&doc);
    return 0;
}

/* A crash dump's pid and signal; its rank is found later. */
static int survey_dump(struct job_file *file, const char *text)
{
    const char *pid = strstr(text, "\npid ");
    const char *signal = strstr(text, "\nsignal ");
    if (!pid || !signal)
        return -1;
    file->pid = atoi(pid + 5);
    file->kind = atoi(signal + 8) == 0 ? JOB_EXIT : JOB_CRASH;
    return 0;
}

/* The number a file's name ends with, before its extension ("rank-12.dump":
 * 12), what CUMEMTRACE_OUTPUT's %r wrote; -1 when none. */
static int number_in_name(const char *path)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    const char *dot = strrchr(name, '.');
    const char *end = dot ? dot : name + strlen(name);
    const char *start = end;
    while (start > name && isdigit((unsigned char)start[-1]))
        start--;
    if (start == end || end - start > 9)
        return -1;
    return atoi(start);
}

/* What the first `length` bytes of a file, in `text`, say it is: 0, or -1
 * when they do not say. */
static int survey(struct job_file *file, char *text, long length)
{
    size_t dump_header = strlen(dump_record_names[DUMP_HEADER]);
    if (length > (long)dump_header &&
        strncmp(text, dump_record_names[DUMP_HEADER], dump_header) == 0)
        return survey_dump(file, text);
    return length > 0 ? survey_report(file, text, length) : -1;
}

static int by_rank_then_kind(const void *a, const void *b)
{
    const struct job_file *x = *(struct job_file *const *)a, *y = *(struct job_file *const *)b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->kind != y->kind ? (x->kind < y->kind ? -1 : 1) : (x < y ? -1 : x > y);
}

int job_survey(struct job *job)
{
    char *text = malloc(SURVEY_BYTES + 2);
    struct job_file **order = calloc(job->count + 1, sizeof(*order));
    if (!text || !order) {
        free(text);
        free(order);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < job->count; i++) {
        struct job_file file = job->files[i];
        long length = read_start(file.path, text, SURVEY_FIRST);
        int surveyed = survey(&file, text, length);
        if (surveyed < 0 && length == SURVEY_FIRST) /* more to read: a long command line */
            surveyed = survey(&file, text, read_start(file.path, text, SURVEY_BYTES));
        if (surveyed < 0 && file.found) {
            job->skipped++;
            free((char *)file.path);
            continue;
        }
        if (surveyed < 0)
            file.kind = JOB_UNKNOWN;
        job->files[kept++] = file;
    }
    job->count = kept;
    free(text);
    /* A dump's rank: the report of the same pid's, else its name's number. */
    for (size_t i = 0; i < job->count; i++) {
        struct job_file *f = &job->files[i];
        if (f->rank >= 0 || f->kind == JOB_UNKNOWN || f->pid < 0)
            continue;
        for (size_t k = 0; k < job->count && f->rank < 0; k++)
            if (k != i && job->files[k].pid == f->pid && job->files[k].rank >= 0)
                f->rank = job->files[k].rank;
        int number = ends_with(f->path, ".dump") ? number_in_name(f->path) : -1;
        if (f->rank < 0 && number != f->pid) /* not %p's number */
            f->rank = number;
    }
    /* Each rank's reading: its file of the lowest kind. */
    job->from_order = 0;
    for (size_t i = 0; i < job->count; i++) {
        order[i] = &job->files[i];
        if (job->files[i].rank < 0)
            job->from_order = 1;
    }
    qsort(order, job->count, sizeof(*order), by_rank_then_kind);
    for (size_t i = 0; i < job->count && !job->from_order; i++) {
        int first = i == 0 || order[i - 1]->rank != order[i]->rank;
        if (first)
            order[i]->reading = 1;
        else if (order[i - 1]->reading && order[i - 1]->kind == order[i]->kind)
            job->from_order = 1; /* two readings of one rank: which is which? */
    }
    for (size_t i = 0; job->from_order && i < job->count; i++) {
        job->files[i].rank = (int)i;
        job->files[i].reading = 1;
    }
    free(order);
    return 0;
}

void job_free(struct job *job)
{
    for (size_t i = 0; i < job->count; i++)
        free((char *)job->files[i].path);
    free(job->files);
    job->files = NULL;
    job->count = job->capacity = 0;
}
