#pragma once
/// \file
/// Gradient-ready hooks: how a module whose backward computes many
/// parameters' gradients in one autograd node (fx::AotModule: one compiled
/// backward graph) tells a client, such as DataParallelTrainer, the moment
/// each gradient is computed, before that backward returns.
///
/// Autograd's own hooks (a parameter's gradient accumulator) fire only when
/// the node has returned all its gradients; these fire inside it, in the
/// order its backward computes them.
///
///     fx::RemovableHandle h = aot->register_gradient_ready_hook(
///         [](size_t index, const at::Tensor& grad) { /* parameters()[index]'s gradient */ });
///     loss.backward();  // the hook runs during the compiled backward
///     h.remove();
///
/// Header only: the distributed layer uses it without depending on the
/// layer that implements it (aot/).

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <utility>

namespace fx {

/// Told that the gradient of input `index` of a module's backward was
/// computed: `grad` is this backward's contribution (not yet accumulated
/// into param.grad), or an undefined tensor when the backward computes none
/// (the parameter took no part in the outputs). The tensor is the one
/// backward returns: read it, do not write it.
using GradientReadyHook = std::function<void(size_t index, const at::Tensor& grad)>;

/// Removes a hook (torch.utils.hooks.RemovableHandle): remove() may be
/// called any number of times, also after the module is gone; destroying
/// the handle does not remove the hook.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  /// Removes the hook: a backward that starts later no longer calls it.
  void remove() {
    if (!remover_) return;
    std::function<void()> r = std::move(remover_);
    remover_ = nullptr;
    r();
  }

 private:
  std::function<void()> remover_;
};

/// A module that can report its parameters' gradients as its backward
/// computes them (implemented by fx::AotModule).
class GradientReadyHooks {
 public:
  virtual ~GradientReadyHooks() = default;
  /// Calls `hook` during every later backward of this module, once per
  /// input that requires grad, as soon as its gradient is computed. `index`
  /// counts the module's parameters() (recursive, named_parameters order)
  /// first; larger indices are other inputs, which a client of parameters
  /// ignores. Hooks run in registration order, on the backward's thread; an
  /// exception from one ends that backward with it.
  virtual RemovableHandle register_gradient_ready_hook(GradientReadyHook hook) = 0;
};

}  // namespace fx
