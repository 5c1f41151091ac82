// TorchScript import and forward: resnet50 and mobilenet_v2, batch 1,
// 224×224, one thread. Beside each figure, the Python baseline measured by
// python/export_models.py --bench on the same machine:
//  - import_torchscript (from a loaded module) vs Python torch.fx.symbolic_trace;
//  - GraphModule::forward vs torch::jit::Module::forward (the TorchScript
//    interpreter on the same file) vs Python eager.
#include "fx_paths.h"

#include <fx/graph_module.h>
#include <fx/import.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace {

const std::string& models_dir() {
  static const std::string dir = [] {
    std::string d = std::string(FX_BINARY_DIR) + "/models";
    if (!std::ifstream(d + "/bench_python.json")) {
      std::string cmd = "/usr/bin/python3 '" + std::string(FX_SOURCE_DIR) + "/python/export_models.py' --bench --out '" +
                        d + "' > /dev/null";
      if (std::system(cmd.c_str()) != 0) return std::string();
    }
    return d;
  }();
  return dir;
}

// A number from bench_python.json: {"resnet50": {"symbolic_trace_ms": 12.3, ...}}.
double python_baseline(const std::string& model, const std::string& key) {
  std::ifstream in(models_dir() + "/bench_python.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  size_t m = s.find("\"" + model + "\"");
  if (m == std::string::npos) return 0;
  size_t k = s.find("\"" + key + "\"", m);
  if (k == std::string::npos) return 0;
  size_t colon = s.find(':', k);
  return std::strtod(s.c_str() + colon + 1, nullptr);
}

struct Loaded {
  torch::jit::Module module;
  std::shared_ptr<fx::GraphModule> gm;
  at::Tensor input;
};

Loaded& loaded(const std::string& model) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(model);
  if (it != cache.end()) return it->second;
  Loaded l;
  l.module = fx::load_torchscript(models_dir() + "/" + model + ".bench.pt");
  l.gm = fx::import_torchscript(l.module);
  l.input = at::randn({1, 3, 224, 224});
  return cache.emplace(model, std::move(l)).first->second;
}

void BM_ImportTorchScript(benchmark::State& state, const std::string& model) {
  at::set_num_threads(1);
  Loaded& l = loaded(model);
  for (auto _ : state) benchmark::DoNotOptimize(fx::import_torchscript(l.module));
  state.counters["nodes"] = static_cast<double>(l.gm->graph().nodes().size());
  state.counters["python_symbolic_trace_ms"] = python_baseline(model, "symbolic_trace_ms");
}

void BM_ForwardGraphModule(benchmark::State& state, const std::string& model) {
  at::set_num_threads(1);
  Loaded& l = loaded(model);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) l.gm->forward({l.input});
  for (auto _ : state) benchmark::DoNotOptimize(l.gm->forward({l.input}));
  state.counters["python_eager_ms"] = python_baseline(model, "eager_forward_ms");
}

void BM_ForwardTorchScript(benchmark::State& state, const std::string& model) {
  at::set_num_threads(1);
  Loaded& l = loaded(model);
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i) l.module.forward({l.input});
  for (auto _ : state) benchmark::DoNotOptimize(l.module.forward({l.input}));
  state.counters["python_eager_ms"] = python_baseline(model, "eager_forward_ms");
}

BENCHMARK_CAPTURE(BM_ImportTorchScript, resnet50, std::string("resnet50"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportTorchScript, mobilenet_v2, std::string("mobilenet_v2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ForwardGraphModule, resnet50, std::string("resnet50"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_ForwardTorchScript, resnet50, std::string("resnet50"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_ForwardGraphModule, mobilenet_v2, std::string("mobilenet_v2"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_ForwardTorchScript, mobilenet_v2, std::string("mobilenet_v2"))->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
