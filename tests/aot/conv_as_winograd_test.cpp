// fxcpp::winograd_conv2d / winograd_conv2d_backward (fx/onednn.h) and the
// training compiler's conv_as_winograd pass (fx/aot.h): oneDNN's Winograd
// kernels compute what ATen's convolutions compute, in the graph's layouts;
// where oneDNN has none (below AVX-512) the pass leaves graphs alone and the
// operators say why.
#include "../common/error_of.h"
#include "aot_models.h"
#include "graph_test_util.h"

#include <fx/aot.h>
#include <fx/error.h>
#include <fx/graph_module.h>
#include <fx/onednn.h>

#include <gtest/gtest.h>
#include <torch/torch.h>


namespace {

using fx::aot_test::count_target;
using fx_test::error_of;
using fx::aot_test::expect_same_outputs;
using fx::aot_test::graph_copy_of;

c10::OperatorHandle winograd_op(const char* name) {
  fx::onednn::register_ops();
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

at::Tensor winograd_forward(const at::Tensor& x, const at::Tensor& w, std::vector<int64_t> padding) {
  static const auto op =
      winograd_op("fxcpp::winograd_conv2d").typed<at::Tensor(const at::Tensor&, const at::Tensor&, at::IntArrayRef)>();
  return op.call(x, w, padding);
}

std::tuple<at::Tensor, at::Tensor> winograd_backward(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w,
                                                     std::vector<int64_t> padding, std::array<bool, 2> mask) {
  static const auto op =
      winograd_op("fxcpp::winograd_conv2d_backward")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                    at::IntArrayRef, std::array<bool, 2>)>();
  return op.call(gy, x, w, padding, mask);
}

/// |a - b| <= 1e-5 of b's largest magnitude, with b's sizes and strides.
void expect_close_in_layout(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  EXPECT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_EQ(a.strides(), b.strides()) << what;
  EXPECT_LE((a - b).abs().max().item<double>(), 1e-5 * b.abs().max().item<double>()) << what;
}

/// Whether oneDNN runs Winograd training kernels here (AVX-512), asked of
/// a shape every such CPU takes; the tests key on it, not on the ISA's name.
bool winograd_here() { return fx::onednn::has_winograd_conv2d({8, 16, 8, 8}, {16, 16, 3, 3}, {1, 1}); }

TEST(WinogradConv2d, ComputesAtenConvolutionAndItsGradients) {
  torch::manual_seed(0);
  if (!winograd_here()) {
    // Below AVX-512: no kernel, and the operator says so.
    EXPECT_FALSE(fx::onednn::has_winograd_conv2d({2, 16, 8, 8}, {16, 16, 3, 3}, {1, 1}));
    const std::string e = error_of([] {
      winograd_forward(torch::randn({2, 16, 8, 8}), torch::randn({16, 16, 3, 3}), {1, 1});
    });
    EXPECT_NE(e.find("fxcpp::winograd_conv2d: oneDNN has no Winograd kernel for an input [2, 16, 8, 8] and a weight "
                     "[16, 16, 3, 3] on this CPU (ISA " + fx::onednn::cpu_isa() + ")"),
              std::string::npos)
        << e;
    return;
  }
  for (const auto format : {c10::MemoryFormat::Contiguous, c10::MemoryFormat::ChannelsLast})
    for (const int64_t pad : {1, 0}) {
      const std::string what = std::string(format == c10::MemoryFormat::Contiguous ? "NCHW" : "NHWC") + " padding " +
                               std::to_string(pad);
      ASSERT_TRUE(fx::onednn::has_winograd_conv2d({3, 16, 9, 10}, {32, 16, 3, 3}, {pad, pad})) << what;
      const at::Tensor x = torch::randn({3, 16, 9, 10}).contiguous(format);
      const at::Tensor w = (torch::randn({32, 16, 3, 3}) * 0.1).contiguous(format);
      const at::Tensor y = at::convolution(x, w, {}, {1, 1}, {pad, pad}, {1, 1}, false, {0, 0}, 1);
      expect_close_in_layout(winograd_forward(x, w, {pad, pad}), y, what + " forward");
      const at::Tensor gy = torch::randn(y.sizes()).contiguous(format);
      const auto want = at::convolution_backward(gy, x, w, c10::nullopt, {1, 1}, {pad, pad}, {1, 1}, false, {0, 0}, 1,
                                                 {true, true, false});
      const auto both = winograd_backward(gy, x, w, {pad, pad}, {true, true});
      expect_close_in_layout(std::get<0>(both), std::get<0>(want), what + " input gradient");
      expect_close_in_layout(std::get<1>(both), std::get<1>(want), what + " weight gradient");
      // One of the two: the other is not computed.
      const auto input_only = winograd_backward(gy, x, w, {pad, pad}, {true, false});
      EXPECT_FALSE(std::get<1>(input_only).defined());
      EXPECT_TRUE(at::equal(std::get<0>(input_only), std::get<0>(both))) << what;
      const auto weight_only = winograd_backward(gy, x, w, {pad, pad}, {false, true});
      EXPECT_FALSE(std::get<0>(weight_only).defined());
      EXPECT_TRUE(at::equal(std::get<1>(weight_only), std::get<1>(both))) << what;
    }
  // Shapes only, on the meta device.
  const at::Tensor meta =
      winograd_forward(torch::empty({2, 16, 8, 8}, at::kMeta), torch::empty({8, 16, 3, 3}, at::kMeta), {0, 0});
  EXPECT_EQ(meta.sizes(), (std::vector<int64_t>{2, 8, 6, 6}));
}

TEST(WinogradConv2d, RefusesWhatItCannotCompute) {
  const at::Tensor x = torch::randn({2, 16, 8, 8}), w = torch::randn({16, 16, 3, 3});
  EXPECT_EQ(error_of([&] { winograd_forward(x, torch::randn({16, 16, 5, 5}), {1, 1}); }),
            "fxcpp::winograd_conv2d: expected an input [N, C, H, W] and a weight [Co, C, 3, 3], got [2, 16, 8, 8] and "
            "[16, 16, 5, 5]");
  EXPECT_EQ(error_of([&] { winograd_forward(x.to(at::kDouble), w.to(at::kDouble), {1, 1}); }),
            "fxcpp::winograd_conv2d: takes float32 tensors, got Double and Double");
  EXPECT_EQ(error_of([&] { winograd_forward(x, w, {2, 2}); }),
            "fxcpp::winograd_conv2d: padding must be two values of 0 or 1, got [2, 2]");
  EXPECT_EQ(error_of([&] { winograd_forward(torch::randn({2, 16, 1, 8}), w, {0, 1}); }),
            "fxcpp::winograd_conv2d: the 3x3 kernel does not fit the 1x8 input");
  EXPECT_EQ(
      error_of([&] {
        winograd_backward(torch::randn({2, 16, 6, 6}), x, w, {1, 1}, {true, true});
      }),
      "fxcpp::winograd_conv2d_backward: expected a float32 grad_output of [2, 16, 8, 8], got Float [2, 16, 6, 6]");
  EXPECT_FALSE(fx::onednn::has_winograd_conv2d({2, 16, 8, 8}, {16, 16, 5, 5}, {1, 1}));
  EXPECT_FALSE(fx::onednn::has_winograd_conv2d({2, 16, 8, 8}, {16, 16, 3, 3}, {2, 2}));
}

/// Four convolutions: 16 -> 16 channels 3x3 on 8x8 maps (rewritten at batch
/// 8: 512 positions), the same with a bias, one with stride 2, and one on
/// the 4x4 maps that follow (128 positions: left to the direct kernels).
struct WinogradNetImpl : torch::nn::Module {
  WinogradNetImpl()
      : stem(register_module("stem", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)))),
        plain(register_module("plain", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).padding(1).bias(false)))),
        biased(register_module("biased", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).padding(1)))),
        strided(register_module(
            "strided", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).stride(2).padding(1).bias(false)))),
        small(register_module("small", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 32, 3).padding(1).bias(false)))) {
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = torch::relu(plain(torch::relu(stem(x))));
    return small(torch::relu(strided(torch::relu(biased(h)))));
  }
  torch::nn::Conv2d stem, plain, biased, strided, small;
};
TORCH_MODULE(WinogradNet);

