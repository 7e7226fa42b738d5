/* crashdump.c - write the tracker's state from a signal handler (see crashdump.h).
 *
 * Everything here runs in signal context on a thread that may have been
 * interrupted anywhere, including inside the tracker or inside malloc. So:
 * a static buffer and our own number formatting, write(2) only, and the
 * tracker's lock only if it can be had within a bounded wait. If another
 * thread holds it (or this one does), the tables are read as they are; the
 * dump says so ("lock busy"/"lock inside"), and the reader treats what it
 * finds with care. A dump that ends with the line "end" is complete.
 *
 * The file is made ahead of time, at the first CUDA event (and again in a
 * forked child): an unnamed O_TMPFILE in the dump's directory, mode
 * CUMEMTRACE_FILE_MODE, kept open at a high descriptor. At a crash it is
 * written and then named with linkat(2), which never follows a link planted
 * at the name and never replaces a file: the name taken is the first free of
 * PATH.dump, PATH-PID.dump, PATH-PID-2.dump, ... Where no such file could be
 * made (no directory yet, no O_TMPFILE, too few descriptors to spare: see
 * log.h), or the program has since closed ours, the dump is created at the crash with O_CREAT|O_EXCL|O_NOFOLLOW under
 * the same names. Either way only async-signal-safe calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "config.h"
#include "counters.h"
#include "crashdump.h"
#include "kinds.h"
#include "log.h"
#include "output.h"
#include "python.h"
#include "python_locations.h"
#include "records.h"
#include "registry.h"
#include "stacks.h"
#include "tracker.h"

static char path[OUTPUT_PATH_MAX]; /* absolute: the program may chdir */
static char buffer[65536];
static size_t used;
static int fd = -1;     /* the dump being written */
static int write_error; /* errno of a failed write, 0 if none */
static struct {
    int fd;         /* the unnamed file made ahead; -1 if none */
    struct stat st; /* its identity */
    char proc[40];  /* "/proc/self/fd/N" */
} ready = {.fd = -1};

/* The file made ahead of time, if it is still the one we made. */
static int ready_fd(void)
{
    struct stat st;
    if (ready.fd < 0 || fstat(ready.fd, &st) < 0 || st.st_dev != ready.st.st_dev ||
        st.st_ino != ready.st.st_ino)
        return -1;
    return ready.fd;
}

int crashdump_ready(void)
{
    return ready_fd() >= 0;
}

void crashdump_prepare(void)
{
    if (ready_fd() >= 0)
        close(ready.fd); /* a forked child's copy of its parent's file */
    ready.fd = -1;
    char template_[REPORT_TEMPLATE_MAX], relative[OUTPUT_PATH_MAX], dir[OUTPUT_PATH_MAX];
    path[0] = '\0';
    report_template(template_, NULL, 0);
    if (output_path(template_, ".dump", relative, sizeof(relative)) < 0)
        return;
    if (relative[0] == '/' || !getcwd(dir, sizeof(dir)))
        snprintf(path, sizeof(path), "%s", relative);
    else if (snprintf(path, sizeof(path), "%s/%s", dir, relative) >= (int)sizeof(path))
        path[0] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (log_descriptors_short())
        return; /* the program's to use: made at the crash instead */
    int made = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, config.file_mode);
    if (made < 0)
        return; /* made at the crash instead */
    made = log_move_high(made);
    if (fstat(made, &ready.st) < 0) {
        close(made);
        return;
    }
    ready.fd = made;
    snprintf(ready.proc, sizeof(ready.proc), "/proc/self/fd/%d", made);
}

/* ---- async-signal-safe output ---------------------------------------------- */

static void flush(void)
{
    size_t done = 0;
    while (fd >= 0 && done < used) {
        ssize_t n = write(fd, buffer + done, used - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!write_error)
                write_error = n < 0 ? errno : EIO;
            break;
        }
        done += n;
    }
    used = 0;
}

static void put(const char *s, size_t n)
{
    while (n > 0) {
        if (used == sizeof(buffer))
            flush();
        size_t take = sizeof(buffer) - used < n ? sizeof(buffer) - used : n;
        memcpy(buffer + used, s, take);
        used += take;
        s += take;
        n -= take;
    }
}

static void put_str(const char *s)
{
    put(s, strlen(s));
}

/* A record's name: the start of its line (records.h). */
static void put_record(enum dump_record record)
{
    put_str(dump_record_names[record]);
}

