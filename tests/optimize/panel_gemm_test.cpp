// PanelGemm (src/onednn/panel_gemm.h), fxcpp's own GEMM for the 1x1
// convolutions of few pixels below AVX-512, against ATen's matmul: every
// tail of its 6-row tiles, its 16-channel panels and its 8-channel input
// blocks, NHWC and nChw8c operands whose rows cross from one image to the
// next inside a tile, with the bias, the residual and each activation its
// epilogue applies; 1 and 2 threads. Its convolutions in a model:
// BlockActivations.SmallDeepConvolutionsRunAsAGemmBelowAvx512.
#include "../common/error_of.h"
#include "onednn/panel_gemm.h"
#include "optimize_test_util.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace optimize_test;
using fx::onednn::Activation;
using fx::onednn::detail::PanelGemm;
using fx::onednn::detail::PixelRows;

/// [images·pixels, channels] rows as the operand's memory: itself (NHWC), or
/// [images, channels/8, pixels, 8] (blocked).
at::Tensor to_memory(const at::Tensor& rows, int64_t images, bool blocked) {
  if (!blocked) return rows.contiguous();
  const int64_t pixels = rows.size(0) / images, channels = rows.size(1);
  return rows.view({images, pixels, channels / 8, 8}).permute({0, 2, 1, 3}).contiguous();
}

at::Tensor from_memory(const at::Tensor& memory, int64_t images, int64_t pixels, int64_t channels, bool blocked) {
  if (!blocked) return memory.view({images * pixels, channels});
  return memory.view({images, channels / 8, pixels, 8}).permute({0, 2, 1, 3}).reshape({images * pixels, channels});
}

TEST(PanelGemm, MatchesATenOnEveryTileTailLayoutAndEpilogue) {
  if (!PanelGemm::available()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  torch::manual_seed(11);
  const ThreadsGuard guard;
  struct Shape {
    int64_t k, oc, images, pixels;
    bool blocked_in, blocked_out;
  };
  // Rows: 14 (two images of 7: the second starts inside the second tile), 5
  // (one short tile), 49 (eight tiles and one row), 1. K: whole 8-channel
  // blocks and NHWC's leftovers; 600 and 521, panels of 38 and 33 KB (more
  // than a Zen 3's 32 KB L1). OC: whole and half panels, and NHWC's partial
  // 8-lane stores.
  const std::vector<Shape> shapes{{21, 37, 2, 7, false, false}, {7, 1, 1, 5, false, false},
                                  {64, 16, 1, 49, false, false}, {1, 9, 3, 1, false, false},
                                  {24, 40, 2, 7, true, true},     {8, 8, 1, 49, true, false},
                                  {40, 24, 2, 7, false, true},    {16, 48, 1, 5, true, true},
                                  {600, 24, 2, 7, true, true},    {521, 20, 1, 9, false, false}};
  for (const Shape& s : shapes) {
    const int64_t rows = s.images * s.pixels;
    // Weights scaled so that products are of order 1 at any K: clip's
    // bounds then cut some, and the error is relative to values it keeps.
    const at::Tensor x = at::randn({rows, s.k}), w = at::randn({s.oc, s.k}) * (1.2 / std::sqrt(double(s.k))),
                     b = at::randn({s.oc}), r = at::randn({rows, s.oc});
    const PanelGemm gemm(w);
    const at::Tensor in = to_memory(x, s.images, s.blocked_in);
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      for (Activation act : {Activation::None, Activation::Relu, Activation::Clip, Activation::Silu}) {
        for (int variant = 0; variant < 4; ++variant) {  // bias and residual, each or not
          const bool bias = variant & 1, sum = variant & 2;
          fx::onednn::PostOps post;
          post.activation = act;
          post.alpha = -0.5f;
          post.beta = 1.5f;
          post.sum = sum;
          at::Tensor want = at::matmul(x, w.t());
          if (bias) want += b;
          if (sum) want += r;
          want = act == Activation::Relu   ? at::relu(want)
                 : act == Activation::Clip ? at::clamp(want, -0.5, 1.5)
                 : act == Activation::Silu ? at::silu(want)
                                           : want;
          // Without the residual, out's old values must not matter.
          at::Tensor out = to_memory(sum ? r : at::full_like(r, 7.f), s.images, s.blocked_out);
          gemm.run({in.data_ptr<float>(), s.pixels, s.k, s.blocked_in},
                   {out.data_ptr<float>(), s.pixels, s.oc, s.blocked_out}, rows, bias ? b.data_ptr<float>() : nullptr,
                   post);
          const at::Tensor got = from_memory(out, s.images, s.pixels, s.oc, s.blocked_out);
          EXPECT_LE(relative_error(got, want), 2e-6)
              << s.k << " -> " << s.oc << ", " << s.images << " x " << s.pixels << " rows, "
              << (s.blocked_in ? "blocked" : "NHWC") << " in, " << (s.blocked_out ? "blocked" : "NHWC") << " out, "
              << post.str() << (bias ? " with bias" : "") << ", " << threads << " threads";
        }
      }
    }
  }
}

TEST(PanelGemm, NanStaysNanThroughReluAndClipAndNoRowsWriteNothing) {
  if (!PanelGemm::available()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  torch::manual_seed(12);
  at::Tensor x = at::randn({9, 16});
  x[4][3] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor w = at::randn({24, 16});
  const PanelGemm gemm(w);
  for (Activation act : {Activation::Relu, Activation::Clip}) {
    fx::onednn::PostOps post;
    post.activation = act;
    post.beta = 6.f;
    at::Tensor out = at::zeros({9, 24});
    gemm.run({x.data_ptr<float>(), 9, 16, false}, {out.data_ptr<float>(), 9, 24, false}, 9, nullptr, post);
    EXPECT_TRUE(out[4].isnan().all().item<bool>()) << post.str() << ": " << out[4];
    EXPECT_FALSE(out.narrow(0, 0, 4).isnan().any().item<bool>()) << post.str();
    EXPECT_FALSE(out.narrow(0, 5, 4).isnan().any().item<bool>()) << post.str();
  }
  at::Tensor untouched = at::full({1, 24}, 3.f);
  gemm.run({x.data_ptr<float>(), 1, 16, false}, {untouched.data_ptr<float>(), 1, 24, false}, 0, nullptr, {});
  EXPECT_TRUE(untouched.eq(3.f).all().item<bool>());
}

TEST(PanelGemm, RefusesOperandsOfOtherWidthsAndUnblockableOnes) {
  if (!PanelGemm::available()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  const PanelGemm gemm(at::randn({37, 21}));
  std::vector<float> in(64 * 21), out(64 * 40);
  EXPECT_EQ(fx_test::error_of([&] { gemm.run({in.data(), 8, 20, false}, {out.data(), 8, 37, false}, 8, nullptr, {}); }),
            "onednn_conv2d: the panel GEMM of 21 into 37 channels got rows of 20 into 37");
  EXPECT_EQ(fx_test::error_of([&] { gemm.run({in.data(), 8, 21, true}, {out.data(), 8, 37, false}, 8, nullptr, {}); }),
            "onednn_conv2d: the panel GEMM of 21 into 37 channels got rows of 21 into 37 (blocked: multiples of 8)");
  EXPECT_EQ(
      fx_test::error_of([] { PanelGemm(at::randn({4, 5, 1})); }),
      "onednn_conv2d: the panel GEMM takes a contiguous float32 weight [out_channels, in_channels], got [4, 5, 1]");
}

}  // namespace
