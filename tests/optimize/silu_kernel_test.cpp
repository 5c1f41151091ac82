// The SiLU kernel (src/onednn/silu.h) against x / (1 + exp(-x)) in double,
// and float32 convolutions with a SiLU, which run it after the kernel on one
// thread and as oneDNN's swish post-op on two. Held at AVX2 by ctest's
// optimize_isa_AVX2 and emulated_avx2_optimize, where the AVX2 kernel runs.
#include "onednn/silu.h"
#include "optimize_test_util.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace {

using namespace optimize_test;

double silu_exact(double x) { return x / (1 + std::exp(-x)); }

TEST(SiluKernel, MatchesTheDefinitionOnEveryLengthAndAtTheEdges) {
  // Every tail length of the 16- and 8-wide loops, and lengths ATen's threads share.
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 40, 1000, 70001}) {
    at::Tensor x = at::linspace(-100, 100, n);
    if (n > 16) x.slice(0, 0, n / 2).normal_(0, 4);
    at::Tensor y = x.clone();
    fx::onednn::detail::silu_(y.data_ptr<float>(), n);
    const float* xs = x.data_ptr<float>();
    const float* ys = y.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      const double want = silu_exact(xs[i]);
      ASSERT_LE(std::abs(ys[i] - want), 1e-6 * std::max(1.0, std::abs(want)) + 1e-30)
          << "n " << n << ", x[" << i << "] = " << xs[i] << ": " << ys[i] << ", want " << want;
    }
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> edge{0.f, -0.f, 88.f, -88.f, 89.f, -89.f, 1e-30f, -1e-30f, 3e38f, -3e38f, inf, -inf, nan};
  at::Tensor want = at::silu(at::tensor(edge));
  fx::onednn::detail::silu_(edge.data(), static_cast<int64_t>(edge.size()));
  for (size_t i = 0; i < edge.size(); ++i) {
    const float w = want[i].item<float>();
    if (std::isnan(w) || std::isinf(w)) {
      EXPECT_EQ(std::isnan(edge[i]), std::isnan(w)) << i << ": " << edge[i] << ", ATen " << w;
      EXPECT_EQ(std::isinf(edge[i]), std::isinf(w)) << i << ": " << edge[i] << ", ATen " << w;
    } else {
      EXPECT_LE(std::abs(edge[i] - w), 1e-6 * std::max(1.f, std::abs(w))) << i << ": " << edge[i] << ", ATen " << w;
    }
  }
}

TEST(SiluKernel, ConvolutionsWithASiluAgreeWithATenOnOneThreadAndTwo) {
  torch::manual_seed(0);
  at::NoGradGuard no_grad;
  ThreadsGuard guard;
  struct Case {
    const char* what;
    int64_t in, out, k, groups;
    bool residual;
  };
  for (const Case& c : {Case{"1x1", 16, 96, 1, 1, false}, Case{"1x1 +residual", 24, 40, 1, 1, true},
                        Case{"depthwise 3x3", 32, 32, 3, 32, false}}) {
    const at::Tensor w = at::randn({c.out, c.in / c.groups, c.k, c.k}) / std::sqrt(double(c.in / c.groups * c.k * c.k));
    const at::Tensor b = at::randn({c.out}) / 4;
    fx::onednn::ConvParams params;
    params.padding = {c.k / 2, c.k / 2};
    params.groups = c.groups;
    fx::onednn::PostOps post;
    post.sum = c.residual;
    post.activation = fx::onednn::Activation::Silu;
    const c10::IValue packed = fx::onednn::pack_conv2d(w, b, params, post, at::kFloat);
    const at::Tensor x = at::randn({2, c.in, 13, 11}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor r = at::randn({2, c.out, 13, 11});
    at::Tensor want = at::conv2d(x, w, b, 1, c.k / 2, 1, c.groups);
    if (c.residual) want += r;
    want = at::silu(want);
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      const std::string impl = fx::onednn::implementation(packed, x.sizes());
      EXPECT_EQ(impl.size() > 7 && impl.substr(impl.size() - 7) == " + silu", threads == 1)
          << c.what << ", " << threads << " threads: " << impl;
      at::Tensor got = call_boxed("fxcpp::onednn_conv2d", {x, packed, c.residual ? c10::IValue(r.clone()) : c10::IValue(),
                                                           false});
      EXPECT_LE(relative_error(got, want), 1e-5) << c.what << ", " << threads << " threads: " << impl;
    }
  }
}

}  // namespace
