// ShapeProp on resnet50 (torchvision, imported from TorchScript), batch 1,
// 224×224, one thread: one real forward (GraphModule::forward, no grad) vs
// ShapeProp::propagate (real data, autograd on, as torch.fx runs it) vs
// ShapeProp::propagate_meta (no data). The Python side is
// python/bench/shape_prop_baseline.py (torch.fx ShapeProp on the same model).
// BM_ShapePropMeta reports meta_over_forward: the cost of shape propagation
// without data as a fraction of one real forward (target: ≤ 0.05).
#include "fx_paths.h"

#include <fx/graph_module.h>
#include <fx/import.h>
#include <fx/passes/shape_prop.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

namespace {

// build/models/resnet50.bench.pt, exported by python/export_models.py --bench
// (as bench/import_bench.cpp does) when missing.
std::shared_ptr<fx::GraphModule> resnet50() {
  static std::shared_ptr<fx::GraphModule> gm = [] {
    const std::string dir = std::string(FX_BINARY_DIR) + "/models";
    const std::string path = dir + "/resnet50.bench.pt";
    if (!std::ifstream(path)) {
      std::string cmd = "/usr/bin/python3 '" + std::string(FX_SOURCE_DIR) + "/python/export_models.py' --bench --out '" +
                        dir + "' > /dev/null";
      if (std::system(cmd.c_str()) != 0) return std::shared_ptr<fx::GraphModule>();
    }
    return fx::import_torchscript(path);
  }();
  return gm;
}

const at::Tensor& input() {
  static const at::Tensor x = at::randn({1, 3, 224, 224});
  return x;
}

double forward_ms(fx::GraphModule& gm) {
  torch::NoGradGuard no_grad;
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    gm.forward({input()});
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void BM_ShapePropForward(benchmark::State& state) {
  at::set_num_threads(1);
  auto gm = resnet50();
  if (!gm) return state.SkipWithError("resnet50.bench.pt missing");
  torch::NoGradGuard no_grad;
  gm->forward({input()});
  for (auto _ : state) benchmark::DoNotOptimize(gm->forward({input()}));
  state.counters["nodes"] = static_cast<double>(gm->graph().nodes().size());
}
BENCHMARK(BM_ShapePropForward)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_ShapePropReal(benchmark::State& state) {
  at::set_num_threads(1);
  auto gm = resnet50();
  if (!gm) return state.SkipWithError("resnet50.bench.pt missing");
  fx::ShapeProp(gm).propagate({input()});
  for (auto _ : state) benchmark::DoNotOptimize(fx::ShapeProp(gm).propagate({input()}));
}
BENCHMARK(BM_ShapePropReal)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_ShapePropMeta(benchmark::State& state) {
  at::set_num_threads(1);
  auto gm = resnet50();
  if (!gm) return state.SkipWithError("resnet50.bench.pt missing");
  fx::ShapeProp warm(gm);
  warm.propagate_meta({input()});
  size_t fallbacks = warm.fallback_nodes().size();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(fx::ShapeProp(gm).propagate_meta({input()}));
  const double meta_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                         static_cast<double>(state.iterations());
  const double fwd = forward_ms(*gm);
  state.counters["fallback_nodes"] = static_cast<double>(fallbacks);
  state.counters["forward_ms"] = fwd;
  state.counters["meta_over_forward"] = meta_ms / fwd;  // wall clock both
}
BENCHMARK(BM_ShapePropMeta)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
