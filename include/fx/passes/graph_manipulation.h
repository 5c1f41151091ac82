#pragma once
/// \file
/// Node sizes in bytes (torch.fx `passes/graph_manipulation.py`):
/// get_size_of_node, size_bytes, get_size_of_all_nodes, get_tensor_meta;
/// and replace_target_nodes_with, which retargets every node of one kind.
///
/// Why: a splitter or a memory planner asks how many bytes a node's value
/// takes (what crosses a device boundary) and how many its weights add
/// (_SplitterBase's report bounds a backend's throughput by the bytes
/// entering and leaving each accelerated submodule).
///
/// The sizes are read from `meta["tensor_meta"]` (run fx::ShapeProp first):
/// output_size = elements of the value x its element size; total_size adds
/// the parameters of a call_module's submodule (recursively), counted at the
/// *output's* element size, exactly as torch.fx does.
///
/// Differences from torch.fx: a node whose value is a tuple or list of
/// tensors (its tensor_meta a std::vector<TensorMetadata>) is an fx::Error
/// naming the node (torch.fx fails with "AttributeError: 'tuple' object has
/// no attribute 'shape'"); get_size_of_all_nodes stores each node's sizes in
/// `meta["size_bytes"]` (torch.fx: a `node.size_bytes` attribute).

#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/tensor_meta.h>

#include <any>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fx {

/// A node's sizes in bytes (torch.fx size_bytes).
struct size_bytes {
  /// Bytes of the node's value.
  int64_t output_size = 0;
  /// Bytes of the value plus those of a call_module's parameters.
  int64_t total_size = 0;
  /// Equal sizes.
  bool operator==(const size_bytes& o) const { return output_size == o.output_size && total_size == o.total_size; }
};

/// `node->meta()["tensor_meta"]`; throws fx::Error "Node N has no tensor
/// metadata associated with it! Check that shape propagation has run."
/// (torch.fx get_tensor_meta's text) when there is none.
const std::any& get_tensor_meta(const Node* node);

/// The sizes of `node`'s value and of its weights (torch.fx
/// get_size_of_node(fx_module, node)). Needs tensor_meta (ShapeProp); throws
/// fx::Error naming the node when there is none, when the value is not one
/// tensor, or when a call_module's target is missing from `fx_module`.
size_bytes get_size_of_node(const GraphModule& fx_module, const Node* node);

/// Runs ShapeProp on `args` first when given, then stores
/// get_size_of_node() of every node before the output in its
/// `meta["size_bytes"]` (a fx::size_bytes) (torch.fx get_size_of_all_nodes).
void get_size_of_all_nodes(const std::shared_ptr<GraphModule>& fx_module,
                           const std::optional<std::vector<c10::IValue>>& args = std::nullopt);

/// Replaces every node of opcode `old_op` and target `old_target` by a node
/// of `new_op` / `new_target` with the same name, args and kwargs (without
/// meta); other nodes are copied as they are. `fx_module` gets the new graph
/// (torch.fx replace_target_nodes_with).
void replace_target_nodes_with(GraphModule& fx_module, Opcode old_op, const std::string& old_target, Opcode new_op,
                               const std::string& new_target);

}  // namespace fx
