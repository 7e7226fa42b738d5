// A stand-in for PyTorch's c10/cuda/CUDACachingAllocator.h, for cumemtrace's
// tests on machines without PyTorch. It declares only what the tracker shim
// (preload/torch_tracker.cpp) uses, under PyTorch's names, so the shim
// compiles unchanged against this header and against PyTorch's own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace c10
{
namespace cuda
{
namespace CUDACachingAllocator
{

struct TraceEntry {
    enum Action {
        ALLOC,
        FREE_REQUESTED,
        FREE_COMPLETED,
        SEGMENT_ALLOC,
        SEGMENT_FREE,
        SEGMENT_MAP,
        SEGMENT_UNMAP,
        SNAPSHOT,
        OOM
    };
    TraceEntry(Action action, int8_t device, size_t addr, size_t size, void *stream)
        : action_(action), device_(device), addr_(addr), stream_(stream), size_(size)
    {
    }
    Action action_;
    int8_t device_;
    size_t addr_; // OOM: the driver's free bytes
    void *stream_;
    size_t size_; // the request (ALLOC, FREE_*), the segment (SEGMENT_*)
};

using AllocatorTraceTracker = std::function<void(const TraceEntry &)>;
using OutOfMemoryObserver =
    std::function<void(int64_t device, size_t allocated, size_t device_total, size_t device_free)>;

class CUDAAllocator
{
  public:
    virtual ~CUDAAllocator() = default;
    virtual bool initialized() = 0;
    virtual void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) = 0;
    virtual void attachOutOfMemoryObserver(OutOfMemoryObserver observer) = 0;
};

__attribute__((visibility("default"))) extern std::atomic<CUDAAllocator *> allocator;

} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10
