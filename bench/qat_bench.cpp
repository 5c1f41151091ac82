// Quantization-aware training (issue 35), 1 thread, batch 32: one training step
// (zero_grad, forward, cross-entropy, backward, SGD step with momentum) of the
// imported float model and of its prepare_qat module, and the int8 forward of
// the post-training and of the QAT-converted model (the same oneDNN kernels).
// Models: torchvision resnet18 and mobilenet_v2 (64x64 images) exported by
// python/goldens/qat_goldens.py --export BUILD/models/qat, and the depthwise
// digits net of python/qat_digits_fixture.py (BUILD/models/digits/dw.script.pt).
//
//   BM_QatStep/<model>/<engine>   engine 0: float GraphModule, 1: prepare_qat module
//   BM_QatInt8/<model>/<engine>   engine 0: post-training int8, 1: QAT int8
//
// scripts/bench_qat.py runs them in rounds interleaved with Python's eager
// float step and its prepare_qat_fx step on the same networks.
#include "fx_paths.h"

#include <fx/import.h>
#include <fx/quantization/qat.h>
#include <fx/quantization/quantize.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <fstream>
#include <memory>

namespace {

namespace q = fx::quantization;

const char* kModels[] = {"resnet18", "mobilenet_v2", "digits_dw"};

std::string model_path(int model) {
  const std::string dir = std::string(FX_BINARY_DIR) + "/models/";
  return model == 2 ? dir + "digits/dw.script.pt" : dir + "qat/" + kModels[model] + ".qat.pt";
}

at::Tensor input(int model, int64_t batch) {
  return model == 2 ? torch::rand({batch, 1, 8, 8}) : torch::randn({batch, 3, 64, 64});
}

/// The imported model, or nullptr (the benchmark reports the missing file).
std::shared_ptr<fx::GraphModule> load(benchmark::State& state, int model) {
  const std::string path = model_path(model);
  if (!std::ifstream(path)) {
    state.SkipWithError((path + " is missing: run scripts/bench_qat.py").c_str());
    return nullptr;
  }
  return fx::import_torchscript(path);
}

void BM_QatStep(benchmark::State& state) {
  at::set_num_threads(1);
  const int model = static_cast<int>(state.range(0));
  const bool qat = state.range(1) == 1;
  auto gm = load(state, model);
  if (!gm) return;
  torch::manual_seed(0);
  const at::Tensor x = input(model, 32);
  const at::Tensor labels = torch::randint(0, model == 2 ? 10 : 1000, {32});
  gm->train();
  if (qat) gm = q::prepare_qat(gm, q::get_default_qat_qconfig_mapping("onednn"), {x.slice(0, 0, 1)});
  torch::optim::SGD opt(gm->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto step = [&] {
    opt.zero_grad();
    torch::nn::functional::cross_entropy(gm->forward({x}).toTensor(), labels).backward();
    opt.step();
  };
  for (int i = 0; i < 2; ++i) step();
  for (auto _ : state) step();
  state.SetLabel(std::string(kModels[model]) + (qat ? " qat" : " fp32"));
}

BENCHMARK(BM_QatStep)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->ArgNames({"model", "engine"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_QatInt8(benchmark::State& state) {
  at::set_num_threads(1);
  const int model = static_cast<int>(state.range(0));
  auto gm = load(state, model);
  if (!gm) return;
  torch::manual_seed(0);
  const at::Tensor x = input(model, 32);
  std::shared_ptr<fx::GraphModule> int8;
  if (state.range(1) == 0) {
    gm->eval();
    int8 = q::quantize(gm, {x.slice(0, 0, 1)}, {{input(model, 32)}, {input(model, 32)}});
  } else {
    gm->train();
    auto qat = q::prepare_qat(gm, q::get_default_qat_qconfig_mapping("onednn"), {x.slice(0, 0, 1)});
    torch::optim::SGD opt(qat->parameters(), torch::optim::SGDOptions(0.001));
    for (int i = 0; i < 2; ++i) {
      opt.zero_grad();
      torch::nn::functional::cross_entropy(qat->forward({input(model, 32)}).toTensor(),
                                           torch::randint(0, model == 2 ? 10 : 1000, {32}))
          .backward();
      opt.step();
    }
    qat->eval();
    q::QuantizeReport report;
    int8 = q::convert_and_lower(qat, true, report);
  }
  at::NoGradGuard no_grad;
  for (int i = 0; i < 2; ++i) int8->forward({x});
  for (auto _ : state) benchmark::DoNotOptimize(int8->forward({x}));
  state.SetLabel(std::string(kModels[model]) + (state.range(1) ? " qat int8" : " post-training int8"));
}

BENCHMARK(BM_QatInt8)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->ArgNames({"model", "engine"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
