// One training step (zero_grad, forward, loss, backward, SGD step), 1 thread:
// eager libtorch against fx::aot_module with functorch's default partition
// and with the min-cut partition, on resnet18 and mobilenet_v2 (64x64
// images, cross-entropy) and libtorch's TransformerEncoderLayer (d 64,
// 4 heads, sequence 32, mean square), batch 8 and 32.
//
//   BM_TrainStep/<model>/<engine>/<batch>   engine 0 eager, 1 aot default partition,
//                                           2 functorch's min cut, 3 fxcpp's min cut,
//                                           4 fxcpp's min cut channels-last (AotOptions::memory_format),
//                                           5 eager with fx::FusedSGD, 6 engine 4 with fx::FusedSGD
//                                           (the others: torch::optim::SGD), 7 engine 6 without
//                                           fuse_batch_norm_activation (the pass's worth, side by side),
//                                           8 engine 6 without conv_as_winograd (the same),
//                                           9 engine 6 with conv_forward_rewrites, 10 engine 6 without
//                                           fuse_kernels (fxcpp's generated kernels: their worth),
//                                           11 engine 6 without sink_recomputation,
//                                           12 engine 6 with the FusedSGD stepped inside backward
//                                           (AotModule::set_optimizer_in_backward: no zero_grad, no step)
//   BM_TrainStepMemory/...                  the memory of a step (one process each)
//
// scripts/bench_training.py runs them interleaved (random interleaving of
// repetitions), next to Python's eager and functorch aot_module, and
// measures each engine's peak memory in a process of its own.
#include "../tests/aot/aot_models.h"

#include <fx/aot.h>
#include <fx/fused_sgd.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

namespace {

/// A model, its optimizer and the step to time.
struct Trainer {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::unique_ptr<torch::optim::SGD> opt;
  fx::FusedSGD* fused = nullptr;  // opt, when it is a FusedSGD (its zero_grad sets to none)
  bool in_backward = false;       // fused_in_backward steps inside backward (set_optimizer_in_backward)
  std::shared_ptr<fx::FusedSGD> fused_in_backward;
  at::Tensor x, labels;
  bool classifier = true;

  void zero_grad() {
    if (in_backward) return;
    if (fused)
      fused->zero_grad();
    else
      opt->zero_grad();
  }
  /// Forward and loss: what backward will need is alive after it.
  at::Tensor forward_loss() {
    at::Tensor out = forward(x);
    return classifier ? torch::nn::functional::cross_entropy(out, labels) : out.pow(2).mean();
  }
  void step() {
    zero_grad();
    forward_loss().backward();
    optimizer_step();
  }
  void optimizer_step() {
    if (!in_backward) opt->step();
  }
};

std::unique_ptr<Trainer> make_trainer(int model, int engine_and_optimizer, int64_t batch) {
  torch::manual_seed(0);
  const bool fused_sgd = engine_and_optimizer >= 5;
  const int engine = engine_and_optimizer == 5 ? 0 : engine_and_optimizer >= 6 ? 4 : engine_and_optimizer;
  auto t = std::make_unique<Trainer>();
  std::shared_ptr<fx::AotModule> aot;
  fx::AotOptions options;
  if (engine == 4) options.memory_format = c10::MemoryFormat::ChannelsLast;
  options.partition_fn = engine >= 3   ? fx::min_cut_partition()
                         : engine == 2 ? fx::PartitionFn(fx::min_cut_rematerialization_partition)
                                       : fx::PartitionFn(fx::default_partition);
  if (engine_and_optimizer >= 7 && engine_and_optimizer <= 11) {
    fx::TrainingCompileOptions without;
    if (engine_and_optimizer == 7) without.fuse_batch_norm_activation = false;
    if (engine_and_optimizer == 8) without.conv_winograd_min_positions = 0;
    if (engine_and_optimizer == 9) without.conv_forward_rewrites = true;  // the opt-in: forward convolutions too
    if (engine_and_optimizer == 10) without.fuse_kernels = false;
    if (engine_and_optimizer == 11) without.sink_recomputation = false;
    options.fw_compiler = options.bw_compiler = fx::training_compiler(without);
  }
  if (model == 0 || model == 1) {
    t->x = torch::randn({batch, 3, 64, 64});
    t->labels = torch::randint(0, 1000, {batch});
    if (model == 0) {
      auto m = fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2});
      t->module = m.ptr();
      if (engine) aot = fx::aot_module(m.ptr(), options);
      t->forward = [m](const at::Tensor& x) mutable { return m->forward(x); };
    } else {
      auto m = fx::aot_test::MobileNetV2();
      t->module = m.ptr();
      if (engine) aot = fx::aot_module(m.ptr(), options);
      t->forward = [m](const at::Tensor& x) mutable { return m->forward(x); };
    }
  } else {
    auto m = torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(256));
    t->module = m.ptr();
    t->x = torch::randn({32, batch, 64});
    t->classifier = false;
    if (engine) aot = fx::aot_module(m.ptr(), options);
    t->forward = [m](const at::Tensor& x) mutable { return m->forward(x); };
  }
  if (aot) t->forward = [aot](const at::Tensor& x) { return aot->forward(x); };
  t->module->train();
  const auto sgd = torch::optim::SGDOptions(0.01).momentum(0.9);
  if (engine_and_optimizer == 12) {
    auto fused = std::make_shared<fx::FusedSGD>(t->module->parameters(), sgd);
    aot->set_optimizer_in_backward(fused);
    t->in_backward = true;
    t->opt = std::make_unique<torch::optim::SGD>(t->module->parameters(), sgd);  // never stepped
    t->fused_in_backward = std::move(fused);
  } else if (fused_sgd) {
    auto fused = std::make_unique<fx::FusedSGD>(t->module->parameters(), sgd);
    t->fused = fused.get();
    t->opt = std::move(fused);
  } else {
    t->opt = std::make_unique<torch::optim::SGD>(t->module->parameters(), sgd);
  }
  return t;
}

