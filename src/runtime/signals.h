/* signals.h - snapshot on a signal, dump on a crash (see signals.c). */
#ifndef CUMEMTRACE_SIGNALS_H
#define CUMEMTRACE_SIGNALS_H

void signals_start(void);      /* at the first CUDA event */
void signals_after_fork(void); /* in the child */
/* A forked child's snapshot thread is started at its first CUDA call, not
 * in the fork handler (signals.c says why): every wrapper calls this. */
extern int signals_start_pending;
void signals_start_now(void);
static inline void signals_start_if_pending(void)
{
    if (__builtin_expect(__atomic_load_n(&signals_start_pending, __ATOMIC_RELAXED), 0))
        signals_start_now();
}
void signals_drain(void); /* at exit: finish pending snapshots */

#endif
