#pragma once
/// \file
/// Helpers shared by the splitter and the minimizer (torch.fx
/// `passes/tools_common.py`): CALLABLE_NODE_OPS, is_node_output_tensor and
/// FxNetAccFusionsFinder. (get_node_target is in fx/passes/operator_support.h,
/// legalize_graph in fx/passes/fuser_utils.h.)
///
/// A fusion group is a set of connected nodes that pass non-tensor values
/// (no tensor_meta: an int from size(), a list) to each other: splitting a
/// model between two of them would make a non-tensor value cross a
/// backend boundary, so _SplitterBase and _MinimizerBase keep each group in
/// one piece.
///
/// Difference from torch.fx: nodes are visited in graph order (torch.fx
/// iterates Python sets, whose order follows object hashes); every position
/// lookup is O(1) (torch.fx: list.index, O(N) each).

#include <fx/graph_module.h>
#include <fx/passes/fuser_utils.h>

#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace fx {

/// A set of nodes (torch.fx NodeSet).
using NodeSet = std::unordered_set<Node*>;

/// Whether `node` is a call_module, call_function or call_method (torch.fx
/// `node.op in CALLABLE_NODE_OPS`).
bool is_callable_node(const Node* node);

/// Whether the node's value is a tensor: its meta["type"] (written by
/// ShapeProp) is "torch.Tensor" or "torch.nn.Parameter" (torch.fx
/// is_node_output_tensor). False without ShapeProp.
bool is_node_output_tensor(const Node* node);

/// `nodes` in graph order.
NodeList sorted_by_position(const NodeSet& nodes);

/// Finds fusion groups among `acc_nodes` (torch.fx FxNetAccFusionsFinder).
class FxNetAccFusionsFinder {
 public:
  /// Groups nodes of `module`'s graph; `acc_nodes` loses the nodes of every
  /// group that is not entirely made of acc nodes (as torch.fx's set does).
  FxNetAccFusionsFinder(const GraphModule& module, NodeSet& acc_nodes);
  /// Every node of a fusion group -> its group (shared by the group's nodes).
  std::unordered_map<Node*, std::shared_ptr<const NodeSet>> operator()();

 private:
  struct FusionGroup;
  bool recursive_add_node(FusionGroup& group, const NodeList& inputs);

  NodeList nodes_;
  std::unordered_map<const Node*, size_t> position_;
  NodeSet& acc_nodes_;
};

}  // namespace fx
