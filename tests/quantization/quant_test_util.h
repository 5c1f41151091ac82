#pragma once
// Helpers of tests/quantization: the goldens of python/goldens/quantization_goldens.py,
// and a small conv / batch-norm / residual / linear network built as a graph.
#include "fx_paths.h"

#include <fx/graph_module.h>
#include <fx/module_attributes.h>
#include <fx/quantization/observers.h>
#include <fx/quantization/qconfig.h>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace quant_test {

/// The goldens of python/goldens/quantization_goldens.py computed on this
/// machine (BUILD/models/quant/quantization.json, written by ctest's
/// quantization_models_export fixture), else the checked-in
/// tests/quantization/goldens/quantization.json. Observer scales follow the
/// fp32 activations, which differ in their last bits with the CPU's kernels
/// (AVX2 against AVX-512: a histogram scale of 0.0106982 against 0.0106769),
/// so scales are compared with Python's on the same CPU.
inline const nlohmann::json& goldens() {
  static const nlohmann::json g = [] {
    std::ifstream here(std::string(FX_BINARY_DIR) + "/models/quant/quantization.json");
    if (here) return nlohmann::json::parse(here);
    std::ifstream in(std::string(FX_SOURCE_DIR) + "/tests/quantization/goldens/quantization.json");
    return nlohmann::json::parse(in);
  }();
  return g;
}

/// x → conv1 → bn1 → relu → pool (aten::max_pool2d) → conv2 → bn2 → (+ pool) → relu2 → flatten → fc → relu (functional) → output,
/// in eval mode with batch-norm statistics that are not the identity.
inline std::shared_ptr<fx::GraphModule> small_net() {
  namespace nn = torch::nn;
  torch::manual_seed(7);
  auto root = std::make_shared<nn::Module>();
  root->register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)).ptr());
  root->register_module("bn1", nn::BatchNorm2d(4).ptr());
  root->register_module("relu", nn::ReLU().ptr());
  root->register_module("conv2", nn::Conv2d(nn::Conv2dOptions(4, 4, 3).padding(1).bias(false)).ptr());
  root->register_module("bn2", nn::BatchNorm2d(4).ptr());
  root->register_module("relu2", nn::ReLU().ptr());
  root->register_module("fc", nn::Linear(4 * 4 * 4, 5).ptr());
  {
    torch::NoGradGuard no_grad;
    for (const char* bn : {"bn1", "bn2"}) {
      auto& b = *root->named_modules()[bn]->as<nn::BatchNorm2d>();
      b.running_mean.uniform_(-0.5, 0.5);
      b.running_var.uniform_(0.5, 2.0);
      b.weight.uniform_(0.5, 1.5);
      b.bias.uniform_(-0.2, 0.2);
    }
  }
  root->eval();
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* c1 = g->call_module("conv1", {x});
  fx::Node* b1 = g->call_module("bn1", {c1});
  fx::Node* r1 = g->call_module("relu", {b1});
  fx::Node* p = g->create_node(fx::Opcode::CallFunction, "aten::max_pool2d", {r1, fx::Argument::list({2})}, {}, "pool");
  fx::Node* c2 = g->call_module("conv2", {p});
  fx::Node* b2 = g->call_module("bn2", {c2});
  fx::Node* add = g->call_function("aten::add", {b2, p});
  fx::Node* r2 = g->call_module("relu2", {add});
  fx::Node* flat = g->call_function("aten::flatten", {r2, 1});
  fx::Node* fc = g->call_module("fc", {flat});
  fx::Node* r3 = g->call_function("aten::relu", {fc});
  g->output(r3);
  auto gm = std::make_shared<fx::GraphModule>(root, g);
  gm->eval();
  return gm;
}

/// fxcpp's spelling of a node as the goldens spell Python's: in-place ATen
/// calls without their underscore ("add_" → "add", "add__1" → "add_1") and
/// call_function targets without overload; {name, opcode, target}.
inline std::vector<std::string> spelled_as_python(const fx::Node* n) {
  std::string name = n->name(), target = n->target();
  if (n->op() == fx::Opcode::CallFunction) {
    target = fx::quantization::canonical_function(target);
    const std::string base = target.substr(target.find("::") + 2);
    const bool in_place = n->target().compare(0, target.size() + 1, target + "_") == 0;
    if (in_place && name.compare(0, base.size() + 1, base + "_") == 0) name = base + name.substr(base.size() + 1);
  }
  return {name, fx::to_string(n->op()), target};
}

/// Python's class name of what a call_module node calls (an observer's or a layer's).
inline std::string python_class(const fx::GraphModule& gm, const fx::Node* n) {
  auto m = gm.get_submodule(n->target());
  if (auto* o = fx::quantization::as_observer(*m)) return o->type_name();
  auto a = fx::module_attributes(*m);
  return a ? a->type : "?";
}

/// Seeded inputs of small_net.
inline at::Tensor small_input(int64_t seed, int64_t batch = 2) {
  torch::manual_seed(seed);
  return torch::randn({batch, 3, 8, 8});
}

}  // namespace quant_test
