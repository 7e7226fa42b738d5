/* live.h - the live view's server in the traced process (live.c): a thread
 * of ours that answers `cumemtrace live PID` with the document that
 * live_format.h describes. CUMEMTRACE_LIVE=0 starts no thread. */
#ifndef CUMEMTRACE_LIVE_H
#define CUMEMTRACE_LIVE_H

#include "live_format.h"

void live_start(void);      /* at the first CUDA event */
void live_after_fork(void); /* in the child: the parent's socket closed */
/* A forked child's socket and thread are made at its first CUDA call, not
 * in the fork handler (live.c says why): every wrapper calls this. */
extern int live_start_pending;
void live_start_now(void);
static inline void live_start_if_pending(void)
{
    if (__builtin_expect(__atomic_load_n(&live_start_pending, __ATOMIC_RELAXED), 0))
        live_start_now();
}

#endif
