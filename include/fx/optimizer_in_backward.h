#pragma once
/// \file
/// An optimizer that steps inside backward: each parameter is updated the
/// moment its gradient is final and nothing in the backward still reads the
/// parameter, and the gradient is freed there, never stored in `.grad`
/// (PyTorch's optimizer-in-backward, `_apply_optimizer_in_backward`, built
/// on gradient-accumulation hooks). A training step then never holds every
/// parameter's gradient at once: resnet18 holds 45 MB of them at the end of
/// an ordinary backward.
///
///     auto opt = std::make_shared<fx::FusedSGD>(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
///     aot->set_optimizer_in_backward(opt);
///     for (...) loss_fn(aot->forward(x), y).backward();  // steps; no zero_grad, no opt->step()
///
/// Header only: fx::AotModule (aot/) drives it, fx::FusedSGD implements it.

#include <ATen/core/Tensor.h>

namespace fx {

/// What AotModule::set_optimizer_in_backward calls during backward.
class OptimizerInBackward {
 public:
  virtual ~OptimizerInBackward() = default;
  /// Whether this optimizer updates `param` (the same tensor it was given,
  /// not a copy): the others get their gradient in `.grad` as usual.
  virtual bool updates(const at::Tensor& param) const = 0;
  /// Updates `param` in place with this backward's gradient `grad`, as
  /// step() would with param.grad == grad (called with grad mode off, once
  /// per parameter and backward).
  virtual void update(const at::Tensor& param, const at::Tensor& grad) = 0;
  /// Called when set on a module, and before each backward that steps it,
  /// ahead of the backward's temporaries: allocate the state the updates
  /// will need (momentum buffers) now, where a first update would allocate it
  /// among those temporaries and leave the heap fragmented around it (memory
  /// the process keeps from the system). Cheap when all of it exists.
  virtual void allocate_state() {}
};

/// What the optimizer in an AotModule's backward did, summed over its backward runs.
struct OptimizerInBackwardStats {
  /// Backward runs that stepped the optimizer.
  size_t steps = 0;
  /// Parameters updated right after the node computing their gradient.
  size_t updates_at_gradient = 0;
  /// Parameters updated later in the graph: after the gradient, backward
  /// still read the parameter (a convolution's grad_input reads its weight),
  /// so the update waited until the graph had freed the last value sharing
  /// its memory.
  size_t updates_after_reads = 0;
  /// Parameters updated when the graph had returned (a value sharing its
  /// memory lived to the end, or the gradient is a constant of the graph).
  size_t updates_at_end = 0;
};

}  // namespace fx
