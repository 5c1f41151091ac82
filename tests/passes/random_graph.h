#pragma once
// Random graphs for the passes' property tests: a pass must keep the
// outputs of every such graph equal to the original's.
//
// A graph has `inputs` placeholders of shape [4, 4] and a root module with
// a few parameters/buffers (get_attr nodes), then `ops` pure element-wise
// ATen calls over earlier values: unary (relu, tanh, sigmoid, neg, abs),
// binary (add with an alpha kwarg, mul, sub, maximum), scalar literals
// (mul by 0.5, add 1.0). It deliberately contains what passes look for:
// exact duplicates of earlier nodes (CSE), nodes nobody uses (DCE), chains
// that depend only on attributes (constant folding), and 1 to 3 outputs in
// a tuple. Values stay bounded (tanh/sigmoid are frequent), so comparisons
// at 1e-6 are meaningful.

#include <fx/graph.h>
#include <fx/graph_module.h>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace fx_test {

/// A random graph with the module that owns its attributes, and inputs to run it.
struct RandomGraph {
  std::shared_ptr<fx::GraphModule> gm;
  std::vector<c10::IValue> inputs;
};

/// Options of make_random_graph.
struct RandomGraphOptions {
  int inputs = 2;
  int attrs = 3;
  int ops = 40;
  double duplicate_rate = 0.15;  ///< share of ops that copy an earlier op exactly
  double attr_only_rate = 0.2;   ///< share of ops built only over attribute values
};

/// A random graph from `seed` (same seed, same graph).
inline RandomGraph make_random_graph(uint64_t seed, const RandomGraphOptions& opt = {}) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  at::manual_seed(static_cast<uint64_t>(seed));

  auto root = std::make_shared<torch::nn::Module>("RandomRoot");
  auto g = std::make_shared<fx::Graph>();
  std::vector<fx::Node*> all, attrs;
  for (int i = 0; i < opt.inputs; ++i) all.push_back(g->placeholder("x"));
  for (int i = 0; i < opt.attrs; ++i) {
    std::string name = "w" + std::to_string(i);
    root->register_buffer(name, at::rand({4, 4}) - 0.5);
    fx::Node* a = g->get_attr(name);
    attrs.push_back(a);
    all.push_back(a);
  }
  static const char* unary[] = {"aten::relu", "aten::tanh", "aten::sigmoid", "aten::neg", "aten::abs"};
  static const char* binary[] = {"aten::add", "aten::mul", "aten::sub", "aten::maximum"};
  std::vector<fx::Node*> ops, attr_only = attrs;
  for (int i = 0; i < opt.ops; ++i) {
    fx::Node* n = nullptr;
    if (!ops.empty() && chance(opt.duplicate_rate)) {
      fx::Node* o = ops[pick(ops.size())];
      n = g->create_node(o->op(), o->target(), o->args(), o->kwargs());
    } else {
      bool from_attrs = chance(opt.attr_only_rate);
      const std::vector<fx::Node*>& pool = from_attrs ? attr_only : all;
      fx::Node* a = pool[pick(pool.size())];
      fx::Node* b = pool[pick(pool.size())];
      switch (pick(4)) {
        case 0: n = g->call_function(unary[pick(5)], {a}); break;
        case 1: n = g->call_function(binary[pick(4)], {a, b}); break;
        case 2: n = g->call_function("aten::add", {a, b}, {{"alpha", 0.5}}); break;
        default:
          n = chance(0.5) ? g->call_function("aten::mul", {a, 0.5}) : g->call_function("aten::add", {a, 1.0});
          n = g->call_function("aten::tanh", {n});
          break;
      }
      if (from_attrs) attr_only.push_back(n);
    }
    ops.push_back(n);
    all.push_back(n);
  }
  // Outputs: the last op, plus up to two random ops; everything else that
  // has no user is dead code.
  std::vector<fx::Argument> outs{ops.back()};
  int extra = static_cast<int>(pick(3));
  for (int i = 0; i < extra; ++i) outs.push_back(ops[pick(ops.size())]);
  g->output(fx::Argument::tuple(outs));

  RandomGraph r;
  r.gm = std::make_shared<fx::GraphModule>(root, g);
  for (int i = 0; i < opt.inputs; ++i) r.inputs.push_back(at::rand({4, 4}) * 2 - 1);
  return r;
}

}  // namespace fx_test