static void put_u64(uint64_t value)
{
    char digits[24];
    int n = 0;
    do {
        digits[sizeof(digits) - 1 - n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    put(" ", 1);
    put(digits + sizeof(digits) - n, n);
}

static void put_i64(int64_t value)
{
    if (value < 0) {
        put(" -", 2);
        char digits[24];
        int n = 0;
        uint64_t magnitude = (uint64_t)(-(value + 1)) + 1;
        do {
            digits[sizeof(digits) - 1 - n++] = (char)('0' + magnitude % 10);
            magnitude /= 10;
        } while (magnitude);
        put(digits + sizeof(digits) - n, n);
    } else {
        put_u64((uint64_t)value);
    }
}

static void put_hex(uint64_t value)
{
    static const char hex[] = "0123456789abcdef";
    char digits[20];
    int n = 0;
    do {
        digits[sizeof(digits) - 1 - n++] = hex[value & 15];
        value >>= 4;
    } while (value);
    put(" ", 1);
    put(digits + sizeof(digits) - n, n);
}

/* Bytes that may hold spaces or newlines (names, arguments), as hex. */
static void put_bytes_hex(const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    put(" ", 1);
    if (n == 0)
        put("-", 1);
    for (size_t i = 0; i < n; i++) {
        char pair[2] = {hex[(unsigned char)s[i] >> 4], hex[(unsigned char)s[i] & 15]};
        put(pair, 2);
    }
}

static void copy_file(const char *name)
{
    int in = open(name, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    char chunk[4096];
    for (;;) {
        ssize_t n = read(in, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        put(chunk, n);
    }
    close(in);
}

/* ---- the dump ----------------------------------------------------------------- */

static enum dump_lock take_lock(void)
{
    if (tracker_inside())
        return DUMP_LOCK_INSIDE;
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 200; i++) {
        if (tracker_trylock())
            return DUMP_LOCK_TAKEN;
        nanosleep(&pause, NULL);
    }
    return DUMP_LOCK_BUSY;
}

static void put_number_line(enum dump_record record, uint64_t value)
{
    put_record(record);
    put_u64(value);
    put_str("\n");
}

static void write_header(int signal, enum dump_lock lock)
{
    put_number_line(DUMP_HEADER, DUMP_FORMAT_VERSION);
    put_number_line(DUMP_PID, (uint64_t)getpid());
    put_number_line(DUMP_PPID, (uint64_t)getppid());
    put_number_line(DUMP_SIGNAL, (uint64_t)signal);
    put_record(DUMP_LOCK);
    put_str(" ");
    put_str(dump_lock_names[lock]);
    put_str("\n");
    put_number_line(DUMP_TIME_MS, tracker_now_ms());
    put_number_line(DUMP_START_UNIX_MS, (uint64_t)(tracker.start_unix * 1000));
    char cmdline[4096];
    int in = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = in >= 0 ? read(in, cmdline, sizeof(cmdline)) : -1;
    if (in >= 0)
        close(in);
    put_record(DUMP_CMDLINE);
    put_bytes_hex(cmdline, n > 0 ? (size_t)n : 0);
    put_str("\n");
    put_record(DUMP_CWD);
    put_bytes_hex(python_start_dir(), strlen(python_start_dir()));
    put_str("\n");
    for (int api = 0; api < host.api_count; api++) {
        put_record(DUMP_API);
        put_u64((uint64_t)api);
        put_str(" ");
        put_str(host.api_names[api]);
        put_str("\n");
    }
}

static void write_counters(void)
{
    static struct counter_table table; /* static: no stack or heap in a handler */
    counters_snapshot(&table);
    for (int slot = 0; slot <= MAX_DEVICES; slot++) {
        if (!table.device_seen[slot])
            continue;
        for (int set = 0; set <= KIND_COUNT; set++) {
            put_record(DUMP_COUNTERS);
            put_u64((uint64_t)slot);
            put_u64((uint64_t)set);
            for (int i = 0; i < COUNTER_KEY_COUNT; i++)
                put_u64(counter_value(&table.sets[slot][set], i));
            put_str("\n");
        }
    }
}

static void write_stacks(void)
{
    uint32_t count = stack_count();
    for (uint32_t id = 1; id <= count; id++) {
        const struct stack_record *s = stack_get(id);
        struct stack view;
        stack_view(id, &view);
        const struct stack_stats *t = &view.stats;
        put_record(DUMP_STACK);
        put_u64(id);
#define X(key, member) put_u64(t->member);
        STACK_STATS_FIELDS(X)
#undef X
        put_u64(s->depth);
        const uintptr_t *frames = stack_frames(s);
        for (uint32_t i = 0; i < s->depth; i++)
            put_hex(frames[i]);
        put_str("\n");
    }
}

static void write_blocks(void)
{
    size_t limit = registry_count() + 1; /* a bound, should a busy table loop */
    struct registry_cursor cursor;
    for (struct block *b = registry_first(&cursor); b && limit-- > 0; b = registry_next(&cursor)) {
        struct report_block c;
        report_block_of(b, &c);
        put_record(DUMP_BLOCK);
#define X(member, encoding) put_##encoding(c.member);
        DUMP_BLOCK_FIELDS(X)
#undef X
        put_str("\n");
    }
}

/* A Python program that ended before the crash (one in its interpreter's
 * teardown): when, device memory then, and what each stack held then. */
static void write_program_end(void)
{
    if (!tracker.program_ended)
        return;
    put_record(DUMP_PROGRAM_END);
    put_u64(tracker.program_end_ms);
    for (int slot = 0; slot <= COUNTER_NO_DEVICE; slot++)
        if (tracker.end_device_bytes[slot]) {
            put_u64((uint64_t)slot);
            put_u64(tracker.end_device_bytes[slot]);
        }
    put_str("\n");
    for (uint32_t id = 1; tracker.end_totals && id <= tracker.end_stacks; id++) {
        const struct end_totals *e = &tracker.end_totals[id - 1];
        if (!e->bytes)
            continue;
        put_record(DUMP_END_STACK);
        put_u64(id);
        put_u64(e->bytes);
        put_u64(e->blocks);
        put_i64(e->device);
        put_u64(e->kind);
        put_u64(e->api);
        put_str("\n");
    }
}

static void write_rest(void)
{
    uint64_t total = tracker.failures_total;
    put_record(DUMP_FAILURES_TOTAL);
    put_u64(total);
    put_u64(tracker.ooms_total);
    put_str("\n");
    for (uint64_t n = RING_FIRST(tracker.failures, total); n <= total; n++) {
        const struct failure *f = RING_ENTRY(tracker.failures, n);
        put_record(DUMP_FAILURE);
        put_u64(f->size);
        put_i64(f->device);
        put_u64((uint64_t)f->kind);
        put_u64((uint64_t)f->api);
        put_i64(f->code);
        put_u64((uint64_t)f->oom);
        put_u64(f->stack_id);
        put_u64(f->time_ms);
        put_u64(f->thread);
        put_u64(f->oom_number);
        put_str("\n");
    }
    for (int i = 0; i < LOST_COUNT; i++) {
        put_record(DUMP_LOST);
        put_u64((uint64_t)i);
        put_u64(tracker.lost[i]);
        put_str("\n");
    }
    for (uint32_t i = 0; tracker.threads && i < tracker.threads_used; i++) {
        put_record(DUMP_THREAD);
        put_u64(i + 1);
        put_i64(tracker.threads[i].tid);
        put_bytes_hex(tracker.threads[i].name, strnlen(tracker.threads[i].name, 16));
        put_str("\n");
    }
    for (uint32_t id = 1; id <= locations_count(); id++) {
        const struct python_location *l = locations_at(id);
        put_record(DUMP_PYLOC);
        put_u64(id);
        put_i64(l->line);
        put_bytes_hex(l->file, strlen(l->file));
        put_bytes_hex(l->function, strlen(l->function));
        put_str("\n");
    }
    for (uint32_t i = 0; tracker.handles && i < tracker.handles_used; i++) {
        put_record(DUMP_HANDLE);
        put_u64(i + 1);
        put_hex(tracker.handles[i]);
        put_str("\n");
    }
    write_program_end();
}

/* `value` in decimal at `at`; returns the digits written. */
static size_t decimal(char *at, uint64_t value)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    for (size_t i = 0; i < n; i++)
        at[i] = digits[n - 1 - i];
    return n;
}

/* The n-th name tried: PATH.dump, PATH-PID.dump, PATH-PID-N.dump. */
static int dump_name(int n, char *name, size_t size)
{
    size_t length = strlen(path), at = length - 5; /* path ends in ".dump" */
    if (length + 48 > size)
        return -1;
    memcpy(name, path, length + 1);
    if (n == 0)
        return 0;
    name[at++] = '-';
    at += decimal(name + at, (uint64_t)getpid());
    if (n > 1) {
        name[at++] = '-';
        at += decimal(name + at, (uint64_t)n);
    }
    memcpy(name + at, ".dump", 6);
    return 0;
}

static const char *error_text(int error)
{
    static const struct {
        int error;
        const char *text;
    } texts[] = {{ENOENT, "No such file or directory"},
                 {EACCES, "Permission denied"},
                 {EPERM, "Operation not permitted"},
                 {EROFS, "Read-only file system"},
                 {ENOSPC, "No space left on device"},
                 {EDQUOT, "Disk quota exceeded"},
                 {EEXIST, "File exists"},
                 {ENOTDIR, "Not a directory"},
                 {EMFILE, "Too many open files"},
                 {ENAMETOOLONG, "File name too long"},
                 {EIO, "Input/output error"},
                 {EXDEV, "Invalid cross-device link"},
                 {EMLINK, "Too many links"},
                 {EFBIG, "File too large"}};
    for (unsigned i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        if (texts[i].error == error)
            return texts[i].text;
    return "error";
}

static void say(const char *a, const char *b, const char *c, const char *d)
{
    int out = log_fd();
    const char *parts[] = {"cumemtrace: ", a, b, c, d, "\n"};
    for (unsigned i = 0; out >= 0 && i < sizeof(parts) / sizeof(parts[0]); i++) {
        ssize_t unused = write(out, parts[i], strlen(parts[i]));
        (void)unused;
    }
}

/* Open the dump: the file made ahead, or a new one at the first free name. */
static int open_dump(char *name, size_t size, int *error)
{
    int made = ready_fd();
    if (made >= 0) {
        name[0] = '\0'; /* named once written */
        return made;
    }
    for (int n = 0; n < 100 && dump_name(n, name, size) == 0; n++) {
        int opened =
            open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, config.file_mode);
        if (opened >= 0 || errno != EEXIST) {
            *error = errno;
            return opened;
        }
    }
    *error = EEXIST;
    return -1;
}

/* Give the file made ahead its name; 0, or an errno. */
static int name_dump(char *name, size_t size)
{
    int error = EEXIST;
    for (int n = 0; n < 100 && dump_name(n, name, size) == 0; n++) {
        if (linkat(AT_FDCWD, ready.proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0 ||
            (errno == ENOENT && linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0))
            return 0;
        error = errno;
        if (error != EEXIST)
            break;
    }
    return error;
}

/* Why the exit report gave way to a dump (crashdump_exit). */
static const char *exit_why;
static pid_t dumped; /* the process that wrote a dump */

int crashdump_exit(const char *why)
{
    if (!path[0] || !tracker.traced)
        return -1;
    if (__atomic_load_n(&dumped, __ATOMIC_ACQUIRE) == getpid())
        return 0; /* a fatal signal's dump, and then exit() from its handler */
    exit_why = why;
    crashdump_write(0);
    return 0;
}

void crashdump_write(int signal)
{
    if (!path[0] || !tracker.traced)
        return;
    int saved_errno = errno;
    static char name[OUTPUT_PATH_MAX + 48];
    int error = 0;
    fd = open_dump(name, sizeof(name), &error);
    if (fd < 0) {
        dump_name(0, name, sizeof(name));
        say("cannot write the crash dump to '", name, "': ", error_text(error));
        errno = saved_errno;
        return;
    }
    used = 0;
    write_error = 0;
    __atomic_store_n(&dumped, getpid(), __ATOMIC_RELEASE);
    enum dump_lock lock = take_lock();
    write_header(signal, lock);
    flush();
    write_counters();
    write_rest();
    flush();
    write_stacks();
    flush();
    write_blocks();
    if (lock == DUMP_LOCK_TAKEN)
        tracker_unlock();
    put_record(DUMP_MAPS);
    put_str("\n");
    copy_file("/proc/self/maps");
    put_record(DUMP_END_MAPS);
    put_str("\n");
    put_record(DUMP_END);
    put_str("\n");
    flush();
    error = write_error;
    if (!name[0] && !error)
        error = name_dump(name, sizeof(name));
    if (fd == ready.fd)
        ready.fd = -1;
    close(fd);
    fd = -1;
    if (error) {
        if (!name[0])
            dump_name(0, name, sizeof(name));
        say("cannot write the crash dump to '", name, "': ", error_text(error));
    } else {
        if (signal)
            say("fatal signal; crash dump written to ", name, "", "");
        else
            say(exit_why, "; a dump written in its place to ", name, "");
    }
    errno = saved_errno;
}
