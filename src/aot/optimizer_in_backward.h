#pragma once
/// \file
/// One backward run of an AotModule whose optimizer steps inside backward
/// (AotModule::set_optimizer_in_backward): when each parameter may be
/// updated, and the updates.
///
/// A gradient is final when its node has run, but the backward graph may
/// still read the parameter after that: the forward saved it (or a view of
/// it, `t(weight)`) for a convolution's or a linear's grad_input, which a
/// later node computes. An update then would change what that node reads.
/// The graph's rewrites move such reads around, so their order is not
/// decided on the graph but where it runs: a parameter is updated once no
/// value of the running graph shares its memory (its storage's use count is
/// back to what holders outside the graph account for; the executor frees
/// each value after its last reader), checked when its gradient arrives and
/// again at each later gradient; the rest when the graph has returned.

#include <fx/optimizer_in_backward.h>

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace fx::aot_impl {

/// The updates of one backward run.
class BackwardStepper {
 public:
  /// `leaves[k]` is input k's tensor (undefined for those that are not
  /// leaves); `stepping[k]` says whether `optimizer` updates it here.
  /// `graph_inputs` are the backward graph's inputs about to run (saved
  /// values and tangents): those sharing a leaf's memory are what the graph
  /// must free before its update.
  BackwardStepper(OptimizerInBackward& optimizer, const std::vector<at::Tensor>& leaves,
                  const std::vector<bool>& stepping, const std::vector<c10::IValue>& graph_inputs);

  /// Told by the hooked graph that input `index`'s gradient is computed:
  /// updates it now if nothing in the graph shares its memory, else keeps it
  /// waiting (a copy of it: the graph's memory plan may reuse its memory);
  /// then updates the waiting ones that became free.
  void on_gradient(size_t index, const at::Tensor& grad);

  /// After the graph returned `outputs` (None for the gradients the hooks
  /// took): updates the waiting ones, and the stepped inputs whose gradient
  /// the graph returns as a value rather than computing it (setting those
  /// outputs to None: autograd must not store them).
  void finish(std::vector<c10::IValue>& outputs);

  /// What this run did.
  const OptimizerInBackwardStats& stats() const { return stats_; }

 private:
  bool shared_with_graph(size_t index) const;
  void update(size_t index, const at::Tensor& grad);

  OptimizerInBackward& optimizer_;
  const std::vector<at::Tensor>& leaves_;
  std::vector<bool> stepping_;
  /// Per input: its storage's use count when no graph value holds it.
  std::vector<size_t> outside_uses_;
  std::vector<std::pair<size_t, at::Tensor>> waiting_;
  std::vector<bool> done_;
  OptimizerInBackwardStats stats_;
};

}  // namespace fx::aot_impl
