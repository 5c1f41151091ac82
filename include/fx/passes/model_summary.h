#pragma once
/// \file
/// summarize_model: a torchinfo-style summary of a GraphModule: per node its
/// output shapes, parameter count, multiply-accumulates (MACs) and FLOPs,
/// and the totals.
///
/// Why: "how big and how costly is this model" is the first question about
/// an imported model (resnet50: 25.6 M parameters, 4.1 GMAC at 224x224),
/// and the per-node numbers show where the work is.
///
/// How: the counts are read from the graph, never by running it: shapes come
/// from meta["tensor_meta"] (run fx::ShapeProp first, e.g. propagate_meta(),
/// which computes no data), weights' shapes from the module's parameters.
/// Counted (MACs; FLOPs = 2 x MACs plus the elementwise work):
///  - convolutions (call_module Conv1d/2d/3d and ConvTranspose*, aten::conv*,
///    aten::convolution): output elements x (C_in / groups x kernel size);
///    transposed: input elements x (C_out / groups x kernel size);
///  - Linear, aten::linear, aten::addmm, aten::mm, aten::bmm, aten::matmul:
///    output elements x the reduced dimension;
///  - batch norm (module or aten::batch_norm): 2 FLOPs per output element;
///    elementwise aten ops (add, mul, relu, sigmoid ...) and activation /
///    pooling modules: 1 FLOP per output element; no MACs.
/// Everything else counts 0. Parameters: a call_module node counts its
/// submodule's parameters (recursively), a get_attr node the parameter it
/// reads; totals count each parameter tensor once.
///
/// Differs from torchinfo: the rows are graph nodes (torchinfo's rows are
/// module calls, nested); torchinfo counts MACs of a convolution and linear
/// layer only, which is what `macs` holds here too.
///
/// Control flow (fx/control_flow.h): a cond / loop call is one row, whose
/// MACs and FLOPs are not counted (which branch runs, and how often a body
/// does, is only known at run time); summarize a branch or body on its own
/// for its cost.

#include <fx/graph_module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fx {

/// One node's row of the summary.
struct NodeSummary {
  /// The node.
  const Node* node = nullptr;
  /// What it runs: the module class for call_module ("Conv2d"), the target otherwise.
  std::string type;
  /// Shapes of the tensors it produces (from tensor_meta; empty without it).
  std::vector<std::vector<int64_t>> output_shapes;
  /// Parameters it owns (call_module) or reads (get_attr of a parameter).
  int64_t params = 0;
  /// Multiply-accumulates.
  int64_t macs = 0;
  /// Floating-point operations (2 x MACs plus elementwise work).
  int64_t flops = 0;
};

/// The summary of a model.
struct ModelSummary {
  /// One row per node, in graph order.
  std::vector<NodeSummary> nodes;
  /// The module's parameters (each tensor once) and how many elements they hold.
  int64_t total_params = 0;
  /// Of which require grad.
  int64_t trainable_params = 0;
  /// Sum of the nodes' MACs.
  int64_t total_macs = 0;
  /// Sum of the nodes' FLOPs.
  int64_t total_flops = 0;
  /// Bytes of the parameters and buffers.
  int64_t param_bytes = 0;
  /// Nodes (other than output) with no tensor_meta: their MACs could not be
  /// counted (ShapeProp did not run, or they produce no tensor).
  int64_t nodes_without_shapes = 0;
};

/// Counts parameters, MACs and FLOPs per node of `module`; reads
/// meta["tensor_meta"] (see the file comment). Throws nothing on nodes it
/// does not know: they count 0.
ModelSummary summarize_model(const GraphModule& module);

/// "25.56 M", "4.09 G", "512": a count with a metric suffix, 2 decimals.
std::string format_count(int64_t n);

}  // namespace fx
