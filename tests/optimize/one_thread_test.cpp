// Small work on the calling thread alone (OneThread, onednn/context.h): the
// scope itself, and the kernels that take it (convolutions of fewer than
// 2^16 multiply-adds, global pools at batch 1), which must compute what
// they compute on every thread count and leave ATen's thread count as they
// found it. Also run held at AVX2 (optimize_isa_AVX2).
#include <ATen/Parallel.h>
#include <fx/onednn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "onednn/context.h"
#include "optimize_test_util.h"

namespace {

using namespace optimize_test;
using fx::onednn::detail::OneThread;

TEST(OneThread, HoldsOneThreadWhileAliveAndRestoresTheCount) {
  const ThreadsGuard two(2);
  {
    const OneThread one(true);
    EXPECT_EQ(at::get_num_threads(), 1);
    {
      const OneThread nested(true);
      EXPECT_EQ(at::get_num_threads(), 1);
    }
    EXPECT_EQ(at::get_num_threads(), 1);  // the inner scope found 1 and left 1
  }
  EXPECT_EQ(at::get_num_threads(), 2);
  {
    const OneThread no(false);
    EXPECT_EQ(at::get_num_threads(), 2);
  }
  // Inside a parallel region there is one thread already: nothing changes.
  at::parallel_for(0, 2, 1, [&](int64_t, int64_t) { const OneThread inside(true); });
  EXPECT_EQ(at::get_num_threads(), 2);
}

// A squeeze-excitation layer (one pixel) is made and run on one thread: its
// SiLU then runs after the kernel, as on one thread (" + silu"), where a
// larger layer (50K outputs, below the pass's 2^17 on two threads) keeps
// oneDNN's fused swish. Both give ATen's
// values, and the thread count is 2 again after each.
TEST(OneThread, SmallConvolutionsRunOnTheCallingThread) {
  fx::onednn::register_ops();
  torch::manual_seed(3);
  const ThreadsGuard two(2);
  fx::onednn::PostOps silu;
  silu.activation = fx::onednn::Activation::Silu;
  struct Case {
    std::vector<int64_t> input;
    int64_t out_channels;
    bool alone;
  };
  for (const Case& c : {Case{{1, 1152, 1, 1}, 48, true}, Case{{1, 48, 1, 1}, 1152, true},
                        Case{{1, 32, 28, 28}, 64, false}}) {
    const at::Tensor x = at::randn(c.input).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = at::randn({c.out_channels, c.input[1], 1, 1}) / std::sqrt(double(c.input[1]));
    const at::Tensor b = at::randn({c.out_channels});
    const c10::IValue packed = fx::onednn::pack_conv2d(w, b, {}, silu, at::kFloat);
    const std::string impl = fx::onednn::implementation(packed, c.input);
    EXPECT_EQ(impl.size() > 7 && impl.compare(impl.size() - 7, 7, " + silu") == 0, c.alone) << impl;
    EXPECT_EQ(at::get_num_threads(), 2);
    const at::Tensor got = call_boxed("fxcpp::onednn_conv2d", {x, packed, c10::IValue(), false});
    EXPECT_EQ(at::get_num_threads(), 2);
    EXPECT_LE(relative_error(got, at::silu(at::conv2d(x, w, b))), 1e-5) << impl;
  }
}

// oneDNN splits a pool by output pixel, then by channel: a global pool at
// batch 1 runs on one thread. Every batch and thread count gives ATen's
// averages, NHWC and NCHW.
TEST(OneThread, GlobalPoolsAgreeOnEveryThreadCount) {
  fx::onednn::register_ops();
  torch::manual_seed(5);
  const ThreadsGuard guard;
  for (int64_t batch : {1, 2, 3}) {
    for (const at::MemoryFormat format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
      const at::Tensor x = at::randn({batch, 96, 28, 28}).contiguous(format);
      const at::Tensor want = at::adaptive_avg_pool2d(x, {1, 1});
      for (int t : {1, 2}) {
        at::set_num_threads(t);
        const at::Tensor got = call_boxed("fxcpp::adaptive_avg_pool2d", {x, std::vector<int64_t>{1, 1}});
        EXPECT_EQ(at::get_num_threads(), t);
        EXPECT_LE(relative_error(got, want), 1e-6) << "batch " << batch << ", " << format << ", " << t << " threads";
      }
    }
  }
}

}  // namespace
