// torch_tracker.cpp - libcumemtrace_torch.so: PyTorch's tensor blocks, as
// its CUDA caching allocator hands them out.
//
// In PyTorch's default mode a cudaMalloc is a whole cache segment, carved
// into tensors the driver never sees. The allocator tells every registered
// trace tracker about each block it hands out and takes back, each segment
// it maps or frees, and each out-of-memory failure; this file registers one
// that forwards those events, as plain C structs, to cumemtrace's core
// (preload/frameworks.c), which records each tensor with its stack.
//
// It is the project's only C++, and small on purpose: registering a tracker
// means calling a virtual method of the allocator with a std::function, and
// the vtable slot and the event's layout change between PyTorch releases, so
// it is compiled against the headers of the PyTorch it will run with
// (scripts/build-torch-tracker.sh) and refuses to attach to any other
// version. It is loaded only once libc10_cuda.so is in the process and its
// allocator has allocated, so the allocator is initialized.
//
// The callback runs in the allocating thread with the device's allocator
// lock held and maybe the GIL: it must not throw, call into PyTorch or take
// the GIL. It only copies five fields and calls the core.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>
#include <cstring>

#include "torch_tracker.h"

#ifndef CUMEMTRACE_TORCH_VERSION
#error "CUMEMTRACE_TORCH_VERSION: the torch.__version__ these headers come from"
#endif

namespace allocator = c10::cuda::CUDACachingAllocator;

namespace {

torch_tracker_sink sink;

void forward(const allocator::TraceEntry &entry) noexcept
{
    struct torch_tracker_event event;
    event.action = static_cast<int>(entry.action_);
    event.device = static_cast<int>(entry.device_);
    event.address = static_cast<uint64_t>(entry.addr_);
    event.size = static_cast<uint64_t>(entry.size_);
    event.stream = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(entry.stream_));
    sink(&event);
}

} // namespace

extern "C" __attribute__((visibility("default"))) const char *torch_tracker_version(void)
{
    return CUMEMTRACE_TORCH_VERSION;
}

extern "C" __attribute__((visibility("default"))) int torch_tracker_attach(torch_tracker_sink s)
{
    try {
        allocator::CUDAAllocator *a = allocator::allocator.load();
        if (!a || !a->initialized())
            return TORCH_TRACKER_NOT_READY;
        sink = s;
        a->attachAllocatorTraceTracker(forward);
        return TORCH_TRACKER_ATTACHED;
    } catch (...) {
        // The cudaMallocAsync backend and pluggable allocators refuse trackers.
        return TORCH_TRACKER_REFUSED;
    }
}
