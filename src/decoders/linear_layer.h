#pragma once
// The linear layers of a graph as the decoder passes see them
// (quantize_weight_only.cpp, merge_projections.cpp): a call_module of a
// Linear, or aten::linear whose weight (and bias) are get_attr nodes.
#include <fx/graph_module.h>
#include <fx/module_attributes.h>

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace fx::decoders::detail {

/// Where weight-only layers' packed tensors live: `_weight_only.LAYER.data` (and .scales, .zeros, .bias).
inline const std::string kWeightOnlyRoot = "_weight_only.";

/// A linear layer of the graph.
struct LinearLayer {
  std::string name;  ///< qualified name (module, or weight attribute without ".weight")
  Argument input;
  at::Tensor weight, bias;
};

/// The parameter or buffer `name` of `m` itself (not of its children), or an undefined tensor.
inline at::Tensor named_tensor(const torch::nn::Module& m, const std::string& name) {
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    if (p.key() == name) return p.value();
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (b.key() == name) return b.value();
  return {};
}

/// Argument `i` of `n`, or its keyword `key`, or nullopt.
inline std::optional<Argument> arg_of(const Node* n, size_t i, const char* key) {
  if (i < n->args().size()) return n->args()[i];
  for (const auto& kv : n->kwargs())
    if (kv.first == key) return kv.second;
  return std::nullopt;
}

inline bool is_get_attr(const std::optional<Argument>& a) {
  return a && a->is_node() && a->to_node()->op() == Opcode::GetAttr;
}

/// A layer's qualified name from its weight's get_attr node: the attribute without ".weight".
inline std::string layer_name_of(const Node* weight_attr) {
  std::string name = weight_attr->target();
  if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) name.resize(name.size() - 7);
  return name;
}

/// The linear layer `n` is, or nullopt.
inline std::optional<LinearLayer> linear_layer_of(const GraphModule& gm, const Node* n) {
  if (n->op() == Opcode::CallModule) {
    auto m = gm.get_submodule(n->target());
    auto a = module_attributes(*m);
    if (!a || a->type != "Linear" || n->args().size() != 1 || !n->kwargs().empty()) return std::nullopt;
    LinearLayer l{n->target(), n->args()[0], named_tensor(*m, "weight"), named_tensor(*m, "bias")};
    if (!l.weight.defined() || l.weight.dim() != 2) return std::nullopt;
    return l;
  }
  if (n->op() != Opcode::CallFunction || n->target() != "aten::linear") return std::nullopt;
  const auto input = arg_of(n, 0, "input"), weight = arg_of(n, 1, "weight"), bias = arg_of(n, 2, "bias");
  if (!input || !is_get_attr(weight) || (bias && !bias->is_none() && !is_get_attr(bias))) return std::nullopt;
  LinearLayer l{layer_name_of(weight->to_node()), *input, gm.fetch_attr(weight->to_node()->target()),
                bias && !bias->is_none() ? gm.fetch_attr(bias->to_node()->target()) : at::Tensor()};
  if (!l.weight.defined() || l.weight.dim() != 2) return std::nullopt;
  return l;
}

}  // namespace fx::decoders::detail
