// fxcpp::decoder_attention (issue 67) against HF's unfused attention in ATen
// (repeat_interleave of the cache per query head, matmul, scale, masked
// softmax, matmul) on TinyLlama's heads: 32 query heads over 4 key / value
// heads of 64, a cache of 256 positions of which `visible` are filled.
// Decoding one token (T = 1) and a prompt of 128 (T = 128, causal).
//
//   build/fx_bench --benchmark_filter=DecoderAttention
#include <fx/decoders/passes.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

namespace {

/// Args: T, visible positions, engine (0 ATen's unfused graph, 1 fxcpp::decoder_attention).
void BM_DecoderAttention(benchmark::State& state) {
  const int64_t t = state.range(0), visible = state.range(1), s = 256;
  const bool fused = state.range(2) == 1;
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  c10::InferenceMode guard;
  at::manual_seed(0);
  const at::Tensor q = at::randn({1, 32, t, 64}), k = at::randn({1, 4, s, 64}), v = at::randn({1, 4, s, 64});
  const at::Tensor pos = at::arange(visible - t, visible);
  const at::Tensor mask = at::arange(s).unsqueeze(0).gt(pos.unsqueeze(1));  // true: hidden
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(fx::decoders::decoder_attention(q, k, v, mask, 0.125));
    } else {
      const at::Tensor keys = k.repeat_interleave(8, 1), values = v.repeat_interleave(8, 1);
      const at::Tensor scores = (at::matmul(q, keys.transpose(2, 3)) / 8.0).masked_fill(mask, -INFINITY);
      benchmark::DoNotOptimize(at::matmul(at::softmax(scores, -1), values));
    }
  }
  state.SetLabel(fused ? std::string("fxcpp::decoder_attention ") + fx::decoders::decoder_attention_kernel()
                       : "ATen unfused");
  at::set_num_threads(threads_before);
}

BENCHMARK(BM_DecoderAttention)
    ->ArgNames({"T", "visible", "fused"})
    ->Args({1, 150, 0})
    ->Args({1, 150, 1})
    ->Args({128, 128, 0})
    ->Args({128, 128, 1})
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime();

}  // namespace
