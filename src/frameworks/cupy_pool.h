/* cupy_pool.h - CuPy's pool blocks as records of their own (cupy_pool.c).
 *
 * CuPy's default memory pool takes chunks from the driver and carves its
 * arrays' blocks out of them, telling nobody. Every block it hands out goes
 * through one process-wide allocator (cupy.cuda.set_allocator), which we
 * replace, once CuPy is imported, by one of ours that calls the pool's and
 * records the block with the allocating thread's stack. */
#ifndef CUMEMTRACE_CUPY_POOL_H
#define CUMEMTRACE_CUPY_POOL_H

/* With the GIL: put our allocator in if CuPy is imported and it is not in
 * yet. `bridge`: called on the Python bridge's own thread, which is never
 * inside cupy.cuda.using_allocator, so there cupy.cuda.get_allocator() is
 * the process-wide one: whether the program replaced ours is checked. */
void cupy_pool_check(int bridge);
/* In a forked child: our allocator is still in CuPy's copy; the view of
 * CuPy's cache is said again (the tracker's copy of it is reset). */
void cupy_pool_after_fork(void);

#endif
