// Graph API costs: building an add chain, DCE, lint, python_code, graph_copy.
// The same workloads as ../shared/bench/pyfx_baseline.py's graph_api().
#include <fx/graph.h>

#include <benchmark/benchmark.h>

#include <memory>

namespace {

/// x, then N nodes add(v, x), then the output: pyfx_baseline's add_chain_graph.
std::unique_ptr<fx::Graph> add_chain(int64_t n) {
  auto g = std::make_unique<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* v = x;
  for (int64_t i = 0; i < n; ++i) v = g->call_function("aten::add", {v, x});
  g->output(v);
  return g;
}

void BM_BuildAddChain(benchmark::State& state) {
  for (auto _ : state) {
    auto g = add_chain(state.range(0));
    benchmark::DoNotOptimize(g.get());
    state.PauseTiming();
    g.reset();  // destruction is not part of building
    state.ResumeTiming();
  }
  // Seconds per node (Google Benchmark prints it as a time: "120ns").
  state.counters["per_node"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kIsIterationInvariantRate |
                                                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_BuildAddChain)->Arg(1000)->Arg(16000)->Arg(1000000)->Unit(benchmark::kMillisecond);

constexpr int64_t kLargest = 16000;  // pyfx_baseline's largest graph

void BM_Lint(benchmark::State& state) {
  auto g = add_chain(kLargest);
  for (auto _ : state) g->lint();
}
BENCHMARK(BM_Lint)->Unit(benchmark::kMillisecond);

void BM_PythonCode(benchmark::State& state) {
  auto g = add_chain(kLargest);
  for (auto _ : state) benchmark::DoNotOptimize(g->python_code("self"));
}
BENCHMARK(BM_PythonCode)->Unit(benchmark::kMillisecond);

void BM_GraphCopy(benchmark::State& state) {
  auto g = add_chain(kLargest);
  for (auto _ : state) {
    fx::Graph copy;
    std::unordered_map<const fx::Node*, fx::Node*> val_map;
    copy.graph_copy(*g, val_map);
    benchmark::DoNotOptimize(val_map.size());
    state.PauseTiming();
    val_map.clear();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_GraphCopy)->Unit(benchmark::kMillisecond);

void BM_EliminateDeadCode(benchmark::State& state) {
  // Python's baseline runs DCE on the live chain (nothing to remove): same here.
  auto g = add_chain(kLargest);
  for (auto _ : state) benchmark::DoNotOptimize(g->eliminate_dead_code());
}
BENCHMARK(BM_EliminateDeadCode)->Unit(benchmark::kMillisecond);

void BM_EliminateDeadCodeAllDead(benchmark::State& state) {
  // The harder case: every add is dead and is erased, last first.
  for (auto _ : state) {
    state.PauseTiming();
    auto g = add_chain(kLargest);
    g->output_node()->update_arg(0, g->nodes().to_vector().front());
    state.ResumeTiming();
    benchmark::DoNotOptimize(g->eliminate_dead_code());
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_EliminateDeadCodeAllDead)->Unit(benchmark::kMillisecond);

}  // namespace
