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
// (tools/build-torch-tracker.sh) and refuses to attach to any other
// version. It is loaded only once libc10_cuda.so is in the process and its
// allocator has allocated, so the allocator is initialized.
//
// The callback runs in the allocating thread with the device's allocator
// lock held and maybe the GIL: it must not throw, call into PyTorch or take
// the GIL. It drops the events the core has no use for, copies five fields
// of the others and calls the core. The allocator's out-of-memory observer,
// attached too, runs on that thread after its OOM event with the lock let
// go: there the core may take the GIL and read PyTorch's own view of that
// moment (PyTorch's Python-level observers take the GIL there too).
//
// On the autograd engine's threads, which run no Python, what names a
// tensor is the backward node being run: the core asks for it
// (torch_tracker_operation) instead of unwinding thirty native frames down
// to it. PyTorch keeps that node in a thread-local (get_current_node(), set
// by the engine around each node), so asking takes no lock.
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/autograd/function.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "torch_tracker.h"

#ifndef CUMEMTRACE_TORCH_VERSION
#error "CUMEMTRACE_TORCH_VERSION: the torch.__version__ these headers come from"
#endif

namespace allocator = c10::cuda::CUDACachingAllocator;
namespace autograd = torch::autograd;

#ifdef CUMEMTRACE_BENCH_SWITCH
// Only in the build bench/gpu_cost.py makes for its in-process comparison
// (tools/build-torch-tracker.sh --bench): while this is not 0, every event
// is dropped here, so windows of steps traced and not alternate within one
// process, whose speed varies less than from one process to the next.
extern "C" __attribute__((visibility("default"))) int torch_tracker_bench_off;
int torch_tracker_bench_off = 0;
#endif

namespace {

torch_tracker_sink sink;

// The byte offset of Node::apply's slot in a node's vtable, -1 if unknown.
// A pointer to a virtual member holds it (Itanium C++ ABI: {1 + offset,
// adjustment} on x86-64; {offset, 2 * adjustment + 1} on ARM); apply() is
// protected, so only a class derived from Node may name it.
struct ApplySlot : autograd::Node {
    static std::ptrdiff_t offset() noexcept
    {
        auto member = &ApplySlot::apply;
        struct {
            std::uintptr_t pointer;
            std::ptrdiff_t adjustment;
        } raw;
        static_assert(sizeof(member) == sizeof(raw), "an Itanium C++ ABI member pointer");
        std::memcpy(&raw, &member, sizeof(raw));
#if defined(__aarch64__) || defined(__arm__)
        return (raw.adjustment & 1) ? static_cast<std::ptrdiff_t>(raw.pointer) : -1;
#else
        return (raw.pointer & 1) ? static_cast<std::ptrdiff_t>(raw.pointer - 1) : -1;
#endif
    }
};

const std::ptrdiff_t apply_slot = ApplySlot::offset();

void forward(const allocator::TraceEntry &entry) noexcept
{
#ifdef CUMEMTRACE_BENCH_SWITCH
    if (__atomic_load_n(&torch_tracker_bench_off, __ATOMIC_RELAXED))
        return;
#endif
    // A tensor's block is recorded until its free completes: the request
    // before it, and snapshots, change nothing in the core. A third of the
    // events end here, before the call, whose code PyTorch would otherwise
    // have fetched into the cache once more for nothing.
    if (entry.action_ == allocator::TraceEntry::FREE_REQUESTED ||
        entry.action_ == allocator::TraceEntry::SNAPSHOT)
        return;
    struct torch_tracker_event event;
    event.action = static_cast<int>(entry.action_);
    event.device = static_cast<int>(entry.device_);
    event.address = static_cast<uint64_t>(entry.addr_);
    event.size = static_cast<uint64_t>(entry.size_);
    event.stream = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(entry.stream_));
    sink(&event);
}

void observe(int64_t device) noexcept
{
    struct torch_tracker_event event = {};
    event.action = TORCH_OOM_OBSERVED;
    event.device = static_cast<int>(device);
    sink(&event);
}

} // namespace

extern "C" __attribute__((visibility("default"))) const char *torch_tracker_version(void)
{
    return CUMEMTRACE_TORCH_VERSION;
}

extern "C" __attribute__((visibility("default"))) uint64_t torch_tracker_operation(void)
{
    if (apply_slot < 0)
        return 0;
    std::shared_ptr<autograd::Node> node = autograd::get_current_node();
    if (!node)
        return 0;
    const char *vtable = *reinterpret_cast<const char *const *>(node.get());
    return *reinterpret_cast<const uint64_t *>(vtable + apply_slot);
}

extern "C" __attribute__((visibility("default"))) int torch_tracker_attach(torch_tracker_sink s)
{
    try {
        allocator::CUDAAllocator *a = allocator::allocator.load();
        if (!a || !a->initialized())
            return TORCH_TRACKER_NOT_READY;
        sink = s;
        // The observer first: an allocator that took the tracker but no
        // observer would leave its OOM events waiting for one.
        a->attachOutOfMemoryObserver(
            [](int64_t device, size_t, size_t, size_t) noexcept { observe(device); });
        a->attachAllocatorTraceTracker(forward);
        return TORCH_TRACKER_ATTACHED;
    } catch (...) {
        // The cudaMallocAsync backend and pluggable allocators refuse trackers.
        return TORCH_TRACKER_REFUSED;
    }
}
