#pragma once
/// \file
/// The pass behind AotModule::register_gradient_ready_hook: a copy of a
/// backward graph that calls a hook module right after each node computing
/// a gradient output (as quantization's prepare calls an observer after
/// each observed node).

#include <fx/gradient_ready_hook.h>
#include <fx/graph_module.h>

#include <torch/nn/module.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace fx::aot_impl {

/// What the hooked backward calls: forward(grad, index) passes both to the
/// hook it was made with and returns None.
class GradientReadyHookModule : public torch::nn::Module {
 public:
  explicit GradientReadyHookModule(GradientReadyHook hook);
  void forward(const at::Tensor& grad, int64_t index) const;

 private:
  GradientReadyHook hook_;
};

/// A backward graph with its hook calls, and the gradients no node computes.
struct HookedBackward {
  /// The copy: `call_module[target=gradient_ready_hook](args = (%grad, k))`
  /// right after the node of each hooked gradient output k (after the last
  /// placeholder for a placeholder's), in output order for a node computing
  /// several.
  std::shared_ptr<GraphModule> module;
  /// Hooked outputs that are None: nothing to wait for (report them before the graph runs).
  std::vector<size_t> none_outputs;
  /// Hooked outputs that are neither None nor a node (a constant): report them from the result.
  std::vector<size_t> constant_outputs;
};

/// The pass: `backward` (whose output is one gradient per input, a list or
/// tuple) is left as it is; output k is hooked when hooked[k]. `hook` is
/// installed in the copy as submodule "gradient_ready_hook". With
/// `consume`, the hook takes the gradient over: the copy returns None for
/// each hooked output computed by a node, so the gradient dies right after
/// its hook (nothing holds it to the end of the graph).
HookedBackward insert_gradient_ready_hooks(const std::shared_ptr<GraphModule>& backward,
                                           const std::vector<bool>& hooked,
                                           std::shared_ptr<GradientReadyHookModule> hook, bool consume = false);

}  // namespace fx::aot_impl
