#pragma once
/// \file
/// fx::FusedSGD: torch::optim::SGD whose update is one pass over memory.
///
/// libtorch's SGD updates a parameter with up to five ATen operations
/// (weight decay, buf.mul_, buf.add_, the Nesterov term, p.add_), each a
/// pass over the parameter's bytes; on a CPU the update is memory bound, so
/// resnet18's step spends ~9 ms of ~110 in them (1 thread, AMD EPYC Zen 4).
/// FusedSGD reads p, grad and the momentum buffer once and writes p and the
/// buffer once, per element, which PyTorch 2's `torch.optim.SGD(fused=True)`
/// also does. It *is* a torch::optim::SGD: same options and checks, same
/// state (SGDParamState::momentum_buffer under the same keys), the same
/// save / load archives, so it replaces SGD in a training loop, and a
/// checkpoint of one loads into the other.
///
///     fx::FusedSGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
///     for (...) {
///       opt.zero_grad();  // set_to_none: the next backward's gradients are stored, not added
///       loss_fn(model->forward(x), y).backward();
///       opt.step();
///     }
///
/// Values: the update computes what SGD::step computes, element by element,
/// in the same order of operations; where libtorch's kernels contract a
/// multiply-add into one rounding (FMA), results differ in the last bit.
/// Parameters the fused loop cannot take (a sparse gradient, a dtype other
/// than float / double, parameter, gradient and buffer in different
/// layouts) are updated by SGD::step's own operations.

#include <fx/optimizer_in_backward.h>

#include <torch/optim/sgd.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace fx {

/// torch::optim::SGD with a one-pass update per parameter (see the file
/// comment); it can also step inside an AotModule's backward
/// (AotModule::set_optimizer_in_backward), one parameter at a time.
class FusedSGD : public torch::optim::SGD, public OptimizerInBackward {
 public:
  using torch::optim::SGD::SGD;

  /// One SGD step over every parameter with a gradient (libtorch SGD's math;
  /// the closure, when given, is called with grad mode on and its loss returned).
  at::Tensor step(LossClosure closure = nullptr) override;

  /// Clears the gradients: with `set_to_none` (the default, as in PyTorch 2)
  /// param.grad becomes undefined, so the next backward stores its gradient
  /// instead of adding it to zeros (no fill, no add); otherwise each is
  /// zeroed in place as torch::optim::Optimizer::zero_grad() does.
  void zero_grad(bool set_to_none = true);

  /// Whether `param` is in one of the parameter groups (the same tensor).
  bool updates(const at::Tensor& param) const override;
  /// SGD's update of one parameter with `grad` as its gradient (its group's
  /// options, its momentum buffer): what step() does for it when
  /// param.grad == grad. Throws fx::Error for a tensor that is
  /// not a parameter of this optimizer.
  void update(const at::Tensor& param, const at::Tensor& grad) override;
  /// Allocates the momentum buffer of each parameter that has none yet (no
  /// state until its first update fills it, as SGD's: the first update still
  /// copies the gradient in); again for one whose parameter's layout changed
  /// since (a buffer the first update cannot use is dropped then).
  void allocate_state() override;

  /// Parameters the last step() updated with the fused loop, and with
  /// libtorch SGD's operations (a sparse gradient, another dtype, layouts
  /// that differ).
  size_t fused_updates() const { return fused_updates_; }
  /// See fused_updates().
  size_t unfused_updates() const { return unfused_updates_; }

 private:
  void update_one(const at::Tensor& p, const at::Tensor& g, const torch::optim::SGDOptions& o);
  const torch::optim::SGDOptions* options_of(const at::Tensor& param) const;
  /// Buffers allocate_state() made, by SGD's state key, until their parameter's first update.
  std::unordered_map<std::string, at::Tensor> allocated_buffers_;
  size_t fused_updates_ = 0;
  size_t unfused_updates_ = 0;
};

}  // namespace fx
