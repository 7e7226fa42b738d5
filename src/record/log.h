/* log.h - one-line messages from the tracer to the user.
 *
 * Everything the tracer says goes to stderr as a single line that starts with
 * "cumemtrace: ", written with one write(2) so that lines from several threads
 * or processes never interleave. No stdio, no malloc: safe from any context
 * except a signal handler (vsnprintf is not async-signal-safe).
 *
 * "stderr" is the one the process had when the library was loaded: a private
 * duplicate of it (log_keep_stderr), so that a program that closes fd 2 and
 * opens a file of its own there never finds our words in its data. Should
 * the program close the duplicate's number too and reuse it, the duplicate
 * is known to be gone (its identity differs) and nothing is written. */
#ifndef CUMEMTRACE_LOG_H
#define CUMEMTRACE_LOG_H

void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Only with CUMEMTRACE_DEBUG=1: config_load() says so with log_set_debug(),
 * so that this file, the lowest of all, reads no settings itself. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_set_debug(int on);
/* At load: keep a duplicate of fd 2, close-on-exec, at a high number. Until
 * then (the command, the tests) lines go to fd 2 itself. */
void log_keep_stderr(void);
/* Let the duplicate go: in a forked child (a daemon's first step: the pipe
 * its caller reads to the end must not stay open in it because of us) and
 * at setsid(). From then on lines go to fd 2 while it is still the file the
 * duplicate was, and nowhere once the program has put another there. */
void log_release_stderr(void);
/* `fd` moved to a high number (close-on-exec), so that the program's own
 * descriptors keep the numbers they would have had without us; `fd` itself
 * if none is free up there. For the few descriptors the tracer keeps open. */
int log_move_high(int fd);
/* Whether at least `count` descriptor numbers are free below
 * RLIMIT_NOFILE: what the tracer asks before it takes descriptors a program
 * with very few could need. */
int log_descriptors_spare(int count);
/* At the tracer's start, before the driver has taken its own: too few
 * descriptors free for the tracer's own kept ones (crash dump made ahead,
 * live view) beside the driver's and the program's? Then says so in one
 * line, and log_descriptors_short() is 1 from then on: the dump made ahead
 * and the live view stay off. The program's calls are untouched. */
void log_descriptors_check(void);
int log_descriptors_short(void);
/* One descriptor kept from the tracer's start (high, close-on-exec; none
 * when log_descriptors_short()), given up for a report's file in a program
 * that took every descriptor it may (log_release_reserve: 1 if there was
 * one, now free). So the exit report survives an exhausted table. */
void log_reserve(void);
int log_release_reserve(void);
/* The descriptor our output goes to now, -1 if there is none (fd 2 was
 * closed at load, or the duplicate was closed since). Async-signal-safe. */
int log_fd(void);

/* While on, a line already said while on is not said again: the settings,
 * checked when the library loads, are read again at the first CUDA call. */
void log_once_per_line(int on);

/* Print a line only the first time this call site runs in the process.
 * `once` is a static int owned by the call site. */
#define log_once(once, ...)                                                                        \
    do {                                                                                           \
        if (!__atomic_exchange_n((once), 1, __ATOMIC_RELAXED))                                     \
            log_line(__VA_ARGS__);                                                                 \
    } while (0)

#endif
