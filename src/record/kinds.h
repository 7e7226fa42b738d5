/* kinds.h - what a tracked block is (its kind) and what each kind means.
 *
 * The kind decides four things: the name in reports, the key space of the
 * block registry (device pointers, VMM handles and array handles are different
 * things and may share numeric values), whether the block occupies device
 * memory, whether destroying a context frees it implicitly, and whether it is
 * memory of its own or a block a framework carved out of memory it already
 * took from the driver (a PyTorch tensor inside a cache segment): such
 * blocks are never counted in the device's memory a second time. */
#ifndef CUMEMTRACE_KINDS_H
#define CUMEMTRACE_KINDS_H

enum kind {
    KIND_DEVICE,          /* cuMemAlloc, cuMemAllocPitch */
    KIND_MANAGED,         /* cuMemAllocManaged */
    KIND_PINNED_HOST,     /* cuMemAllocHost, cuMemHostAlloc */
    KIND_REGISTERED_HOST, /* cuMemHostRegister (host memory the program owns) */
    KIND_STREAM_ORDERED,  /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    KIND_VMM_PHYSICAL,    /* cuMemCreate */
    KIND_VMM_MAPPING,     /* cuMemMap */
    KIND_VMM_RESERVATION, /* cuMemAddressReserve (address space only) */
    KIND_ARRAY,           /* cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate */
    /* A framework's blocks inside its cache: these last (kind_in_cache). */
    KIND_TORCH_TENSOR, /* a block PyTorch's caching allocator gave a tensor */
    KIND_CUPY_BLOCK,   /* a block of CuPy's memory pool */
    KIND_JAX_ARRAY,    /* the buffer of a live JAX array */
    KIND_COUNT
};

/* Key spaces of the registry: values in different spaces never collide. */
enum space {
    SPACE_MEMORY, /* device, managed, pinned and stream-ordered pointers */
    SPACE_REGISTERED,
    SPACE_VMM_HANDLE,
    SPACE_VMM_RESERVATION,
    SPACE_VMM_MAPPING,
    SPACE_ARRAY,
    SPACE_FRAMEWORK, /* blocks inside frameworks' caches */
};

const char *kind_name(int kind); /* "device", "pinned_host", ... */
int kind_space(int kind);
int kind_uses_device_memory(int kind); /* counts toward the device's memory */
int kind_freed_by_context(int kind);   /* freed implicitly by context destroy */

/* A framework's block inside its cache. Inline, by the kinds' order rather
 * than from the table: every tensor event asks, on the framework's thread,
 * and a call there kept the caller's arguments in saved registers. */
static inline int kind_in_cache(int kind)
{
    return kind >= KIND_TORCH_TENSOR && kind < KIND_COUNT;
}

#endif
