// Constant folding (split_const_subgraphs, folding included) and argument
// normalization (normalize_args) on 1k/10k-node graphs and on resnet50
// imported from TorchScript. The same workloads as
// python/bench/foldnorm_baseline.py (torch.fx 1.13), which prints the
// Python figures. Graphs are rebuilt outside the timed region.
#include "fx_paths.h"

#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/passes/const_fold.h>
#include <fx/passes/normalize.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <unordered_map>

namespace {

/// x, w; n/2 constant muls of w, and a non-constant chain over x that adds
/// every 10th constant (baseline's fold_graph).
std::shared_ptr<fx::GraphModule> fold_graph(int64_t n) {
  auto root = std::make_shared<torch::nn::Module>("Root");
  root->register_buffer("w", at::rand({4, 4}));
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* c = g->get_attr("w");
  fx::Node* y = x;
  for (int64_t i = 0; i < n / 2; ++i) {
    c = g->call_function("aten::mul", {c, 1.0001});
    y = i % 10 == 0 ? g->call_function("aten::add", {y, c}) : g->call_function("aten::neg", {y});
  }
  g->output(y);
  return std::make_shared<fx::GraphModule>(root, g);
}

/// x, y, then n nodes add(v, y, alpha=1) (baseline's add_chain).
std::shared_ptr<fx::GraphModule> add_chain(int64_t n) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* y = g->placeholder("y");
  fx::Node* v = x;
  for (int64_t i = 0; i < n; ++i) v = g->call_function("aten::add", {v, y}, {{"alpha", 1}});
  g->output(v);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
}

void BM_ConstFold(benchmark::State& state) {
  at::set_num_threads(1);
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = fold_graph(state.range(0));
    state.ResumeTiming();
    benchmark::DoNotOptimize(fx::split_const_subgraphs(gm));
    state.PauseTiming();
    gm.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_ConstFold)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_Normalize(benchmark::State& state) {
  at::set_num_threads(1);
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = add_chain(state.range(0));
    state.ResumeTiming();
    benchmark::DoNotOptimize(fx::normalize_args(gm));
    state.PauseTiming();
    gm.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_Normalize)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

/// resnet50 imported from build/models/resnet50.pt (python/export_models.py).
std::shared_ptr<fx::GraphModule> resnet50() {
  static std::shared_ptr<fx::GraphModule> gm = [] {
    std::string path = std::string(FX_BINARY_DIR) + "/models/resnet50.pt";
    if (!std::ifstream(path)) return std::shared_ptr<fx::GraphModule>();
    return fx::import_torchscript(path);
  }();
  return gm;
}

/// A copy of gm's graph.
std::shared_ptr<fx::Graph> copy_graph(const fx::Graph& g) {
  auto out = std::make_shared<fx::Graph>();
  std::unordered_map<const fx::Node*, fx::Node*> map;
  auto result = out->graph_copy(g, map);
  if (result) out->output(*result);
  return out;
}

void BM_ConstFoldResNet50(benchmark::State& state) {
  at::set_num_threads(1);
  auto gm = resnet50();
  if (!gm) return state.SkipWithError("build/models/resnet50.pt missing: run python/export_models.py --out build/models resnet50");
  for (auto _ : state) benchmark::DoNotOptimize(fx::split_const_subgraphs(gm));
  state.counters["nodes"] = static_cast<double>(gm->graph().nodes().size());
}
BENCHMARK(BM_ConstFoldResNet50)->Unit(benchmark::kMillisecond);

void BM_NormalizeResNet50(benchmark::State& state) {
  at::set_num_threads(1);
  auto gm = resnet50();
  if (!gm) return state.SkipWithError("build/models/resnet50.pt missing: run python/export_models.py --out build/models resnet50");
  auto original = gm->graph_ptr();
  for (auto _ : state) {
    state.PauseTiming();
    gm->set_graph(copy_graph(*original));
    state.ResumeTiming();
    benchmark::DoNotOptimize(fx::normalize_args(gm));
  }
  gm->set_graph(original);
  state.counters["nodes"] = static_cast<double>(original->nodes().size());
}
BENCHMARK(BM_NormalizeResNet50)->Unit(benchmark::kMillisecond);

}  // namespace
