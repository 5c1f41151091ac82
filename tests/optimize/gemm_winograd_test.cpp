// fxcpp's own Winograd F(2×2, 3×3) on oneDNN's packed GEMM (gemm_winograd.h),
// below AVX-512: which convolutions take it, and its values against ATen's
// conv2d for the layouts, bias, residual and activations it is given, on 1
// and 2 threads and over a batch cut into chunks. On AVX-512 (oneDNN's
// Winograd kernels there) has_gemm_winograd is false and no convolution
// takes it; the suite is also run held at AVX2 (optimize_isa_AVX2).
#include <ATen/Parallel.h>
#include <fx/onednn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "optimize_test_util.h"

namespace {

using namespace optimize_test;

constexpr const char* kWinogradImpl = "winograd_2x3:packed_gemm";

// ResNet-like 3×3 layers, odd sizes (partial 4×4 tiles), padding 0 and 2,
// non-square images; the bias, residual and activation vary.
TEST(GemmWinograd, AgreesWithAtenInEveryLayout) {
  fx::onednn::register_ops();
  torch::manual_seed(7);
  const ThreadsGuard guard;
  struct Case {
    std::vector<int64_t> input;
    int64_t out_channels, padding;
    bool bias, sum;
    fx::onednn::Activation act;
  };
  using A = fx::onednn::Activation;
  const std::vector<Case> cases{{{1, 64, 56, 56}, 64, 1, true, false, A::Relu},
                                {{2, 16, 15, 15}, 24, 1, false, true, A::Relu},
                                {{1, 32, 20, 12}, 16, 0, true, true, A::None},
                                {{3, 24, 13, 17}, 32, 2, true, false, A::Clip}};
  for (const Case& c : cases) {
    const int64_t ic = c.input[1];
    const at::Tensor x = at::randn(c.input), w = at::randn({c.out_channels, ic, 3, 3}) / std::sqrt(9.0 * ic);
    const at::Tensor b = at::randn({c.out_channels});
    fx::onednn::ConvParams p;
    p.padding = {c.padding, c.padding};
    p.winograd = true;
    fx::onednn::PostOps post;
    post.activation = c.act;
    post.alpha = 0.f;
    post.beta = 1.5f;  // Clip: [0, 1.5]
    post.sum = c.sum;
    const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
    const c10::IValue packed = fx::onednn::pack_conv2d(w, bias, p, post, at::kFloat);
    const std::string what = fx::onednn::describe(packed) + " on " + c10::str(x.sizes());
    EXPECT_EQ(fx::onednn::implementation(packed, c.input) == kWinogradImpl, fx::onednn::has_gemm_winograd()) << what;
    const at::Tensor conv = at::conv2d(x, w, bias, 1, c.padding);
    const at::Tensor r = at::randn(conv.sizes());
    at::Tensor want = c.sum ? conv + r : conv;
    if (c.act == A::Relu) want = at::relu(want);
    if (c.act == A::Clip) want = at::clamp(want, 0, 1.5);
    at::Tensor first;
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      for (bool blocked_in : {false, true}) {
        for (bool blocked_out : {false, true}) {
          const at::Tensor in = blocked_in ? call_boxed("fxcpp::to_blocked", {x}) : x;
          c10::IValue residual;
          if (c.sum)
            residual =
                blocked_out ? call_boxed("fxcpp::to_blocked", {r}) : r.contiguous(at::MemoryFormat::ChannelsLast);
          const at::Tensor out = call_boxed("fxcpp::onednn_conv2d", {in, packed, residual, blocked_out});
          const at::Tensor got = blocked_out ? call_boxed("fxcpp::from_blocked", {out}) : out;
          const std::string where = what + ", " + std::to_string(t) + " threads, " + (blocked_in ? "blocked" : "NHWC") +
                                    " in, " + (blocked_out ? "blocked" : "NHWC") + " out";
          EXPECT_LE(relative_error(got, want), 2e-5) << where;
          // The same bits whatever the layouts and threads: each GEMM runs on
          // one thread (oneDNN's kernels elsewhere differ between layouts by
          // rounding).
          if (!first.defined()) first = got.contiguous();
          if (fx::onednn::has_gemm_winograd()) {
            EXPECT_TRUE(got.contiguous().equal(first)) << where;
          }
        }
      }
    }
  }
}

