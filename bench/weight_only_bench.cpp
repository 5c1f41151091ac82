// fx::decoders::linear_weight_only (weight-only int8 / int4 linear layers,
// issue 67) against float32 at::linear on a LLaMA-7B-ish / TinyLlama's
// products: decoding one token (1 row: GEMV, bound by reading the weights)
// and a prompt of 128 rows (GEMM; 512 for one shape). Shapes N x K: 2048x2048 (attention
// projections), 5632x2048 (gate / up), 2048x5632 (down), 32000x2048 (lm_head).
// Bytes processed are the weight's bytes (int4: 0.5 a weight plus its group
// scales), so bytes_per_second is the weight stream's rate. Threads: 1 (and 2
// for one shape; at::set_num_threads); the kernel is weight_only_kernel()'s.
//
//   build/fx_bench --benchmark_filter=WeightOnly
#include <fx/decoders/weight_only.h>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <map>
#include <tuple>

namespace {

enum Format { kF32 = 0, kInt8 = 1, kInt4G32 = 2 };

struct Weights {
  at::Tensor f32;
  fx::decoders::PackedWeightOnly int8, int4;
};

const Weights& weights(int64_t n, int64_t k) {
  static std::map<std::pair<int64_t, int64_t>, Weights> cache;
  auto it = cache.find({n, k});
  if (it != cache.end()) return it->second;
  at::manual_seed(0);
  Weights& w = cache[{n, k}];
  w.f32 = at::randn({n, k}) * 0.02;
  w.int8 = fx::decoders::pack_weight_only(w.f32, {8, 0, true});
  w.int4 = fx::decoders::pack_weight_only(w.f32, {4, 32, true});
  return w;
}

int64_t bytes_of(const fx::decoders::PackedWeightOnly& p) {
  return p.data.nbytes() + p.scales.nbytes() + (p.zeros.defined() ? p.zeros.nbytes() : 0);
}

/// Args: N, K, rows, format, threads.
void BM_WeightOnlyLinear(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), rows = state.range(2);
  const auto format = static_cast<Format>(state.range(3));
  const int threads_before = at::get_num_threads();
  at::set_num_threads(static_cast<int>(state.range(4)));
  c10::InferenceMode guard;
  const Weights& w = weights(n, k);
  const at::Tensor x = at::randn({rows, k});
  int64_t bytes = n * k * 4;
  if (format == kInt8) bytes = bytes_of(w.int8);
  if (format == kInt4G32) bytes = bytes_of(w.int4);
  for (auto _ : state) {
    at::Tensor y = format == kF32    ? at::linear(x, w.f32)
                   : format == kInt8 ? fx::decoders::linear_weight_only(x, w.int8)
                                     : fx::decoders::linear_weight_only(x, w.int4);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(n * k * rows) * 1e-9 * state.iterations(),
                                                benchmark::Counter::kIsRate);
  state.SetLabel(std::string(format == kF32 ? "f32 at::linear" : format == kInt8 ? "int8" : "int4-g32") +
                 (format == kF32 ? "" : " " + fx::decoders::weight_only_kernel(format == kInt8 ? 8 : 4)));
  at::set_num_threads(threads_before);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "K", "rows", "format", "threads"});
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}})
    for (int64_t format : {kF32, kInt8, kInt4G32}) b->Args({n, k, 1, format, 1});
  for (int64_t format : {kF32, kInt8, kInt4G32}) b->Args({5632, 2048, 1, format, 2});
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}})
    for (int64_t format : {kF32, kInt8, kInt4G32}) b->Args({n, k, 128, format, 1});
  // A long prompt: 512 rows.
  for (int64_t format : {kF32, kInt8, kInt4G32}) b->Args({5632, 2048, 512, format, 1});
}

// Rates per CPU second of the whole process (OpenBLAS, under f32 at::linear, keeps
// threads of its own whatever at::set_num_threads says): per thread-equivalent,
// which a shared machine still measures (wall time is printed beside).
BENCHMARK(BM_WeightOnlyLinear)->Apply(shapes)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();

/// The reference rate: one thread reading 256 MB of floats (at::sum) in the same run, on the same shared machine.
void BM_WeightOnlyReadBandwidth(benchmark::State& state) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  c10::InferenceMode guard;
  const at::Tensor big = at::ones({int64_t{64} << 20});
  for (auto _ : state) benchmark::DoNotOptimize(at::sum(big).item<float>());
  state.SetBytesProcessed(state.iterations() * big.nbytes());
  at::set_num_threads(threads_before);
}

BENCHMARK(BM_WeightOnlyReadBandwidth)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();

}  // namespace