TEST(ConvAsWinograd, RewritesTheLargeMapsOnly) {
  for (const bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels_last" : "NCHW");
    torch::manual_seed(0);
    WinogradNet net;
    fx::AotOptions options;
    if (channels_last) options.memory_format = c10::MemoryFormat::ChannelsLast;
    auto aot = fx::aot_module(net.ptr(), options);
    aot->forward(torch::randn({8, 3, 8, 8})).pow(2).sum().backward();
    auto fw = graph_copy_of(aot->forward_graph()), bw = graph_copy_of(aot->backward_graph());
    ASSERT_EQ(count_target(fw->graph(), "aten::convolution"), 5u);
    ASSERT_EQ(count_target(bw->graph(), "aten::convolution_backward"), 5u);
    EXPECT_EQ(fx::conv_as_winograd(fw->graph(), 0), 0u);  // 0: off
    if (!winograd_here()) {
      EXPECT_EQ(fx::conv_as_winograd(fw->graph()), 0u);
      EXPECT_EQ(fx::conv_as_winograd(bw->graph()), 0u);
      EXPECT_EQ(count_target(fw->graph(), "aten::convolution"), 5u);
      continue;
    }
    // Only `plain`: the stem has 3 input channels, biased a bias, strided
    // a stride, small too few positions.
    EXPECT_EQ(fx::conv_as_winograd(fw->graph()), 1u);
    EXPECT_EQ(count_target(fw->graph(), "fxcpp::winograd_conv2d"), 1u);
    EXPECT_EQ(count_target(fw->graph(), "aten::convolution"), 4u);
    fw->graph().lint();
    expect_same_outputs(*aot->forward_graph(), *fw, 1e-5);
    // The backward: plain's gradients; biased's too (its bias gradient is
    // asked for: left alone). Rewriting `small` needs 4x more positions.
    EXPECT_EQ(fx::conv_as_winograd(bw->graph()), 1u);
    EXPECT_EQ(count_target(bw->graph(), "fxcpp::winograd_conv2d_backward"), 1u);
    bw->graph().lint();
    expect_same_outputs(*aot->backward_graph(), *bw, 1e-5);
    auto bw_low = graph_copy_of(aot->backward_graph());
    EXPECT_EQ(fx::conv_as_winograd(bw_low->graph(), 128), 2u);  // `small` (128 positions) as well
    expect_same_outputs(*aot->backward_graph(), *bw_low, 1e-5);
  }
}

