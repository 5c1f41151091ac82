#pragma once
// Internal helpers shared by fuse, prepare and convert.
#include <fx/graph_module.h>
#include <fx/module_attributes.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fx::quantization::detail {

/// The Python class name of the module a call_module node calls ("Conv2d"),
/// "" when it is not a known layer or not a call_module.
std::string module_type(const GraphModule& gm, const Node* n);

/// The attributes of the module a call_module node calls.
std::optional<ModuleAttributes> node_module_attributes(const GraphModule& gm, const Node* n);

/// Whether `n` applies a ReLU: a ReLU module, aten::relu or aten::relu_ with one argument.
bool is_relu(const GraphModule& gm, const Node* n);

/// A parameter or buffer of `m` by its own name ("weight"); undefined if missing.
at::Tensor module_tensor(const torch::nn::Module& m, const std::string& name);

/// A copy of `gm` (new graph, same node names; modules shared) that can be edited freely.
std::shared_ptr<GraphModule> copy_graph_module(const std::shared_ptr<GraphModule>& gm);

/// Whether `gm` or any of its submodules is in training mode; names the first in `which`.
bool any_training(const GraphModule& gm, std::string* which);

/// One of fuse_fx's patterns: a conv / linear layer, then its batch norm
/// and / or a ReLU (module or aten::relu / aten::relu_), each node but the
/// last used once.
struct FusionMatch {
  Node* first = nullptr;
  Node* bn = nullptr;    ///< or nullptr
  Node* relu = nullptr;  ///< or nullptr
  /// The first layer's type: "Conv1d", "Conv2d", "Conv3d" or "Linear".
  std::string type;
};

/// The fusion patterns of `gm`'s graph, matched from the last node backwards
/// as Python's fuser does (each node in one match), returned in graph order.
std::vector<FusionMatch> find_fusions(const GraphModule& gm);

/// A batch norm's statistics and affine parameters (ones / zeros when it has none).
struct BnState {
  at::Tensor mean, var, weight, bias;
  double eps = 1e-5;
};

/// The state of batch-norm module `bn`; fx::Error without running statistics.
BnState bn_state(const torch::nn::Module& bn);

/// fuse_conv_bn_weights: W·γ/√(σ²+ε) and (b−μ)·γ/√(σ²+ε)+β, detached, in
/// Python's float32 arithmetic (`b` may be undefined: zeros).
std::pair<at::Tensor, at::Tensor> fuse_conv_bn_weights(const at::Tensor& w, const at::Tensor& b, const BnState& bn);

/// fuse_linear_bn_weights: the same for a linear layer's [out, in] weight.
std::pair<at::Tensor, at::Tensor> fuse_linear_bn_weights(const at::Tensor& w, const at::Tensor& b, const BnState& bn);

/// The first node that computes on quantized tensors (a reference or lowered
/// int8 graph, or Python's convert_fx output), or nullptr.
const Node* quantized_node(const GraphModule& gm);

/// Whether `gm` calls observer or fake-quantizer modules (a prepared module);
/// the first one's target in `which`.
bool has_observers(const GraphModule& gm, std::string* which = nullptr);


}  // namespace fx::quantization::detail
