// symbolic_trace of ResNet-50/18-shaped C++ models (torchvision's layout,
// batch 1, 224x224) and a transformer encoder, each beside one eager forward of the same model on the same
// input: /0 traces on meta tensors (the default: no arithmetic), /1 with
// TraceOptions::real_values (every operator runs once on the example values,
// so the figure of merit is the overhead per node beyond that forward).
#include <fx/trace.h>

#include <torch/nn/modules/transformercoder.h>

#include "../tests/trace/trace_models.h"

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <ctime>

namespace {

struct ResNet50Fixture {
  ResNet50Fixture() : net(fx::trace_test::ResNet(true, std::vector<int64_t>{3, 4, 6, 3}, 1000)) {
    at::manual_seed(0);
    net->eval();
    x = at::randn({1, 3, 224, 224});
  }
  fx::trace_test::ResNet net;
  at::Tensor x;
};

ResNet50Fixture& resnet50() {
  static ResNet50Fixture f;
  return f;
}

// CPU time of this thread (single-threaded runs: robust on a busy machine).
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// symbolic_trace (to a GraphModule) vs one eager forward, interleaved; the
// counters compare the best thread-CPU time of each. range(0): 0 on meta
// tensors, 1 with real values.
template <class M>
void trace_against_eager(benchmark::State& state, M& net, const at::Tensor& x) {
  at::set_num_threads(1);
  fx::TraceOptions options;
  options.real_values = state.range(0) != 0;
  fx::symbolic_trace(net, {x}, {}, options);  // registers the tracing kernel once
  double best_trace = 1e9;
  double best_eager = 1e9;
  size_t nodes = 0;
  for (auto _ : state) {
    double t0 = thread_seconds();
    auto gm = fx::symbolic_trace(net, {x}, {}, options);
    best_trace = std::min(best_trace, thread_seconds() - t0);
    nodes = gm->graph().nodes().size();
    benchmark::DoNotOptimize(gm);
    state.PauseTiming();
    {
      c10::InferenceMode inference;
      t0 = thread_seconds();
      benchmark::DoNotOptimize(net->forward(x));
      best_eager = std::min(best_eager, thread_seconds() - t0);
    }
    state.ResumeTiming();
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["eager_cpu_ms"] = best_eager * 1e3;
  state.counters["trace_cpu_ms"] = best_trace * 1e3;
  state.counters["overhead_us_per_node"] =
      (best_trace - best_eager) * 1e6 / static_cast<double>(std::max<size_t>(nodes, 1));
}

void BM_Trace_ResNet50(benchmark::State& state) {
  auto& f = resnet50();
  trace_against_eager(state, f.net, f.x);
}
BENCHMARK(BM_Trace_ResNet50)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(7);

// ResNet-18 (batch 1, 224x224) and a 6-layer transformer encoder (d_model
// 512, 8 heads, 128 tokens), the other two models of issue 13's table.
void BM_Trace_ResNet18(benchmark::State& state) {
  at::manual_seed(0);
  static auto net = fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 1000);
  net->eval();
  static at::Tensor x = at::randn({1, 3, 224, 224});
  trace_against_eager(state, net, x);
}
BENCHMARK(BM_Trace_ResNet18)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(7);

void BM_Trace_TransformerEncoder(benchmark::State& state) {
  at::manual_seed(0);
  static torch::nn::TransformerEncoder net(
      torch::nn::TransformerEncoderOptions(torch::nn::TransformerEncoderLayerOptions(512, 8).dropout(0.0), 6));
  net->eval();
  static at::Tensor x = at::randn({128, 1, 512});
  trace_against_eager(state, net, x);
}
BENCHMARK(BM_Trace_TransformerEncoder)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(7);

void BM_Trace_ResNet50_EagerForward(benchmark::State& state) {
  at::set_num_threads(1);
  auto& f = resnet50();
  for (auto _ : state) {
    c10::InferenceMode inference;
    benchmark::DoNotOptimize(f.net->forward(f.x));
  }
}
BENCHMARK(BM_Trace_ResNet50_EagerForward)->Unit(benchmark::kMillisecond)->Iterations(5);

// Tracing overhead without the convolutions' arithmetic: a chain of adds on
// a 1-element tensor, traced vs computed eagerly (inference mode), per node.
void BM_Trace_ElementwiseChain(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto chain = [n](const at::Tensor& x) {
    at::Tensor v = x;
    for (int64_t i = 0; i < n; ++i) v = at::add(v, x);
    return v;
  };
  auto fn = [&](std::vector<c10::IValue> a) -> c10::IValue { return chain(a[0].toTensor()); };
  at::Tensor x = at::ones({1});
  fx::Tracer().trace(fn, {x});
  double best_trace = 1e9;
  double best_eager = 1e9;
  for (auto _ : state) {
    double t0 = thread_seconds();
    benchmark::DoNotOptimize(fx::Tracer().trace(fn, {x}));
    best_trace = std::min(best_trace, thread_seconds() - t0);
    state.PauseTiming();
    {
      c10::InferenceMode inference;
      t0 = thread_seconds();
      benchmark::DoNotOptimize(chain(x));
      best_eager = std::min(best_eager, thread_seconds() - t0);
    }
    state.ResumeTiming();
  }
  state.counters["trace_us_per_node"] = best_trace * 1e6 / static_cast<double>(n);
  state.counters["eager_us_per_op"] = best_eager * 1e6 / static_cast<double>(n);
  state.counters["overhead_us_per_node"] = (best_trace - best_eager) * 1e6 / static_cast<double>(n);
}
BENCHMARK(BM_Trace_ElementwiseChain)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace
