/* jax_arrays.h - JAX's live arrays as records of their own (jax_arrays.c).
 *
 * JAX carves its arrays out of a pool that it takes from the driver at once
 * (by default 75% of the device), and tells nobody about them. But JAX
 * itself lists every live array (jax.live_arrays()) with the Python stack
 * that made it (its traceback). So the Python bridge (torch_stats.c) sweeps
 * that list now and then, with the GIL: each live array becomes a
 * KIND_JAX_ARRAY record with its traceback as its stack, and each array gone
 * since the last sweep ends its record. Nothing is called in JAX unless it
 * is imported and its backends are up: a call after its own exit clean-up
 * would start a backend again, and preallocate again. */
#ifndef CUMEMTRACE_JAX_ARRAYS_H
#define CUMEMTRACE_JAX_ARRAYS_H

enum jax_sweep {
    JAX_SWEEP_TICK,   /* the bridge's periodic one, or one for a mark: made
                          * only while sweeps have cost at most 1% of the time */
    JAX_SWEEP_REPORT, /* for a report being written: always */
    JAX_SWEEP_END,    /* the program's end: always, once */
};

/* With the GIL (any thread). */
void jax_arrays_sweep(int when);
/* Whether sweeps are being made (no lock, no Python). */
int jax_arrays_active(void);
/* In a forked child: nothing is recorded in this process yet. */
void jax_arrays_after_fork(void);

#endif
