// fx::quantization::quantize_dynamic on a transformer encoder (torch::nn::
// TransformerEncoder, 2 layers, d_model 256, 8 heads, feed-forward 1024,
// sequence 128, batch 1 and 8): the same model as libtorch eager (C++
// frontend, inference mode), as an fxcpp GraphModule (fx::symbolic_trace:
// Linear and LayerNorm leaves, attention traced through) in fp32, and that
// GraphModule after quantize_dynamic (every Linear, out_proj included, and the
// attention's in_proj aten::linear: libtorch's quantized::linear_dynamic on
// onednn-packed int8 weights). One thread (at::set_num_threads(1)); Time is
// wall time, CPU the process's CPU time (equal when nothing else competes).
//
//   build/fx_bench --benchmark_filter=QuantizeDynamic
#include <fx/quantization/quantize_dynamic.h>
#include <fx/trace.h>

#include <torch/nn/modules/transformercoder.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <map>

namespace {

constexpr int64_t kSeq = 128, kModel = 256, kHeads = 8, kFeedForward = 1024, kLayers = 2;

struct Encoder {
  torch::nn::TransformerEncoder net{nullptr};
  at::Tensor x;
  std::shared_ptr<fx::GraphModule> fp32, int8;
};

Encoder& encoder(int64_t batch) {
  static std::map<int64_t, Encoder> cache;
  auto it = cache.find(batch);
  if (it != cache.end()) return it->second;
  Encoder& e = cache[batch];
  at::manual_seed(0);
  e.net = torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
      torch::nn::TransformerEncoderLayerOptions(kModel, kHeads).dim_feedforward(kFeedForward).dropout(0.0), kLayers));
  e.net->eval();
  e.x = at::randn({kSeq, batch, kModel});
  e.fp32 = fx::symbolic_trace(e.net, {e.x});
  e.fp32->eval();
  e.int8 = fx::quantization::quantize_dynamic(e.fp32);
  return e;
}

template <class F>
void run(benchmark::State& state, F&& forward) {
  at::set_num_threads(1);
  c10::InferenceMode inference;
  forward();  // warm-up: kernels made on first use
  for (auto _ : state) benchmark::DoNotOptimize(forward());
  state.counters["batch"] = static_cast<double>(state.range(0));
}

void BM_QuantizeDynamic_Eager(benchmark::State& state) {
  Encoder& e = encoder(state.range(0));
  run(state, [&] { return e.net->forward(e.x); });
}

void BM_QuantizeDynamic_FxFp32(benchmark::State& state) {
  Encoder& e = encoder(state.range(0));
  run(state, [&] { return e.fp32->forward({e.x}); });
}

void BM_QuantizeDynamic_FxInt8(benchmark::State& state) {
  Encoder& e = encoder(state.range(0));
  run(state, [&] { return e.int8->forward({e.x}); });
}

// The pass itself: quantizing and packing the 2 layers' weights (1.3M parameters).
void BM_QuantizeDynamic_Pass(benchmark::State& state) {
  Encoder& e = encoder(1);
  at::set_num_threads(1);
  fx::quantization::DynamicQuantReport report;
  for (auto _ : state) benchmark::DoNotOptimize(fx::quantization::quantize_dynamic(e.fp32, {}, &report));
  state.counters["int8_layers"] = static_cast<double>(report.quantized_layers);
}

BENCHMARK(BM_QuantizeDynamic_Eager)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_QuantizeDynamic_FxFp32)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_QuantizeDynamic_FxInt8)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
BENCHMARK(BM_QuantizeDynamic_Pass)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
