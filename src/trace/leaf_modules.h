#pragma once
/// \file
/// Leaf modules: folding the operators a torch::nn layer issued back into one
/// call_module node.
///
/// A C++ module call cannot be intercepted, so the trace first records the
/// operators (aten::t + aten::addmm for a Linear, aten::conv2d for a Conv2d
/// ...) with the layer's parameters as get_attr nodes. This pass then finds,
/// for every leaf module, the operator pattern its forward issues — one table
/// entry per module type: which operators, which parameters at which
/// argument positions, and which option values the other arguments must have
/// — and replaces the matched nodes by `call_module[target=<qualified name>]`.
/// Intermediate nodes of a pattern must have no users outside it, so folding
/// never changes what the graph computes.

#include "trace/trace_session.h"

#include <fx/graph.h>

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace fx::trace_impl {

/// What the folding pass knows about the traced root.
struct LeafContext {
  /// A parameter or buffer of a leaf module.
  struct Owner {
    std::string module;                 ///< the leaf's qualified name
    const torch::nn::Module* instance;  ///< the leaf
    std::string local;                  ///< "weight", "bias", "running_mean" ...
  };
  /// get_attr target → owning leaf module (only leaves' own tensors).
  std::unordered_map<std::string, Owner> owners;
  /// get_attr target → tensor (parameters, buffers, constants).
  std::function<at::Tensor(const std::string&)> tensor_of;
};

/// Whether fxcpp can recognize calls of `m` (its type has a table entry).
bool has_leaf_pattern(const torch::nn::Module& m);
/// The module types with a table entry, for messages ("Linear, Conv1d, ...").
std::string leaf_pattern_types();

/// Replaces every recognized call of a leaf module in `graph` by a
/// call_module node; returns how many calls were folded. Erases get_attr
/// nodes left without users.
size_t fold_leaf_modules(Graph& graph, const LeafContext& ctx,
                         const std::unordered_map<const Node*, RecordedCall>& calls);

}  // namespace fx::trace_impl
