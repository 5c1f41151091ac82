#pragma once
// Internal helpers shared by fuse, prepare and convert.
#include <fx/graph_module.h>
#include <fx/module_attributes.h>

#include <memory>
#include <optional>
#include <string>

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

}  // namespace fx::quantization::detail
