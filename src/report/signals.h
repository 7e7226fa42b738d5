/* signals.h - snapshot on a signal, dump on a crash (see signals.c). */
#ifndef CUMEMTRACE_SIGNALS_H
#define CUMEMTRACE_SIGNALS_H

void signals_start(void);        /* at the first CUDA event */
void signals_after_fork(void);   /* in the child */
void signals_drain(void);        /* at exit: finish pending snapshots */

#endif
