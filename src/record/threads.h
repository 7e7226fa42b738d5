/* threads.h - the tracer's own threads: the snapshot thread (signals.c),
 * the live view's (live.c) and the Python reader (torch_stats.c).
 *
 * Each is detached, named, and runs with every signal blocked: signals are
 * the program's and its main thread's business. thread_start() returns only
 * once the new thread runs, so that a program forking right after its first
 * CUDA call never forks while the thread is still being set up inside the C
 * library or a sanitizer's allocator (seen: ASan's allocator lock inherited
 * held by the child, a hang). */
#ifndef CUMEMTRACE_THREADS_H
#define CUMEMTRACE_THREADS_H

/* run(arg) on a new thread called `name`. 0, or pthread_create's error. */
int thread_start(void *(*run)(void *), void *arg, const char *name);

#endif
