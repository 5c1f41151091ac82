// Dropout's mask, 1 thread: ATen's bernoulli_(t, p) against fxcpp::bernoulli_
// (bernoulli_as_fxcpp), which draws the same numbers from the same default
// generator in bulk, on the masks of the encoder's training step
// (TransformerEncoderLayer d 64, feed-forward 256, 32 x 32 tokens):
//
//   BM_Bernoulli/<elements>/<fxcpp>   float mask of 65536 (the residual
//       dropouts), 131072 (attention weights) and 262144 (feed-forward)
//       elements, ATen's kernel (0) or fxcpp::bernoulli_ (1)
//
// items_per_second counts mask elements.
#include <fx/aot.h>
#include <fx/graph.h>

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

namespace {

void BM_Bernoulli(benchmark::State& state) {
  at::set_num_threads(1);
  {
    fx::Graph g;  // links fxcpp_aot, which registers fxcpp::bernoulli_
    fx::bernoulli_as_fxcpp(g);
  }
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::bernoulli_", "").typed<at::Tensor&(at::Tensor&, double)>();
  at::Tensor mask = torch::empty({state.range(0)});
  const bool fxcpp = state.range(1) != 0;
  torch::manual_seed(0);
  for (auto _ : state) {
    if (fxcpp)
      op.call(mask, 0.9);
    else
      mask.bernoulli_(0.9);
    benchmark::DoNotOptimize(mask.data_ptr<float>());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetLabel(fxcpp ? "fxcpp::bernoulli_" : "aten::bernoulli_");
}

BENCHMARK(BM_Bernoulli)
    ->ArgsProduct({{65536, 131072, 262144}, {0, 1}})
    ->ArgNames({"elements", "fxcpp"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
