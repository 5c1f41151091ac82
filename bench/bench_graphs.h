#pragma once
// Graphs several benchmarks share.
#include <fx/graph.h>
#include <fx/graph_module.h>

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>

namespace fx_bench {

/// v = add(v, mul(v, x)) n/2 times: a "ladder" where every add also feeds the
/// next mul (add supported by a backend, mul not, in the partitioner and
/// splitter benchmarks).
inline std::shared_ptr<fx::GraphModule> ladder(int64_t n) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* v = x;
  for (int64_t i = 0; i < n / 2; ++i) {
    fx::Node* u = g->call_function("aten::mul", {v, x});
    v = g->call_function("aten::add", {v, u});
  }
  g->output(v);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

}  // namespace fx_bench
