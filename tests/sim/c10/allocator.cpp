// allocator.cpp - a stand-in for PyTorch's CUDA caching allocator
// (libc10_cuda.so), for cumemtrace's tests on machines without PyTorch.
//
// It behaves as PyTorch's does where cumemtrace's verdicts depend on it:
// tensors are carved out of cached segments obtained with cudaMalloc (2 MiB
// for requests up to 1 MiB, 20 MiB for 1 to 10 MiB, the request rounded up
// to 2 MiB above that); freed blocks go back to the cache and merge with free
// neighbours; a request the cache cannot serve asks the driver, and when the
// driver refuses, every entirely free segment is released and the driver
// asked once more before giving up. Every step is told to the registered
// trace trackers, with the device's recursive lock held, as PyTorch does;
// after giving up, the out-of-memory observers are called with that lock let
// go, as PyTorch does.
//
// Its C functions (c10sim_*) are what test programs call, from C or from
// Python through ctypes. C10SIM_BACKEND=cudaMallocAsync makes attaching a
// tracker throw, as PyTorch's cudaMallocAsync backend does.
//
// It also stands in for the part of PyTorch's autograd engine the tracer
// reads (libtorch_cpu.so's, in PyTorch): c10sim_backward runs backward nodes
// that allocate, on a thread of its own that runs no Python, with the node
// being run in a thread-local (torch::autograd::get_current_node()). As
// PyTorch's engine keeps a thread a device, that thread is started at the
// first backward and runs every later one, while the caller waits.
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/autograd/function.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <unistd.h>

namespace c10 {
namespace cuda {
namespace CUDACachingAllocator {

namespace {

constexpr size_t kSmallSize = 1 << 20;          // requests up to this use small segments
constexpr size_t kSmallSegment = 2 << 20;
constexpr size_t kLargeSegment = 20 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;     // above this, a segment of the request's size
constexpr size_t kRoundLarge = 2 << 20;

size_t round_block(size_t size)
{
    return size < 512 ? 512 : (size + 511) / 512 * 512;
}

size_t segment_size(size_t rounded)
{
    if (rounded <= kSmallSize)
        return kSmallSegment;
    if (rounded < kMinLargeAlloc)
        return kLargeSegment;
    return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

struct Block {
    uintptr_t ptr;
    size_t size;           // bytes it spans in its segment
    size_t requested;      // what the caller asked for, if allocated
    bool allocated;
    bool small;
    Block *prev, *next;    // neighbours in the same segment
};

struct BySize {
    bool operator()(const Block *a, const Block *b) const
    {
        return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
};

class DeviceAllocator {
public:
    explicit DeviceAllocator(int device) : device_(device) {}

    void attach(AllocatorTraceTracker tracker)
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        trackers_.push_back(std::move(tracker));
    }

    void observe(OutOfMemoryObserver observer)
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        observers_.push_back(std::move(observer));
    }

    void *malloc(size_t size)
    {
        std::vector<OutOfMemoryObserver> observers;
        size_t free_bytes = 0;
        void *p = carve(size, observers, free_bytes);
        for (const auto &observer : observers)
            observer(device_, size, 0, free_bytes);
        return p;
    }

    // malloc's work under the lock; on giving up, the observers to call
    // once it is let go.
    void *carve(size_t size, std::vector<OutOfMemoryObserver> &observers, size_t &free_bytes)
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        size_t rounded = round_block(size);
        bool small = rounded <= kSmallSize;
        Block *b = best_fit(small, rounded);
        if (!b)
            b = new_segment(small, rounded, free_bytes);
        if (!b) {
            observers = observers_;
            return nullptr;
        }
        free_[small].erase(b);
        split(b, rounded);
        b->allocated = true;
        b->requested = size;
        active_[b->ptr] = b;
        allocated_ += b->size;
        requested_ += size;
        trace(TraceEntry::ALLOC, b->ptr, size);
        return reinterpret_cast<void *>(b->ptr);
    }

    bool free(void *ptr)
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        auto it = active_.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == active_.end())
            return false;
        Block *b = it->second;
        active_.erase(it);
        allocated_ -= b->size;
        trace(TraceEntry::FREE_REQUESTED, b->ptr, b->requested);
        requested_ -= b->requested;
        trace(TraceEntry::FREE_COMPLETED, b->ptr, b->requested);
        b->allocated = false;
        merge(b);
        return true;
    }

    void empty_cache()
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        release_free_segments();
    }

    // allocated, requested, reserved, inactive split bytes, their count
    void stats(uint64_t out[5])
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        out[0] = allocated_;
        out[1] = requested_;
        out[2] = reserved_;
        out[3] = out[4] = 0;
        for (int pool = 0; pool < 2; pool++)
            for (const Block *b : free_[pool])
                if (b->prev || b->next) {    // a hole in a segment still in use
                    out[3] += b->size;
                    out[4]++;
                }
    }

    // Run fn with this device's lock held (to test lock orders).
    void with_lock(void (*fn)(void *), void *arg)
    {
        std::lock_guard<std::recursive_mutex> hold(mutex_);
        fn(arg);
    }

