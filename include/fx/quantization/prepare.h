#pragma once
/// \file
/// prepare (torch.ao.quantization.quantize_fx.prepare_fx): fuse, then put
/// observers where the reference quantized graph will quantize.
///
/// Observers are `call_module` nodes named as Python names them
/// (`activation_post_process_0`, `_1` … in insertion order) calling
/// observer modules of the same name. Placement follows prepare_fx with the
/// native backend's patterns:
///  - a quantizable op (conv, linear and their fused forms, add / mul (+ relu),
///    matmul, batch norm, dropout, layer norm, hardswish, sigmoid …) gets an
///    observer on each floating input not already observed and one on its
///    output; a later user of an observed value reuses that observer;
///  - an op that keeps its input's scale (max/avg pooling, relu, relu6,
///    hardtanh, flatten, reshape / view, cat, mean …) gets an output observer
///    that is the same module instance as its input's (shared observers, as
///    Python shares them); with no observed input it gets none;
///  - functional conv / linear weights (get_attr inputs) get the qconfig's
///    weight observer; module weights are observed in convert();
///  - values that are not floating-point tensors (sizes, indices, masks) are
///    never observed (decided from the dtypes a run on example_inputs gives);
///  - a node whose qconfig is nullptr, or that has no pattern, stays float.
/// Calibrate by calling forward() (or an Interpreter) on sample data.

#include <fx/graph_module.h>
#include <fx/quantization/fuse.h>
#include <fx/quantization/qconfig.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// Why a node is or is not quantized.
struct NodeQuantization {
  /// The node's name (in the prepared / converted graph).
  std::string node;
  /// Its target ("conv1", "aten::add_").
  std::string target;
  /// Whether the reference graph computes it between dequantize and quantize.
  bool quantized = false;
  /// "ConvReLU2d", "aten::add + ReLU", "shares its input's observer (MaxPool2d)",
  /// "qconfig is None", "no quantization pattern for aten::softmax", …
  std::string reason;
};

/// One line per node: "name  target  quantized|float  reason".
std::string format_report(const std::vector<NodeQuantization>& nodes);

/// What prepare() did.
struct PrepareReport {
  /// The fusions fuse() made.
  FuseReport fuse;
  /// One entry per call_module / call_function / call_method node of the
  /// fused graph (observers excluded), in graph order.
  std::vector<NodeQuantization> nodes;
  /// Observer nodes inserted.
  size_t observer_nodes = 0;
  /// Distinct observer modules (shared observers count once).
  size_t observer_modules = 0;
  /// A table: one line per node, "name  target  quantized|float  reason".
  std::string str() const;
};

/// prepare_fx(gm, qconfig_mapping, example_inputs): a new GraphModule, fused
/// and observed (see the file comment); `gm` is never changed. Throws
/// fx::Error: for a module in training mode ("prepare: module 'bn1' is in
/// training mode; call eval() first: post-training quantization needs
/// inference batch norm and dropout"), for a module that already has
/// observers ("prepare: the module is already prepared (it has observer
/// 'activation_post_process_0')"), and when example_inputs do not run.
std::shared_ptr<GraphModule> prepare(const std::shared_ptr<GraphModule>& gm, const QConfigMapping& qconfig_mapping,
                                     const std::vector<c10::IValue>& example_inputs, PrepareReport* report = nullptr);

/// The qconfig prepare() chose for a node of a prepared graph (node meta
/// "qconfig", a qconfig_to_string text, so it survives fx::save), or nullptr.
QConfigPtr node_qconfig(const Node* n);

}  // namespace fx::quantization
