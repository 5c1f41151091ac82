#pragma once
// Internal: the pieces of fx::to_torchscript (include/fx/export.h).
//
//  - export_torchscript.cpp mirrors a GraphModule's module tree as TorchScript
//    modules and turns each forward graph into a method;
//  - export_graph.cpp translates one fx Graph into a torch::jit::Graph;
//  - export_leaves.cpp inlines the torch::nn C++ leaf layers as ATen operators.

#include <fx/export.h>
#include <fx/node.h>

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

namespace fx::export_detail {

/// Throws fx::ExportError "cannot export node 'n' (op[target=t]): why".
[[noreturn]] void fail(const Node* node, const std::string& why);

/// The forward graph of `gm` as a TorchScript graph whose first input is
/// `self` (of `self_module`'s type, which already holds every attribute and
/// submodule the graph names). Throws fx::ExportError naming the node.
std::shared_ptr<torch::jit::Graph> build_forward_graph(GraphModule& gm, const torch::jit::Module& self_module);

/// Inserts into `graph` what the forward of the torch::nn C++ leaf `module`
/// computes on `inputs`, reading its tensors from `module_value` (its
/// TorchScript mirror). Returns nullptr and sets `why` when the module has
/// no TorchScript form (an unknown type, or options that cannot be expressed).
torch::jit::Value* emit_nn_leaf(const torch::nn::Module& module, torch::jit::Graph& graph,
                                torch::jit::Value* module_value, const std::vector<torch::jit::Value*>& inputs,
                                std::string& why);

/// Inserts a call of operator `name` (e.g. "aten::conv2d") with TorchScript's
/// argument matching; nullptr and `why` set when no schema matches.
torch::jit::Value* insert_op(torch::jit::Graph& graph, const std::string& name,
                             const std::vector<torch::jit::NamedValue>& args, std::string& why);

}  // namespace fx::export_detail
