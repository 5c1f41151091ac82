#pragma once
/// \file
/// quantize_dynamic (torch.ao.quantization.quantize_dynamic): linear layers
/// computing with int8 weights and activations quantized at run time, per
/// call, from the range of each batch. No calibration, no observers: the
/// weight is quantized once, here; the activation's scale comes from the
/// data every call.
///
/// Each chosen layer becomes one node calling libtorch's own kernel,
///
///     linear1 = quantized.linear_dynamic(x, DynamicQuantizedLinear(in_features=64, out_features=128,
///                                        dtype=torch.qint8, qscheme=torch.per_tensor_affine), True)
///
/// whose second argument is the packed weight and bias (a
/// `__torch__.torch.classes.quantized.LinearPackedParamsBase` object made by
/// `quantized::linear_prepack` on the onednn engine, a constant of the node)
/// and whose third is reduce_range, as Python's DynamicQuantizedLinear
/// passes it. The node keeps the layer's node name.
///
/// What is quantized, as Python's quantize_dynamic(model, {nn.Linear},
/// dtype=torch.qint8) on the onednn engine does it:
///  - weights: qint8, per tensor, symmetric (default_dynamic_qconfig's
///    MinMaxObserver: scale = max|w| / 127.5, zero point 0), or per channel
///    (axis 0) with DynamicQuantOptions::per_channel;
///  - activations: quint8 over [min(x, 0), max(x, 0)] of each call, with
///    reduce_range (7-bit range) as Python's DynamicQuantizedLinear;
///  - the output is float32; bias is added in float.
/// Layers: call_module nodes of a Linear leaf (a torch::nn::Linear or an
/// imported TorchScript nn.Linear), and, unless options.functional is false,
/// call_function aten::linear whose weight (and bias, if any) are get_attr
/// nodes, and aten::matmul(x, aten::t(W)) with W a get_attr and an output of
/// rank >= 2 (known from tensor_meta), with the `aten::add(_)(·, b)` of a
/// get_attr bias that may follow as its only use computed by the same kernel
/// (libtorch's C++ MultiheadAttention projects its input so; the report
/// marks the add "bias of <matmul>"). Python quantizes only modules; an attention block's in_proj /
/// out_proj (read as tensors by F.multi_head_attention_forward) are
/// aten::linear calls here, so `functional = false` reproduces Python's
/// choice exactly.
///
/// The result prints (print_readable), runs with forward() and under
/// fx::Interpreter, and saves with fx::save: the file holds each packed
/// layer's int8 weight (integers, scales, zero points) and float bias, and
/// fx::load packs them again (onednn engine), so the loaded module computes
/// bit for bit what the saved one did. fx::to_torchscript exports it (the
/// packed weights a TorchScript constant): torch::jit::load and Python's
/// torch.jit.load run the file.
///
/// The engine: packing needs libtorch's onednn quantized engine (Debian's
/// libtorch has qnnpack and onednn, no fbgemm); quantize_dynamic switches
/// at::globalContext() to it for the packing and restores the engine it
/// found. The packed weights then run whatever the engine.

#include <fx/graph_module.h>
#include <fx/quantization/prepare.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::quantization {

/// Which linear layers quantize_dynamic quantizes, and how.
struct DynamicQuantOptions {
  /// Quantize call_module nodes of these module types (Python class names
  /// of linear layers: "Linear", "NonDynamicallyQuantizableLinear"); any other
  /// type is an fx::Error. Empty: no module is quantized.
  std::vector<std::string> module_types{"Linear"};
  /// Quantize call_function aten::linear nodes whose weight is a get_attr, and
  /// aten::matmul(x, aten::t(get_attr)) (+ get_attr bias).
  bool functional = true;
  /// When not empty, quantize only these: a module's qualified name, a
  /// prefix of it ("encoder.layers.0" takes every layer below it), a node's
  /// name, or the qualified name of a functional layer's weight.
  std::vector<std::string> names;
  /// Never quantize these (same matching as `names`; wins over it).
  std::vector<std::string> skip;
  /// Per-channel (axis 0) symmetric weights instead of Python's default per-tensor.
  bool per_channel = false;
  /// Quantize activations to a 7-bit range, as Python's DynamicQuantizedLinear does.
  bool reduce_range = true;
};

/// What quantize_dynamic did.
struct DynamicQuantReport {
  /// One entry per call_module / call_function / call_method node of the
  /// input graph, in order: "Linear(64 → 128): weight qint8
  /// torch.per_tensor_symmetric, activations quint8 per call", or why it stays
  /// float ("not a linear layer", "in the skip list", "weight is not a get_attr" …).
  std::vector<NodeQuantization> nodes;
  /// Layers made int8.
  size_t quantized_layers = 0;
  /// One line per node, as PrepareReport::str().
  std::string str() const;
};

/// quantize_dynamic(gm, {nn.Linear}, dtype=torch.qint8): a new GraphModule
/// whose chosen linear layers compute with int8 weights (see the file
/// comment); `gm` is never changed (modules that stay float are shared with
/// it). Throws fx::Error: for a called module in training mode
/// ("quantize_dynamic: module 'encoder.layers.0.linear1' is in training mode;
/// call eval() first"), for a module type that is not a linear layer in
/// options.module_types, and when libtorch has no onednn quantized engine.
std::shared_ptr<GraphModule> quantize_dynamic(const std::shared_ptr<GraphModule>& gm,
                                              const DynamicQuantOptions& options = {},
                                              DynamicQuantReport* report = nullptr);

/// Whether `value` is a packed dynamic linear layer (libtorch's
/// LinearPackedParamsBase), the constant argument of quantize_dynamic's nodes.
bool is_packed_linear_params(const c10::IValue& value);

/// "DynamicQuantizedLinear(in_features=64, out_features=128, dtype=torch.qint8,
/// qscheme=torch.per_tensor_affine)", as Python prints the module; how graphs print
/// the packed argument. Throws fx::Error if `value` is not one.
std::string describe_packed_linear_params(const c10::IValue& value);

}  // namespace fx::quantization
