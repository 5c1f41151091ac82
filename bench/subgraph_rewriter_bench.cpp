// replace_pattern of conv2d -> batch_norm -> relu (replaced by conv2d -> relu)
// on the graphs of python/bench/subgraph_rewriter_baseline.py:
//  - synthetic: x, then blocks conv2d(v, w) -> batch_norm(., w, b, rm, rv,
//    false, 0.1, 1e-05, false) -> relu over get_attr weights (8 nodes a
//    block), 1k / 10k / 100k nodes: the time per node shows linearity;
//  - resnet50: the C++ ResNet-50 (torchvision's layout) traced, its conv and
//    batch norm modules turned into the same functional calls (33 matches).
// Every iteration rewrites a fresh copy of the graph (made outside the timed
// region). "+recompile" also regenerates the code, as torch.fx's
// replace_pattern does (fxcpp otherwise recompiles lazily on first use).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <fx/graph_module.h>
#include <fx/passes/subgraph_rewriter.h>
#include <fx/trace.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "../tests/trace/trace_models.h"

namespace {

using fx::Argument;
using fx::Graph;
using fx::GraphModule;
using fx::Node;

// The pattern (placeholders x, w, bw, bb, rm, rv) and its replacement.
struct Rule {
  Graph pattern, replacement;
  Rule() {
    std::vector<Node*> p;
    for (const char* n : {"x", "w", "bw", "bb", "rm", "rv"}) p.push_back(pattern.placeholder(n));
    Node* c = pattern.call_function("aten::conv2d", {p[0], p[1]});
    Node* b = pattern.call_function("aten::batch_norm", {c, p[2], p[3], p[4], p[5], false, 0.1, 1e-05, false});
    pattern.output(pattern.call_function("aten::relu", {b}));
    std::vector<Node*> r;
    for (const char* n : {"x", "w", "bw", "bb", "rm", "rv"}) r.push_back(replacement.placeholder(n));
    replacement.output(
        replacement.call_function("aten::relu", {replacement.call_function("aten::conv2d", {r[0], r[1], r[3]})}));
  }
};

const Rule& rule() {
  static const Rule r;
  return r;
}

// A block: conv2d -> batch_norm -> relu on get_attr weights named after `prefix`.
Node* block(Graph& g, Node* v, const std::string& w, const std::string& bn) {
  Node* c = g.call_function("aten::conv2d", {v, g.get_attr(w)});
  std::vector<Argument> args{c};
  for (const char* a : {".weight", ".bias", ".running_mean", ".running_var"}) args.push_back(g.get_attr(bn + a));
  for (Argument lit : {Argument(false), Argument(0.1), Argument(1e-05), Argument(false)}) args.push_back(lit);
  return g.call_function("aten::batch_norm", std::move(args));
}

// All blocks read the same five attributes (through their own get_attr nodes),
// so the root module stays small.
struct Synthetic {
  std::shared_ptr<torch::nn::Module> root = std::make_shared<torch::nn::Module>("Root");
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  explicit Synthetic(int64_t nodes) {
    at::Tensor t = at::empty({1});
    root->register_buffer("w", t);
    auto bn = root->register_module("bn", std::make_shared<torch::nn::Module>("BN"));
    for (const char* a : {"weight", "bias", "running_mean", "running_var"}) bn->register_buffer(a, t);
    Node* v = graph->placeholder("x");
    for (int64_t i = 0; i < nodes / 8; ++i) v = graph->call_function("aten::relu", {block(*graph, v, "w", "bn")});
    graph->output(v);
  }
};

// The traced C++ ResNet-50 with conv / batch norm modules as functional calls.
struct ResNet50 {
  std::shared_ptr<GraphModule> traced;
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  ResNet50() {
    at::manual_seed(0);
    fx::trace_test::ResNet net(true, std::vector<int64_t>{3, 4, 6, 3}, 1000);
    net->eval();
    traced = fx::symbolic_trace(net.ptr(), {at::randn({1, 3, 224, 224})});
    std::unordered_map<const Node*, Node*> env;
    auto lookup = [&](Node* n) -> Argument { return env.at(n); };
    for (Node* n : traced->graph().nodes()) {
      if (n->op() == fx::Opcode::CallModule) {
        auto mod = traced->get_submodule(n->target());
        Node* x = env.at(n->args()[0].to_node());
        if (dynamic_cast<torch::nn::Conv2dImpl*>(mod.get())) {
          env[n] = graph->call_function("aten::conv2d", {x, graph->get_attr(n->target() + ".weight")});
          continue;
        }
        if (dynamic_cast<torch::nn::BatchNorm2dImpl*>(mod.get())) {
          std::vector<Argument> args{x};
          for (const char* a : {".weight", ".bias", ".running_mean", ".running_var"})
            args.push_back(graph->get_attr(n->target() + a));
          for (Argument lit : {Argument(false), Argument(0.1), Argument(1e-05), Argument(false)}) args.push_back(lit);
          env[n] = graph->call_function("aten::batch_norm", std::move(args));
          continue;
        }
      }
      if (n->op() == fx::Opcode::Output) {
        graph->output(fx::map_arg(n->args()[0], lookup));
        break;
      }
      env[n] = graph->node_copy(n, lookup);
    }
  }
};

std::shared_ptr<Graph> fresh(const Graph& g) {
  auto copy = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> val_map;
  copy->output(*copy->graph_copy(g, val_map));
  return copy;
}

void run(benchmark::State& state, const std::shared_ptr<torch::nn::Module>& root, const Graph& g, bool recompile) {
  size_t matches = 0;
  auto gm = std::make_shared<GraphModule>(root, fresh(g));
  for (auto _ : state) {
    state.PauseTiming();
    gm->set_graph(fresh(g));  // a fresh copy each time (the old one is freed here, untimed)
    state.ResumeTiming();
    matches = fx::replace_pattern(*gm, rule().pattern, rule().replacement).size();
    if (recompile) gm->recompile();
  }
  state.counters["matches"] = static_cast<double>(matches);
  state.counters["nodes"] = static_cast<double>(g.nodes().size());
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(g.nodes().size()),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ReplacePattern_Synthetic(benchmark::State& state) {
  at::set_num_threads(1);
  static std::unordered_map<int64_t, std::unique_ptr<Synthetic>> graphs;
  auto& s = graphs[state.range(0)];
  if (!s) s = std::make_unique<Synthetic>(state.range(0));
  run(state, s->root, *s->graph, state.range(1) != 0);
}
BENCHMARK(BM_ReplacePattern_Synthetic)
    ->ArgNames({"nodes", "recompile"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({100000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond);

void BM_ReplacePattern_ResNet50(benchmark::State& state) {
  at::set_num_threads(1);
  static ResNet50 r;
  run(state, r.traced, *r.graph, state.range(0) != 0);
}
BENCHMARK(BM_ReplacePattern_ResNet50)->ArgName("recompile")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// Matching alone (no edits), same graphs: SubgraphMatcher::match.
void BM_SubgraphMatcher_Synthetic(benchmark::State& state) {
  static std::unordered_map<int64_t, std::unique_ptr<Synthetic>> graphs;
  auto& s = graphs[state.range(0)];
  if (!s) s = std::make_unique<Synthetic>(state.range(0));
  fx::SubgraphMatcher matcher(rule().pattern);
  size_t matches = 0;
  for (auto _ : state) matches = matcher.match(*s->graph).size();
  state.counters["matches"] = static_cast<double>(matches);
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(s->graph->nodes().size()),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SubgraphMatcher_Synthetic)
    ->ArgName("nodes")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond);

}  // namespace