private:
    void trace(TraceEntry::Action action, uintptr_t addr, size_t size)
    {
        TraceEntry entry(action, static_cast<int8_t>(device_), addr, size, nullptr);
        for (const auto &tracker : trackers_)
            tracker(entry);
    }

    Block *best_fit(bool small, size_t rounded)
    {
        Block key{0, rounded, 0, false, small, nullptr, nullptr};
        auto it = free_[small].lower_bound(&key);
        return it == free_[small].end() ? nullptr : *it;
    }

    Block *new_segment(bool small, size_t rounded, size_t &free_bytes)
    {
        size_t bytes = segment_size(rounded);
        void *p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            release_free_segments();
            if (cudaMalloc(&p, bytes) != cudaSuccess) {
                cudaGetLastError();
                size_t total = 0;
                cudaMemGetInfo(&free_bytes, &total);
                trace(TraceEntry::OOM, free_bytes, rounded);
                return nullptr;
            }
        }
        reserved_ += bytes;
        trace(TraceEntry::SEGMENT_ALLOC, reinterpret_cast<uintptr_t>(p), bytes);
        Block *b = new Block{reinterpret_cast<uintptr_t>(p), bytes, 0, false, small, nullptr,
                             nullptr};
        free_[small].insert(b);
        return b;
    }

    void split(Block *b, size_t rounded)
    {
        size_t rest = b->size - rounded;
        if (b->small ? rest < 512 : rest <= kSmallSize)
            return;
        Block *tail = new Block{b->ptr + rounded, rest, 0, false, b->small, b, b->next};
        if (b->next)
            b->next->prev = tail;
        b->next = tail;
        b->size = rounded;
        free_[b->small].insert(tail);
    }

    void merge(Block *b)
    {
        for (Block *n : {b->prev, b->next}) {
            if (!n || n->allocated)
                continue;
            free_[b->small].erase(n);
            if (n == b->prev) {
                b->ptr = n->ptr;
                b->prev = n->prev;
                if (b->prev)
                    b->prev->next = b;
            } else {
                b->next = n->next;
                if (b->next)
                    b->next->prev = b;
            }
            b->size += n->size;
            delete n;
        }
        free_[b->small].insert(b);
    }

    void release_free_segments()
    {
        for (int pool = 0; pool < 2; pool++) {
            for (auto it = free_[pool].begin(); it != free_[pool].end();) {
                Block *b = *it;
                if (b->prev || b->next) {
                    ++it;
                    continue;
                }
                it = free_[pool].erase(it);
                trace(TraceEntry::SEGMENT_FREE, b->ptr, b->size);
                cudaFree(reinterpret_cast<void *>(b->ptr));
                reserved_ -= b->size;
                delete b;
            }
        }
    }

    int device_;
    std::recursive_mutex mutex_;
    std::vector<AllocatorTraceTracker> trackers_;
    std::vector<OutOfMemoryObserver> observers_;
    std::set<Block *, BySize> free_[2];   // [large, small]
    std::map<uintptr_t, Block *> active_;
    uint64_t allocated_ = 0, requested_ = 0, reserved_ = 0;
};

class NativeAllocator : public CUDAAllocator {
public:
    bool initialized() override { return !devices_.empty(); }

    void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) override
    {
        const char *backend = std::getenv("C10SIM_BACKEND");
        if (backend && std::strcmp(backend, "cudaMallocAsync") == 0)
            throw std::runtime_error("cudaMallocAsync does not yet support trace trackers");
        for (auto &device : devices_)
            device->attach(tracker);
    }

    void attachOutOfMemoryObserver(OutOfMemoryObserver observer) override
    {
        for (auto &device : devices_)
            device->observe(observer);
    }

    void init(int count)
    {
        for (int d = static_cast<int>(devices_.size()); d < count; d++)
            devices_.push_back(std::make_unique<DeviceAllocator>(d));
    }

    DeviceAllocator *device(int d)
    {
        return d >= 0 && d < static_cast<int>(devices_.size()) ? devices_[d].get() : nullptr;
    }

private:
    std::vector<std::unique_ptr<DeviceAllocator>> devices_;
};

// Never destroyed: a forked child's exit must not tear down caches that
// another thread of its parent was changing at the fork.
NativeAllocator &native = *new NativeAllocator;

} // namespace

std::atomic<CUDAAllocator *> allocator{&native};

} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10

namespace sim = c10::cuda::CUDACachingAllocator;

// ---- the autograd engine's part ---------------------------------------------