void BM_TrainStep(benchmark::State& state) {
  at::set_num_threads(1);
  auto t = make_trainer(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), state.range(2));
  for (int i = 0; i < 2; ++i) t->step();  // trace, compile, warm the allocator
  for (auto _ : state) t->step();
  static const char* models[] = {"resnet18", "mobilenet_v2", "encoder"};
  static const char* engines[] = {"eager",
                                  "aot_default",
                                  "aot_functorch_min_cut",
                                  "aot_min_cut",
                                  "aot_min_cut_nhwc",
                                  "eager_fused_sgd",
                                  "aot_min_cut_nhwc_fused_sgd",
                                  "aot_min_cut_nhwc_fused_sgd_no_bn_fusion",
                                  "aot_min_cut_nhwc_fused_sgd_no_winograd",
                                  "aot_min_cut_nhwc_fused_sgd_forward_rewrites",
                                  "aot_min_cut_nhwc_fused_sgd_no_fuse_kernels",
                                  "aot_min_cut_nhwc_fused_sgd_no_sink_recomputation",
                                  "aot_min_cut_nhwc_fused_sgd_in_backward"};
  state.SetLabel(std::string(models[state.range(0)]) + " " + engines[state.range(1)]);
}

BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {8, 32}})
    ->ArgNames({"model", "engine", "batch"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace

namespace {

/// The CPU allocator's live bytes, as libtorch reports them to a memory
/// profiler (every allocation and free after installation, with the running
/// total of what was allocated since): the peak of that total is the most
/// memory a step held beyond what existed before it.
struct PeakReporter : c10::MemoryReportingInfoBase {
  int64_t peak = 0, now = 0;
  void reportMemoryUsage(void*, int64_t, int64_t total_allocated, int64_t, c10::Device) override {
    now = total_allocated;
    peak = std::max(peak, total_allocated);
  }
  bool memoryProfilingEnabled() const override { return true; }
};

/// The process's peak resident memory (VmHWM of /proc/self/status, kB; 0
/// where there is none): what the allocator's count misses too (oneDNN's
/// and fxcpp's per-thread scratch buffers, the libraries, the model).
int64_t peak_resident_kb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

/// The memory of a training step, after one step that traced and compiled:
/// step_MB, the peak of the tensor bytes allocated during three steps beyond
/// those alive after the first zero_grad (parameters, optimizer state, and
/// the gradients unless zero_grad freed them: the
/// activations kept for backward, temporaries, the memory plan's arena, the
/// new gradients before they are accumulated); kept_MB, what the forward
/// keeps alive for the backward (the activations). Run each in a process of
/// its own (scripts/bench_training.py does); hwm_MB, the process's peak
/// resident memory after them.
void BM_TrainStepMemory(benchmark::State& state) {
  at::set_num_threads(1);
  auto t = make_trainer(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), state.range(2));
  t->step();
  int64_t peak = 0, kept = 0, base = 0;
  for (auto _ : state) {
    auto reporter = std::make_shared<PeakReporter>();
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, reporter);
    for (int i = 0; i < 3; ++i) {
      t->zero_grad();  // FusedSGD's frees the gradients: count from here
      if (i == 0) base = reporter->peak = reporter->now;
      const int64_t before = reporter->now;
      at::Tensor loss = t->forward_loss();
      kept = reporter->now - before;  // what the forward keeps for backward
      loss.backward();
      t->optimizer_step();
    }
    peak = reporter->peak - base;
  }
  const double mb = 1024.0 * 1024.0;
  state.counters["step_MB"] = static_cast<double>(peak) / mb;
  state.counters["kept_MB"] = static_cast<double>(kept) / mb;
  state.counters["hwm_MB"] = static_cast<double>(peak_resident_kb()) / 1024.0;
}

BENCHMARK(BM_TrainStepMemory)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {8, 32}})
    ->ArgNames({"model", "engine", "batch"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
