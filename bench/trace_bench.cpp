// symbolic_trace of a ResNet-50-shaped C++ model (torchvision's layout,
// batch 1, 224x224), beside one eager forward of the same model on the same
// input: /0 traces on meta tensors (the default: no arithmetic), /1 with
// TraceOptions::real_values (every operator runs once on the example values,
// so the figure of merit is the overhead per node beyond that forward).
#include <fx/trace.h>

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
// counters compare the best thread-CPU time of each.
void BM_Trace_ResNet50(benchmark::State& state) {
  at::set_num_threads(1);
  auto& f = resnet50();
  fx::TraceOptions options;
  options.real_values = state.range(0) != 0;
  fx::symbolic_trace(f.net, {f.x}, {}, options);  // registers the tracing kernel once
  double best_trace = 1e9;
  double best_eager = 1e9;
  size_t nodes = 0;
  for (auto _ : state) {
    double t0 = thread_seconds();
    auto gm = fx::symbolic_trace(f.net, {f.x}, {}, options);
    best_trace = std::min(best_trace, thread_seconds() - t0);
    nodes = gm->graph().nodes().size();
    benchmark::DoNotOptimize(gm);
    state.PauseTiming();
    {
      c10::InferenceMode inference;
      t0 = thread_seconds();
      benchmark::DoNotOptimize(f.net->forward(f.x));
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
BENCHMARK(BM_Trace_ResNet50)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(7);

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
