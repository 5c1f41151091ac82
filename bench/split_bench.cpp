// split_module and CapabilityBasedPartitioner costs: the same workloads as
// python/bench/split_baseline.py (Python torch.fx 1.13).
//  - split_module of resnet50 (TorchScript import of python/export_models.py's
//    resnet50.pt; Python splits its symbolic_trace), 20 nodes per partition;
//  - split_module of an add chain of 1k / 10k / 100k nodes, 100 per partition;
//  - the partitioner (propose + fuse) on a chain whose every 50th op is
//    unsupported, and on a "ladder" where every supported node also feeds an
//    unsupported one (each node's users lie in two partitions: the dependency
//    search runs for every node).
// Time per node should stay flat from 1k to 100k nodes (linear time).
#include <fx/import.h>
#include <fx/passes/partitioner.h>
#include <fx/passes/split_module.h>

#include "fx_paths.h"

#include "bench_graphs.h"

#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

namespace {

std::shared_ptr<fx::GraphModule> add_chain(int64_t n, int64_t unsupported_every = 0) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* v = x;
  for (int64_t i = 0; i < n; ++i) {
    const bool odd = unsupported_every > 0 && i % unsupported_every == unsupported_every - 1;
    v = g->call_function(odd ? "aten::mul" : "aten::add", {v, x});
  }
  g->output(v);
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

using fx_bench::ladder;

/// A chain of supported adds where every add also feeds an unsupported mul
/// made after the next add (a side output): each add's users lie in the
/// big chain partition and in a lone unsupported node.
std::shared_ptr<fx::GraphModule> side_outputs(int64_t n) {
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  fx::Node* v = g->call_function("aten::add", {x, x});
  std::vector<fx::Argument> sides;
  for (int64_t i = 0; i < n / 2; ++i) {
    fx::Node* next = g->call_function("aten::add", {v, x});
    sides.push_back(g->call_function("aten::mul", {v, x}));
    v = next;
  }
  sides.push_back(v);
  g->output(fx::Argument::tuple(sides));
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

void per_node(benchmark::State& state, int64_t nodes) {
  state.counters["per_node"] = benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kIsIterationInvariantRate |
                                                                                 benchmark::Counter::kInvert);
}

void BM_SplitModuleResnet50(benchmark::State& state) {
  const std::string path = std::string(FX_BINARY_DIR) + "/models/resnet50.pt";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError("build/models/resnet50.pt missing: /usr/bin/python3 python/export_models.py --out build/models resnet50");
    return;
  }
  // Without stack traces in meta: Python's symbolic_trace records none either
  // (split_module copies every node's meta).
  fx::ImportOptions options;
  options.record_stack_traces = false;
  auto gm = fx::import_torchscript(path, options);
  int64_t nodes = static_cast<int64_t>(gm->graph().nodes().size());
  for (auto _ : state) {
    int64_t i = 0;
    auto split = fx::split_module(gm, nullptr, [&](fx::Node*) { return i++ / 20; });
    benchmark::DoNotOptimize(split.get());
  }
  state.counters["nodes"] = static_cast<double>(nodes);
}
BENCHMARK(BM_SplitModuleResnet50)->Unit(benchmark::kMillisecond);

void BM_SplitModuleChain(benchmark::State& state) {
  auto gm = add_chain(state.range(0));
  for (auto _ : state) {
    int64_t i = 0;
    auto split = fx::split_module(gm, nullptr, [&](fx::Node*) { return i++ / 100; });
    benchmark::DoNotOptimize(split.get());
  }
  per_node(state, state.range(0));
}
BENCHMARK(BM_SplitModuleChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// The same chains cut into 10 partitions whatever their length.
void BM_SplitModuleChainTenParts(benchmark::State& state) {
  auto gm = add_chain(state.range(0));
  const int64_t chunk = state.range(0) / 10;
  for (auto _ : state) {
    int64_t i = 0;
    auto split = fx::split_module(gm, nullptr, [&](fx::Node*) { return i++ / chunk; });
    benchmark::DoNotOptimize(split.get());
  }
  per_node(state, state.range(0));
}
BENCHMARK(BM_SplitModuleChainTenParts)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

std::shared_ptr<fx::OperatorSupportBase> add_only() {
  return fx::create_op_support(
      [](const fx::SubmoduleMap&, const fx::Node* n) { return n->op() == fx::Opcode::CallFunction && n->target() == "aten::add"; });
}

void partition_bench(benchmark::State& state, std::shared_ptr<fx::GraphModule> (*make)(int64_t)) {
  auto support = add_only();
  size_t parts = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto gm = make(state.range(0));
    state.ResumeTiming();
    fx::CapabilityBasedPartitioner p(gm, support);
    auto proposed = p.propose_partitions();
    parts = proposed.size();
    p.fuse_partitions(proposed);
    state.PauseTiming();
    gm.reset();
    state.ResumeTiming();
  }
  state.counters["partitions"] = static_cast<double>(parts);
  per_node(state, state.range(0));
}

std::shared_ptr<fx::GraphModule> chain_every_50(int64_t n) { return add_chain(n, 50); }

void BM_PartitionerChain(benchmark::State& state) { partition_bench(state, chain_every_50); }
BENCHMARK(BM_PartitionerChain)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_PartitionerLadder(benchmark::State& state) { partition_bench(state, ladder); }
BENCHMARK(BM_PartitionerLadder)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_PartitionerSideOutputs(benchmark::State& state) { partition_bench(state, side_outputs); }
BENCHMARK(BM_PartitionerSideOutputs)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
