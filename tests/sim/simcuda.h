/*
 * simcuda.h - sim-only helpers exported by the CUDA simulator's libcuda.so.1
 * (tests/sim/driver.c). Real CUDA has none of these: tests use them to look
 * inside the simulated driver (which exported function ran, how much device
 * memory is in use, how fragmented it is).
 *
 * A program that links against the simulator's libcuda.so.1 can call them
 * directly; one that only dlopen()s it can use the *_fn pointer types with
 * dlsym(handle, "simcuda_call_count") and so on.
 */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many times the exported driver function of that exact name ran, e.g.
 * "cuMemAlloc_v2" or "cuMemAllocAsync_ptsz" (0 for names it does not export). */
unsigned long simcuda_call_count(const char *exported_name);

/* Bytes of the device's simulated memory in use (allocations rounded up to
 * 512 bytes, plus stream-ordered pool reserves, arrays and VMM handles).
 * 0 before cuInit or for a device that does not exist. */
size_t simcuda_used_bytes(int device);

/* The largest single free hole in the device's simulated memory: the biggest
 * allocation that can still succeed. 0 before cuInit or for a bad device. */
size_t simcuda_largest_free_block(int device);

/* A VMM handle on `device` made inside the simulator, so that the tracer
 * never sees it created: stands for a handle imported from another process.
 * 0 on success. */
int simcuda_foreign_handle(unsigned long long *handle, size_t size, int device);

typedef unsigned long (*simcuda_call_count_fn)(const char *exported_name);
typedef size_t (*simcuda_used_bytes_fn)(int device);
typedef size_t (*simcuda_largest_free_block_fn)(int device);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_H */
