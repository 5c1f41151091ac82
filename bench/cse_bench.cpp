// CSEPass and eliminate_dead_code on synthetic graphs of 1k/10k/100k nodes
// (time per node must stay flat) and on a traced ResNet-50; Python
// torch.fx's figures for the same graphs come from
// python/bench/passes_baseline.py (scripts/bench_table.py puts them side by side).
#include <fx/passes/cse.h>
#include <fx/passes/dead_code.h>
#include <fx/trace.h>

#include "../tests/trace/trace_models.h"

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

namespace {

/// x → (relu(v), relu(v)) → add → ... : every other relu is a duplicate.
std::shared_ptr<fx::GraphModule> duplicate_chain(int64_t nodes) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* v = g->placeholder("x");
  for (int64_t i = 0; i < nodes / 3; ++i) {
    fx::Node* a = g->call_function("aten::relu", {v});
    fx::Node* b = g->call_function("aten::relu", {v});
    v = g->call_function("aten::add", {a, b});
  }
  g->output(v);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>("Root"), g);
}

void BM_CSE_Chain(benchmark::State& state) {
  const int64_t n = state.range(0);
  size_t nodes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = duplicate_chain(n);
    nodes = gm->graph().nodes().size();
    state.ResumeTiming();
    fx::CSEPass cse;
    benchmark::DoNotOptimize(cse(gm));
  }
  state.counters["per_node"] = benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_CSE_Chain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

std::shared_ptr<fx::GraphModule> traced_resnet50() {
  static std::shared_ptr<fx::GraphModule> gm = [] {
    at::manual_seed(0);
    fx::trace_test::ResNet net(true, std::vector<int64_t>{3, 4, 6, 3}, 1000);
    net->eval();
    return fx::symbolic_trace(net, {at::randn({1, 3, 64, 64})});
  }();
  return gm;
}

/// A fresh GraphModule over a copy of the traced ResNet-50 graph (same modules).
std::shared_ptr<fx::GraphModule> resnet50_copy() {
  auto src = traced_resnet50();
  auto g = std::make_shared<fx::Graph>();
  std::unordered_map<const fx::Node*, fx::Node*> map;
  auto out = g->graph_copy(src->graph(), map);
  g->output(*out);
  return std::make_shared<fx::GraphModule>(src, g);
}

void BM_CSE_ResNet50(benchmark::State& state) {
  at::set_num_threads(1);
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = resnet50_copy();
    state.ResumeTiming();
    fx::CSEPass cse;
    benchmark::DoNotOptimize(cse(gm));
  }
}
BENCHMARK(BM_CSE_ResNet50)->Unit(benchmark::kMillisecond);

}  // namespace
