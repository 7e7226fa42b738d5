// A stand-in for PyTorch's torch/csrc/autograd/function.h, for cumemtrace's
// tests on machines without PyTorch. It declares only what the tracker shim
// (preload/torch_tracker.cpp) uses, under PyTorch's names: a node of the
// autograd graph, whose protected virtual apply() runs its backward, and the
// node the calling thread is running (set by the engine around each node).
// The stand-in's engine (c10sim_backward, allocator.cpp) runs nodes on a
// thread of its own, as PyTorch's does for a device.
#pragma once

#include <memory>
#include <vector>

namespace torch
{
namespace autograd
{

using variable_list = std::vector<void *>;

struct Node : std::enable_shared_from_this<Node> {
    virtual ~Node() = default;
    variable_list operator()(variable_list &&inputs)
    {
        return apply(std::move(inputs));
    }

  protected:
    virtual variable_list apply(variable_list &&inputs) = 0;
};

__attribute__((visibility("default"))) std::shared_ptr<Node> get_current_node();

} // namespace autograd
} // namespace torch
