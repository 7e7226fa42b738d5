/* torch_tracker.h - what libcumemtrace_torch.so (torch_tracker.cpp) and the
 * preloaded library (frameworks.c) say to each other: plain C, so the C++
 * side stays one small file and the core never sees a PyTorch type.
 *
 * The preloaded library dlopens libcumemtrace_torch.so once PyTorch's CUDA
 * allocator has allocated, checks torch_tracker_version() against the
 * PyTorch that is loaded, and calls torch_tracker_attach() with its sink.
 * From then on the sink gets every event of PyTorch's caching allocator;
 * torch_tracker_operation() names what an autograd engine thread runs. */
#ifndef CUMEMTRACE_TORCH_TRACKER_H
#define CUMEMTRACE_TORCH_TRACKER_H

#include <stdint.h>

/* PyTorch's TraceEntry::Action values, in its order. */
enum torch_tracker_action {
    TORCH_ALLOC,          /* a block handed to a tensor: address, requested size */
    TORCH_FREE_REQUESTED, /* the tensor let go; the block may wait for its streams
                             * (dropped in the tracker, as TORCH_SNAPSHOT is) */
    TORCH_FREE_COMPLETED, /* the block is back in the cache */
    TORCH_SEGMENT_ALLOC,  /* a segment from cudaMalloc: address, size */
    TORCH_SEGMENT_FREE,   /* a segment given back, before its cudaFree */
    TORCH_SEGMENT_MAP,    /* expandable segments: pages mapped at address */
    TORCH_SEGMENT_UNMAP,
    TORCH_SNAPSHOT, /* someone took torch.cuda.memory._snapshot() */
    TORCH_OOM,      /* the allocator gave up: address = the driver's free bytes */
    /* Not PyTorch's: its out-of-memory observer, called after TORCH_OOM on
     * the same thread, with the allocator's lock let go (so Python may run). */
    TORCH_OOM_OBSERVED = 64
};

struct torch_tracker_event {
    int action; /* enum torch_tracker_action */
    int device;
    uint64_t address;
    uint64_t size;
    uint64_t stream;
};

/* Called in the allocating thread, with PyTorch's allocator lock held
 * (TORCH_OOM_OBSERVED: without it). */
typedef void (*torch_tracker_sink)(const struct torch_tracker_event *event);

enum torch_tracker_status {
    TORCH_TRACKER_ATTACHED = 0,
    TORCH_TRACKER_NOT_READY = -1, /* no allocator, or not initialized yet */
    TORCH_TRACKER_REFUSED = -2,   /* the allocator refused (cudaMallocAsync backend, ...) */
};

#ifdef __cplusplus
extern "C" {
#endif
/* torch.__version__ of the headers it was compiled against. */
const char *torch_tracker_version(void);
/* Register the sink as a trace tracker and an out-of-memory observer of
 * every device's allocator: once. */
int torch_tracker_attach(torch_tracker_sink sink);
/* The code address of apply() of the autograd node this thread is running
 * (PyTorch's backward, on its engine threads), 0 if none. Safe inside the
 * sink: it reads a thread-local of PyTorch's and takes no lock. */
uint64_t torch_tracker_operation(void);
#ifdef __cplusplus
}
#endif

#endif