// Deep layers (weights' transforms above 1 MiB) run in chunks of whole
// images, their GEMMs split between threads; a batch whose transformed tiles
// pass 16 MiB in several: 3 images of 256 channels at 56×56 (12.8 MiB each),
// one per chunk; 3 of 160 channels at 30×30 in one chunk (one GEMM over all
// its tiles gave the third image other bits than alone: a GEMM per image).
// Shallow ones in blocks of tiles, one thread each, a block spanning two
// images (64 channels at 30×30: 225 tiles per image, 48 per block; 96 and 80
// channels: 24, where 32 and 38 gave some rows other bits in the batch than
// alone).
TEST(GemmWinograd, ChunksOfImagesAndBlocksOfTilesGiveEachImagesOwnResult) {
  fx::onednn::register_ops();
  torch::manual_seed(8);
  const ThreadsGuard guard;
  for (auto [channels, size] : {std::pair<int64_t, int64_t>{256, 56}, {160, 30}, {64, 30}, {96, 30}, {80, 30}}) {
    const at::Tensor x = at::randn({3, channels, size, size}),
                     w = at::randn({channels, channels, 3, 3}) / (3 * std::sqrt(channels)), b = at::randn({channels});
    fx::onednn::ConvParams p;
    p.padding = {1, 1};
    p.winograd = true;
    fx::onednn::PostOps post;
    post.activation = fx::onednn::Activation::Relu;
    const c10::IValue packed = fx::onednn::pack_conv2d(w, b, p, post, at::kFloat);
    EXPECT_EQ(fx::onednn::implementation(packed, x.sizes()) == kWinogradImpl, fx::onednn::has_gemm_winograd());
    const at::Tensor want = at::relu(at::conv2d(x, w, b, 1, 1));
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      const at::Tensor got = call_boxed("fxcpp::onednn_conv2d", {x, packed, c10::IValue(), false});
      EXPECT_LE(relative_error(got, want), 1e-5) << channels << " channels, " << t << " threads";
      // Each image as computed alone (fxcpp's Winograd: oneDNN's kernels
      // elsewhere need not be).
      for (int64_t i = 0; i < 3 && fx::onednn::has_gemm_winograd(); ++i) {
        const at::Tensor one = call_boxed("fxcpp::onednn_conv2d", {x.slice(0, i, i + 1), packed, c10::IValue(), false});
        EXPECT_TRUE(one.equal(got.slice(0, i, i + 1)))
            << channels << " channels, image " << i << ", " << t << " threads";
      }
    }
  }
}

// Not taken: without ConvParams::winograd, strided, grouped, dilated or
// 1×1 / 5×5 kernels, fewer than 16 or not a multiple of 8 channels, outputs
// of at most 8×8 (GemmConv's), nor a bfloat16 kernel.
TEST(GemmWinograd, OnlyThreeByThreeStrideOneLayersOfSixteenChannelsAndMore) {
  torch::manual_seed(9);
  auto impl = [](int64_t oc, int64_t ic, int64_t k, std::vector<int64_t> stride, std::vector<int64_t> dilation,
                 int64_t groups, bool winograd, std::vector<int64_t> input) {
    fx::onednn::ConvParams p;
    p.stride = stride;
    p.dilation = dilation;
    p.groups = groups;
    p.padding = {k / 2, k / 2};
    p.winograd = winograd;
    const c10::IValue packed =
        fx::onednn::pack_conv2d(at::randn({oc, ic / groups, k, k}), c10::nullopt, p, {}, at::kFloat);
    return fx::onednn::implementation(packed, input);
  };
  EXPECT_EQ(impl(32, 16, 3, {1, 1}, {1, 1}, 1, true, {1, 16, 9, 9}) == kWinogradImpl, fx::onednn::has_gemm_winograd());
  EXPECT_NE(impl(32, 16, 3, {1, 1}, {1, 1}, 1, false, {1, 16, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 16, 3, {2, 2}, {1, 1}, 1, true, {1, 16, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 32, 3, {1, 1}, {1, 1}, 2, true, {1, 32, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 16, 3, {1, 1}, {2, 2}, 1, true, {1, 16, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 16, 1, {1, 1}, {1, 1}, 1, true, {1, 16, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 16, 5, {1, 1}, {1, 1}, 1, true, {1, 16, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 8, 3, {1, 1}, {1, 1}, 1, true, {1, 8, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(8, 32, 3, {1, 1}, {1, 1}, 1, true, {1, 32, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 20, 3, {1, 1}, {1, 1}, 1, true, {1, 20, 28, 28}), kWinogradImpl);
  EXPECT_NE(impl(32, 16, 3, {1, 1}, {1, 1}, 1, true, {1, 16, 8, 8}), kWinogradImpl);
  if (fx::onednn::has_bf16_kernels()) {
    fx::onednn::ConvParams p;
    p.padding = {1, 1};
    p.winograd = true;
    const c10::IValue bf16 = fx::onednn::pack_conv2d(at::randn({32, 16, 3, 3}), c10::nullopt, p, {}, at::kBFloat16);
    EXPECT_NE(fx::onednn::implementation(bf16, {1, 16, 28, 28}), kWinogradImpl);
  }
}

}  // namespace
