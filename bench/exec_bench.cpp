// Per-op execution cost on a 2,000-op chain of 1-element adds, single thread:
// eager C++ (an at::add loop), TorchScript (the chain pyfx_baseline.py
// exports, FX_CHAIN_PT), GraphModule::forward and Interpreter::run.
// pyfx_baseline.py measures the same chain in Python (chain_us_per_op).
#include <fx/graph_module.h>
#include <fx/interpreter.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace {

constexpr int kChainOps = 2000;  // pyfx_baseline.py CHAIN_OPS

/// v = a; v = add(v, a) kChainOps times: pyfx_baseline's add_chain_graph.
std::shared_ptr<fx::GraphModule> chain_module() {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* a = g->placeholder("a");
  fx::Node* v = a;
  for (int i = 0; i < kChainOps; ++i) v = g->call_function("aten::add", {v, a});
  g->output(v);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

/// Five repetitions, reported as their minimum: the per-op costs differ by a
/// few percent, less than the noise of one run on a shared machine.
void repeat_min(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true)->ComputeStatistics(
      "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

void set_per_op(benchmark::State& state) {
  // Seconds per op (Google Benchmark prints it as a time: "460ns").
  state.counters["per_op"] = benchmark::Counter(kChainOps, benchmark::Counter::kIsIterationInvariantRate |
                                                               benchmark::Counter::kInvert);
}

void BM_Chain_Eager(benchmark::State& state) {
  at::set_num_threads(1);
  at::NoGradGuard no_grad;
  at::Tensor a = at::ones({1});
  for (auto _ : state) {
    at::Tensor v = a;
    for (int i = 0; i < kChainOps; ++i) v = at::add(v, a);
    benchmark::DoNotOptimize(v);
  }
  set_per_op(state);
}
BENCHMARK(BM_Chain_Eager)->Apply(repeat_min);

void BM_Chain_TorchScript(benchmark::State& state) {
  const char* path = std::getenv("FX_CHAIN_PT");
  if (!path) {
    state.SkipWithError("FX_CHAIN_PT not set (run pyfx_baseline.py --export-chain)");
    return;
  }
  at::set_num_threads(1);
  at::NoGradGuard no_grad;
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  std::vector<c10::IValue> in{at::ones({1})};
  for (int i = 0; i < 3; ++i) m.forward(in);  // let the profiling executor settle
  for (auto _ : state) benchmark::DoNotOptimize(m.forward(in));
  set_per_op(state);
}
BENCHMARK(BM_Chain_TorchScript)->Apply(repeat_min);

void BM_Chain_GraphModule(benchmark::State& state) {
  at::set_num_threads(1);
  at::NoGradGuard no_grad;
  auto gm = chain_module();
  at::Tensor a = at::ones({1});
  gm->forward({a});  // compile and resolve overloads outside the loop
  for (auto _ : state) benchmark::DoNotOptimize(gm->forward({a}));
  set_per_op(state);
}
BENCHMARK(BM_Chain_GraphModule)->Apply(repeat_min);

void BM_Chain_Interpreter(benchmark::State& state) {
  at::set_num_threads(1);
  at::NoGradGuard no_grad;
  auto gm = chain_module();
  at::Tensor a = at::ones({1});
  fx::Interpreter interp(gm);
  interp.run({a});
  for (auto _ : state) benchmark::DoNotOptimize(interp.run({a}));
  set_per_op(state);
}
BENCHMARK(BM_Chain_Interpreter)->Apply(repeat_min);

// GraphModule construction over a root with N buffers, each read by one
// get_attr node: time per attribute must stay flat (it was quadratic).
void BM_GraphModuleConstruct(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto root = std::make_shared<torch::nn::Module>("Root");
  auto g = std::make_shared<fx::Graph>();
  fx::Node* acc = g->placeholder("x");
  for (int64_t i = 0; i < n; ++i) {
    root->register_buffer("b" + std::to_string(i), at::ones({1}));
    acc = g->call_function("aten::add", {acc, g->get_attr("b" + std::to_string(i))});
  }
  g->output(acc);
  for (auto _ : state) benchmark::DoNotOptimize(std::make_shared<fx::GraphModule>(root, g));
  state.counters["per_attr"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_GraphModuleConstruct)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