// The default training compiler puts the Winograd kernels in the backward
// (the forward keeps eager's convolutions: conv_forward_rewrites) and trains
// as eager does (1e-4 relative in the parameters after three SGD steps), in
// both layouts; with conv_forward_rewrites the forward's too; with
// conv_winograd_min_positions 0 none.
TEST(ConvAsWinograd, DefaultCompilerTrainsAsEager) {
  for (const bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "channels_last" : "NCHW");
    torch::manual_seed(0);
    WinogradNet eager;
    torch::manual_seed(0);
    auto compiled = WinogradNet().ptr();  // the same weights
    fx::AotOptions options;
    if (channels_last) options.memory_format = c10::MemoryFormat::ChannelsLast;
    auto aot = fx::aot_module(compiled, options);
    torch::optim::SGD se(eager->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::optim::SGD sc(compiled->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const bool winograd = winograd_here();
    for (int step = 0; step < 3; ++step) {
      const at::Tensor x = torch::randn({8, 3, 8, 8});
      se.zero_grad();
      sc.zero_grad();
      eager->forward(x).pow(2).mean().backward();
      const auto calls = fx::aot_test::fxcpp_calls([&] { aot->forward(x).pow(2).mean().backward(); });
      EXPECT_EQ(calls.count("fxcpp::winograd_conv2d"), 0u) << "step " << step;
      EXPECT_EQ(calls.count("fxcpp::winograd_conv2d_backward") ? calls.at("fxcpp::winograd_conv2d_backward") : 0,
                winograd ? 1 : 0)
          << "step " << step;
      se.step();
      sc.step();
    }
    auto pe = eager->named_parameters(), pc = compiled->named_parameters();
    for (const auto& p : pe) {
      const double err = (pc[p.key()] - p.value()).abs().max().item<double>();
      EXPECT_LE(err, 1e-4 * p.value().abs().max().item<double>()) << p.key();
    }
    fx::TrainingCompileOptions forward_too;
    forward_too.conv_forward_rewrites = true;
    options.fw_compiler = options.bw_compiler = fx::training_compiler(forward_too);
    auto both = fx::aot_module(compiled, options);
    const auto both_calls = fx::aot_test::fxcpp_calls([&] {
      both->forward(torch::randn({8, 3, 8, 8})).sum().backward();
    });
    EXPECT_EQ(both_calls.count("fxcpp::winograd_conv2d") ? both_calls.at("fxcpp::winograd_conv2d") : 0,
              winograd ? 1 : 0);
    EXPECT_EQ(both_calls.count("fxcpp::winograd_conv2d_backward") ? both_calls.at("fxcpp::winograd_conv2d_backward")
                                                                    : 0,
              winograd ? 1 : 0);
    fx::TrainingCompileOptions off;
    off.conv_winograd_min_positions = 0;
    options.fw_compiler = options.bw_compiler = fx::training_compiler(off);
    auto direct = fx::aot_module(compiled, options);
    const auto direct_calls = fx::aot_test::fxcpp_calls([&] {
      direct->forward(torch::randn({8, 3, 8, 8})).sum().backward();
    });
    EXPECT_EQ(direct_calls.count("fxcpp::winograd_conv2d") + direct_calls.count("fxcpp::winograd_conv2d_backward"), 0u);
  }
}

}  // namespace
