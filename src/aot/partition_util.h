#pragma once
/// \file
/// What the partitioners share (functorch partitioners.py's helpers).

#include <fx/aot.h>
#include <fx/graph.h>
#include <fx/node.h>
#include <fx/tensor_meta.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace fx::aot_impl {

/// Whether `n` is a primal (a placeholder not named tangents_*).
bool is_primal(const Node* n);
/// Whether `n` is a tangent placeholder.
bool is_tangent(const Node* n);

/// The joint graph's forward and backward outputs (flattened output list).
void forward_backward_outputs(const JointGraph& joint, std::vector<Argument>& forward,
                              std::vector<Argument>& backward);

/// functorch's _extract_graph_with_inputs_outputs: a new graph taking
/// `inputs` (nodes of `joint`, any opcode) as placeholders of the same names
/// and computing `outputs` from them; nodes depending on other placeholders
/// are left out, then dead code is eliminated. Throws fx::Error naming an
/// output that cannot be computed from the inputs.
/// `skip` (optional) names nodes never to copy, valid inputs or not.
std::shared_ptr<Graph> extract_graph(const Graph& joint, const std::vector<Node*>& inputs,
                                     const std::vector<Argument>& outputs,
                                     const std::function<bool(const Node*)>& skip = nullptr);

/// The names of the nodes the forward outputs need (functorch's
/// forward_only_graph), output node excluded.
std::unordered_set<std::string> forward_node_names(const JointGraph& joint);

/// functorch's _extract_fwd_bwd_modules: the forward graph returns its
/// outputs then `saved`, the backward takes `saved` then the tangents;
/// saved values the backward does not read are dropped first.
PartitionedGraphs extract_forward_backward(const JointGraph& joint, std::vector<Node*> saved);

/// Whether `n` is a primal or a view of one (saving it costs no memory).
bool is_primal_alias(const Node* n);

/// Bytes of a node's tensor_meta (0 without one).
double tensor_bytes(const Node* n);

/// Adds, for every training-mode batch norm, a recomputable decomposition of
/// its output and duplicates of the pointwise operators after it, and points
/// the uses by nodes in `backward` (those the forward outputs do not need)
/// at them (recompute_batch_norm.cpp). Returns how many batch norms got one.
size_t add_batch_norm_recompute(Graph& g, const std::unordered_set<const Node*>& backward);


}  // namespace fx::aot_impl