namespace torch {
namespace autograd {

namespace {

thread_local std::shared_ptr<Node> current_node;

// Two kinds of backward node, each allocating one gradient of `size` bytes
// (kept, or freed before apply returns), from calls of different depths.
struct SimMmBackward : Node {
    SimMmBackward(int device, size_t size, bool keep) : device(device), size(size), keep(keep) {}
    variable_list apply(variable_list &&) override
    {
        return {gradient()};
    }
    __attribute__((noinline)) void *gradient()
    {
        void *p = sim::native.device(device)->malloc(size);
        if (p && !keep) {
            sim::native.device(device)->free(p);
            p = nullptr;
        }
        return p;
    }
    int device;
    size_t size;
    bool keep;
};

struct SimAddBackward : SimMmBackward {
    using SimMmBackward::SimMmBackward;
    variable_list apply(variable_list &&) override
    {
        return {gradient(), nullptr};   // not SimMmBackward's code, which the compiler might share
    }
};

} // namespace

std::shared_ptr<Node> get_current_node()
{
    return current_node;
}

} // namespace autograd
} // namespace torch

namespace {

// The engine's thread: started at the first backward of a process (a
// forked child starts its own: the parent's is not in it), then waiting for
// the next. Never destroyed, as the thread may still wait on it at exit.
struct EngineThread {
    std::mutex lock;
    std::condition_variable wake, finished;
    std::function<void()> work;
    bool busy = false;
    pid_t owner = getpid();

    EngineThread()
    {
        std::thread([this] { serve(); }).detach();
    }
    // Run `w` on the engine's thread; returns when it is done.
    void run(std::function<void()> w)
    {
        std::unique_lock<std::mutex> hold(lock);
        work = std::move(w);
        busy = true;
        wake.notify_one();
        finished.wait(hold, [this] { return !busy; });
    }
    void serve()
    {
        std::unique_lock<std::mutex> hold(lock);
        for (;;) {
            wake.wait(hold, [this] { return busy; });
            std::function<void()> w = std::move(work);
            hold.unlock();
            w();
            hold.lock();
            busy = false;
            finished.notify_all();
        }
    }
};

EngineThread *engine_thread()
{
    static std::mutex guard;
    static EngineThread *engine;
    std::lock_guard<std::mutex> hold(guard);
    if (!engine || engine->owner != getpid())
        engine = new EngineThread();
    return engine;
}

} // namespace

extern "C" {

// Run `count` backward nodes, SimMmBackward and SimAddBackward in turn, on
// the engine's thread; each allocates `size` bytes on `device`, kept in
// kept[i] if `kept` is not NULL, else freed at once. Returns when they are
// done.
__attribute__((visibility("default"))) int c10sim_backward(int device, size_t size, int count,
                                                           void **kept)
{
    namespace autograd = torch::autograd;
    if (!sim::native.device(device))
        return -1;
    engine_thread()->run([=] {
        cudaSetDevice(device);
        for (int i = 0; i < count; i++) {
            std::shared_ptr<autograd::Node> node;
            if (i % 2)
                node = std::make_shared<autograd::SimAddBackward>(device, size, kept != nullptr);
            else
                node = std::make_shared<autograd::SimMmBackward>(device, size, kept != nullptr);
            autograd::current_node = node;      // as the engine's NodeGuard does
            autograd::variable_list out = (*node)({});
            autograd::current_node = nullptr;
            if (kept)
                kept[i] = out[0];
        }
    });
    return 0;
}

__attribute__((visibility("default"))) int c10sim_init(int devices)
{
    sim::native.init(devices);
    return 0;
}

__attribute__((visibility("default"))) void *c10sim_malloc(int device, size_t size)
{
    sim::DeviceAllocator *a = sim::native.device(device);
    if (!a)
        return nullptr;
    cudaSetDevice(device);
    return a->malloc(size);
}

__attribute__((visibility("default"))) int c10sim_free(int device, void *ptr)
{
    sim::DeviceAllocator *a = sim::native.device(device);
    return a && a->free(ptr) ? 0 : -1;
}

__attribute__((visibility("default"))) void c10sim_empty_cache(int device)
{
    if (sim::DeviceAllocator *a = sim::native.device(device))
        a->empty_cache();
}

__attribute__((visibility("default"))) int c10sim_stats(int device, uint64_t out[5])
{
    sim::DeviceAllocator *a = sim::native.device(device);
    if (!a)
        return -1;
    a->stats(out);
    return 0;
}

__attribute__((visibility("default"))) int c10sim_with_lock(int device, void (*fn)(void *),
                                                            void *arg)
{
    sim::DeviceAllocator *a = sim::native.device(device);
    if (!a)
        return -1;
    a->with_lock(fn, arg);
    return 0;
}

} // extern "C"
