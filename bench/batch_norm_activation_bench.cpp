// The backward's batch norm + relu, as the min cut leaves it and as
// fuse_batch_norm_activation rewrites it, at 1 thread, on the activation
// shapes of resnet18 at 64x64 (batch 8 and 32, 64 channels at 32x32 and
// 512 channels at 2x2), contiguous and channels-last:
//
//   BM_BatchNormRecompute/<shape>/<layout>/<fused>   the recomputed relu(bn(x)):
//       sub, mul, mul, add, relu (ATen, 0) or one fxcpp::batch_norm_apply (1)
//   BM_BatchNormReluBackward/<shape>/<layout>/<fused>  the gradient through relu
//       and batch norm: threshold_backward + native_batch_norm_backward (0)
//       or one fxcpp::batch_norm_act_backward (1)
//
// Allocations come from a warm heap (glibc's mmap threshold raised, as
// optimize_for_inference does; a compiled graph's memory plan hands out
// arena buffers), so that the kernels are timed and not the page faults of
// fresh 2-8 MB mappings, which would otherwise dominate ATen's unfused side.
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <malloc.h>

#include <array>
#include <vector>

namespace {

const std::vector<std::array<int64_t, 4>> kBnShapes = {{8, 64, 32, 32}, {32, 64, 32, 32}, {8, 512, 2, 2}, {32, 512, 2, 2}};

/// A training batch norm's input, parameters and statistics, in `layout` (0 contiguous, 1 channels-last).
struct BnBench {
  at::Tensor x, w, b, mean, invstd, y, g;

  BnBench(int shape, int layout) {
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
    torch::manual_seed(0);
    const auto& s = kBnShapes[static_cast<size_t>(shape)];
    const auto format = layout ? c10::MemoryFormat::ChannelsLast : c10::MemoryFormat::Contiguous;
    x = torch::randn({s[0], s[1], s[2], s[3]}).contiguous(format);
    w = torch::rand({s[1]}) + 0.5;
    b = torch::randn({s[1]});
    at::Tensor rm = torch::zeros({s[1]}), rv = torch::ones({s[1]});
    std::tie(y, mean, invstd) = at::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    y = torch::relu(y);
    g = torch::randn_like(x);
  }
};

c10::OperatorHandle fxcpp_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

void BM_BatchNormRecompute(benchmark::State& state) {
  at::set_num_threads(1);
  BnBench t(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const bool fused = state.range(2) != 0;
  const auto op = fxcpp_op("fxcpp::batch_norm_apply");
  auto view = [](const at::Tensor& v) { return v.view({1, -1, 1, 1}); };
  for (auto _ : state) {
    at::Tensor y;
    if (fused) {
      std::vector<c10::IValue> stack{t.x, t.mean, t.invstd, t.w, t.b, c10::IValue(), 0.0, c10::IValue()};
      op.callBoxed(stack);
      y = stack[0].toTensor();
    } else {
      y = torch::relu((t.x - view(t.mean)) * view(t.invstd) * view(t.w) + view(t.b));
    }
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * t.x.nbytes() * 2);
}

void BM_BatchNormReluBackward(benchmark::State& state) {
  at::set_num_threads(1);
  BnBench t(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const bool fused = state.range(2) != 0;
  const auto op = fxcpp_op("fxcpp::batch_norm_act_backward");
  for (auto _ : state) {
    at::Tensor gx;
    if (fused) {
      std::vector<c10::IValue> stack{t.g, t.y, 0.0, c10::IValue(), t.x, t.w, t.mean, t.invstd,
                                     c10::List<bool>({true, true, true})};
      op.callBoxed(stack);
      gx = stack[0].toTensor();
    } else {
      at::Tensor masked = at::threshold_backward(t.g, t.y, 0);
      gx = std::get<0>(at::native_batch_norm_backward(masked, t.x, t.w, {}, {}, t.mean, t.invstd, true, 1e-5,
                                                      {true, true, true}));
    }
    benchmark::DoNotOptimize(gx.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * t.x.nbytes() * 4);
}

void bn_args(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{0, 1, 2, 3}, {0, 1}, {0, 1}})->ArgNames({"shape", "nhwc", "fused"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_BatchNormRecompute)->Apply(bn_args);
BENCHMARK(BM_BatchNormReluBackward)->Apply(bn_args);

}  // namespace
