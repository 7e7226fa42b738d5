/* cache_segments.h - which driver allocations are a framework's cache
 * segments: the frameworks' bridges say what their caches took or hand out,
 * and the stacks that allocated that memory are flagged as a cache's
 * (STACK_CACHE_SEGMENT), so reports count it as the cache's reserve, not as
 * a line's own memory. Any thread; each call enters the tracer itself. */
#ifndef CUMEMTRACE_CACHE_SEGMENTS_H
#define CUMEMTRACE_CACHE_SEGMENTS_H

#include <stdint.h>

/* The driver memory at [address, address + size) is a segment of the cache of
 * `cache_kind` (KIND_TORCH_TENSOR, ...), just taken on this thread: mark the
 * stacks that allocated it (a cudaMalloc at that address, the VMM mappings
 * of the range, and the physical memory this thread created for them). */
void segments_taken(int cache_kind, uint64_t address, uint64_t size);
/* A block of `cache_kind` was handed out at `address`: a driver allocation
 * starting there is a segment of that cache. CuPy's pool may take chunks
 * before its blocks are traced (before our allocator goes in), and hands a
 * chunk out from its start again: one look-up, no walk. */
void segments_handed_out(int cache_kind, uint64_t address);
/* The driver allocation (device memory, or a VMM mapping) that holds
 * `address` is a segment of the cache of `cache_kind`: its stack is marked,
 * for good, and its range given; -1 if no recorded allocation holds it. For
 * a framework whose segments are known only by what they hold (JAX's
 * region): an allocation starting at `address` is found at once, any other
 * by a walk of every record. */
int segments_holder(int cache_kind, uint64_t address, uint64_t *start, uint64_t *size);

#endif
