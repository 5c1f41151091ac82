// OptimizeOptions::blocked_activations: below AVX-512 a run of convolutions
// hands its activations on in oneDNN's nChw8c ([N, C/8, H, W, 8] tensors)
// where a convolution of it writes at least 28x28 pixels; every other
// reader gets the channels_last value (fxcpp::from_blocked). On AVX-512
// nothing changes. ctest's optimize_isa_AVX2 and emulated_avx2_optimize run
// this suite on AVX2 kernels whatever the machine.
#include "../common/error_of.h"
#include "onednn/gemm_kernel.h"
#include "optimize_test_util.h"

#include <fx/error.h>
#include <fx/graph.h>
#include <fx/onednn.h>
#include <fx/optimize/optimize_for_inference.h>
#include <fx/trace.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using namespace optimize_test;
namespace nn = torch::nn;

/// A ResNet basic block, written as torchvision's C++ ResNet writes it.
struct BasicBlockImpl : nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out)
      downsample = register_module(
          "downsample", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                       nn::BatchNorm2d(out)));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (downsample.is_empty() ? x : downsample->forward(x)));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

/// Stem, max pool, two blocks (the second with a downsample), pooled head: 6 convolutions.
struct MiniResNetImpl : nn::Module {
  MiniResNetImpl()
      : conv1(register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 16, 7).stride(2).padding(3).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(16))),
        pool(register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)))),
        layer1(register_module("layer1", BasicBlock(16, 16, 1))),
        layer2(register_module("layer2", BasicBlock(16, 32, 2))),
        fc(register_module("fc", nn::Linear(32, 10))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = pool(torch::relu(bn1(conv1(x))));
    y = layer2(layer1(y));
    return fc(torch::flatten(torch::adaptive_avg_pool2d(y, {1, 1}), 1));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::MaxPool2d pool;
  BasicBlock layer1, layer2;
  nn::Linear fc;
};
TORCH_MODULE(MiniResNet);

/// The net with batch-norm statistics from a train-mode pass, in eval mode.
MiniResNet mini_resnet() {
  torch::manual_seed(0);
  MiniResNet net;
  {
    at::NoGradGuard no_grad;
    net->train();
    net->forward(at::randn({8, 3, 64, 64}));
  }
  net->eval();
  return net;
}

/// `net` traced (any batch size) and optimised for `x`.
template <class Net>
std::shared_ptr<fx::GraphModule> optimized(Net& net, const at::Tensor& x, bool blocked, fx::OptimizeReport& report) {
  fx::TraceOptions trace;
  trace.dynamic_dims = {{0, 0}};  // any batch size
  auto gm = fx::symbolic_trace(net.ptr(), {x}, {}, trace);
  fx::OptimizeOptions options;
  options.example_inputs = {x};
  options.blocked_activations = blocked;
  return fx::optimize_for_inference(gm, options, &report);
}

/// The convolutions whose `blocked` argument is true.
size_t blocked_convs(const fx::Graph& g) {
  size_t n = 0;
  for (const fx::Node* c : g.nodes())
    if (c->target() == "fxcpp::onednn_conv2d" && c->args().size() == 4 && c->args()[3].to_bool()) ++n;
  return n;
}

at::Tensor call1(const char* op, const at::Tensor& x) { return call_boxed(op, {x}); }

// 112x112 images: the stem writes 56x56, layer1 28x28: every convolution
// blocked below AVX-512, the pooled head reading the channels_last value.
TEST(BlockActivations, ResNetRunsBlockedBelowAvx512) {
  MiniResNet net = mini_resnet();
  const at::Tensor x = at::randn({2, 3, 112, 112});
  fx::OptimizeReport report, nhwc_report;
  auto blocked = optimized(net, x, true, report);
  auto nhwc = optimized(net, x, false, nhwc_report);
  at::NoGradGuard no_grad;
  const at::Tensor want = net->forward(x);
  const at::Tensor got = blocked->forward({x}).toTensor();
  EXPECT_LE(relative_error(got, want), 1e-5);
  EXPECT_LE(relative_error(got, nhwc->forward({x}).toTensor()), 1e-6);
  EXPECT_EQ(nhwc_report.blocked_convs, 0u);
  EXPECT_EQ(count_calls(nhwc->graph(), "fxcpp::from_blocked"), 0u);
  EXPECT_EQ(report.onednn_convs, 6u);
  if (avx512()) {
    EXPECT_EQ(report.blocked_convs, 0u) << report.cpu;
    EXPECT_EQ(count_calls(blocked->graph(), "fxcpp::from_blocked"), 0u);
    return;
  }
  EXPECT_EQ(report.blocked_convs, 6u) << report.cpu;
  EXPECT_EQ(blocked_convs(blocked->graph()), 6u);
  EXPECT_EQ(count_calls(blocked->graph(), "fxcpp::from_blocked"), 1u);  // before the head's average pool
  for (const fx::Node* n : blocked->graph().nodes()) {
    if (n->target() != "fxcpp::from_blocked") continue;
    ASSERT_EQ(n->users().size(), 1u);
    EXPECT_EQ((*n->users().begin())->target(), "fxcpp::adaptive_avg_pool2d");
    const fx::TensorMetadata* in = fx::tensor_meta_of(n->args()[0].to_node());
    ASSERT_NE(in, nullptr);
    EXPECT_EQ(in->shape, (std::vector<int64_t>{2, 4, 14, 14, 8}));  // [N, 32 / 8, H, W, 8]
  }
  // Another batch size: new kernels for the blocked shapes, the same values.
  const at::Tensor x3 = at::randn({3, 3, 112, 112});
  EXPECT_LE(relative_error(blocked->forward({x3}).toTensor(), net->forward(x3)), 1e-5);
}

// 32x32 images: no convolution writes 28x28 pixels, so none is blocked.
TEST(BlockActivations, SmallImagesStayChannelsLast) {
  MiniResNet net = mini_resnet();
  const at::Tensor x = at::randn({1, 3, 32, 32});
  fx::OptimizeReport report;
  auto opt = optimized(net, x, true, report);
  EXPECT_EQ(report.blocked_convs, 0u);
  EXPECT_EQ(blocked_convs(opt->graph()), 0u);
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::from_blocked"), 0u);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({x}).toTensor(), net->forward(x)), 1e-5);
}

// A blocked value read by something other than a blocked kernel gets its
// channels_last value: here `f`, read by the next convolution and by an
// ATen sigmoid, and the last convolution's output, read by restore_layout
// for the graph's output. The run a -> b -> c -> d crosses three values
// blocked and leaves twice: it pays. The same values and strides as eager.
struct FeaturesImpl : nn::Module {
  FeaturesImpl()
      : a(register_module("a", nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)))),
        b(register_module("b", nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)))),
        c(register_module("c", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1)))),
        d(register_module("d", nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1)))) {}
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x) {
    at::Tensor f = torch::relu(a(x));
    return {torch::sigmoid(f), d(torch::relu(c(torch::relu(b(f)))))};
  }
  nn::Conv2d a, b, c, d;
};
TORCH_MODULE(Features);

TEST(BlockActivations, OtherReadersGetTheChannelsLastValue) {
  torch::manual_seed(0);
  Features net;
  net->eval();
  const at::Tensor x = at::randn({1, 3, 32, 32});
  fx::OptimizeReport report;
  auto opt = optimized(net, x, true, report);
  EXPECT_EQ(report.blocked_convs, avx512() ? 0u : 4u) << report.cpu;
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::from_blocked"), avx512() ? 0u : 2u);
  at::NoGradGuard no_grad;
  const auto want = net->forward(x);
  const auto got = opt->forward({x}).toTuple()->elements();
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const at::Tensor w = i == 0 ? std::get<0>(want) : std::get<1>(want), g = got[i].toTensor();
    EXPECT_LE(relative_error(g, w), 1e-5) << i;
    EXPECT_EQ(g.sizes(), w.sizes()) << i;
    EXPECT_EQ(g.strides(), w.strides()) << i;
  }
}

// A run that would leave as often as it crosses is not worth its reorders:
// a stem and one more convolution whose output an ATen op reads (as
// efficientnet_b0's squeeze-excitation block reads its first depthwise
// convolution) stay channels_last.
struct TwoConvsImpl : nn::Module {
  TwoConvsImpl()
      : a(register_module("a", nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)))),
        b(register_module("b", nn::Conv2d(nn::Conv2dOptions(8, 8, 3).padding(1).groups(8)))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = torch::silu(b(torch::silu(a(x))));
    return y * torch::sigmoid(torch::adaptive_avg_pool2d(y, {1, 1}));
  }
  nn::Conv2d a, b;
};
TORCH_MODULE(TwoConvs);

TEST(BlockActivations, RunsThatLeaveAsOftenAsTheyCrossStayChannelsLast) {
  torch::manual_seed(0);
  TwoConvs net;
  net->eval();
  const at::Tensor x = at::randn({1, 3, 56, 56});
  fx::OptimizeReport report;
  auto opt = optimized(net, x, true, report);
  EXPECT_EQ(report.onednn_convs, 2u);
  EXPECT_EQ(report.blocked_convs, 0u) << report.cpu;
  EXPECT_EQ(count_calls(opt->graph(), "fxcpp::from_blocked"), 0u);
  at::NoGradGuard no_grad;
  EXPECT_LE(relative_error(opt->forward({x}).toTensor(), net->forward(x)), 1e-5);
}

TEST(BlockActivations, LayoutOperatorsRoundTripAndRefuse) {
  fx::onednn::register_ops();
  const at::Tensor x = at::randn({2, 16, 5, 7});
  for (const at::Tensor& in : {x, x.contiguous(at::MemoryFormat::ChannelsLast)}) {
    const at::Tensor b = call1("fxcpp::to_blocked", in);
    EXPECT_EQ(b.sizes(), (std::vector<int64_t>{2, 2, 5, 7, 8}));
    // nChw8c: channel c of pixel (h, w) at [n, c / 8, h, w, c % 8].
    EXPECT_TRUE(b.select(1, 1).select(3, 3).equal(x.select(1, 11)));
    const at::Tensor back = call1("fxcpp::from_blocked", b);
    EXPECT_TRUE(back.equal(x));
    EXPECT_TRUE(back.is_contiguous(at::MemoryFormat::ChannelsLast));
  }
  EXPECT_EQ(fx_test::error_of([] { call1("fxcpp::to_blocked", at::randn({1, 3, 4, 4})); }),
            "to_blocked: expected a float32 tensor [N, C, H, W] with C a multiple of 8, got [1, 3, 4, 4] Float");
  EXPECT_EQ(fx_test::error_of([] { call1("fxcpp::from_blocked", at::randn({1, 8, 4, 4})); }),
            "from_blocked: expected a blocked tensor [N, C/8, H, W, 8], got [1, 8, 4, 4]");
}

TEST(BlockActivations, BlockedConvolutionAndPoolEqualTheChannelsLastOnes) {
  fx::onednn::register_ops();
  torch::manual_seed(0);
  const at::Tensor x = at::randn({1, 16, 30, 30}), w = at::randn({24, 16, 3, 3}) * 0.1, b = at::randn({24});
  fx::onednn::ConvParams p;
  p.padding = {1, 1};
  fx::onednn::PostOps post;
  post.activation = fx::onednn::Activation::Relu;
  const c10::IValue packed = fx::onednn::pack_conv2d(w, b, p, post, at::kFloat);
  // Through the operator's boxed form, as the graph calls it.
  auto run = [&](const at::Tensor& in, bool blocked) {
    return call_boxed("fxcpp::onednn_conv2d", {in, packed, c10::IValue(), blocked});
  };
  const at::Tensor plain = run(x, false);
  const at::Tensor blocked = run(call1("fxcpp::to_blocked", x), true);
  EXPECT_EQ(blocked.sizes(), (std::vector<int64_t>{1, 3, 30, 30, 8}));
  EXPECT_LE(relative_error(call1("fxcpp::from_blocked", blocked), plain), 1e-6);
  EXPECT_LE(relative_error(plain, at::relu(at::conv2d(x, w, b, 1, 1))), 1e-5);
  // The stem: an NCHW 3-channel input into a blocked output.
  const c10::IValue stem = fx::onednn::pack_conv2d(at::randn({8, 3, 3, 3}), c10::nullopt, p, {}, at::kFloat);
  EXPECT_EQ(call_boxed("fxcpp::onednn_conv2d", {at::randn({1, 3, 9, 9}), stem, c10::IValue(), true}).sizes(),
            (std::vector<int64_t>{1, 1, 9, 9, 8}));
  // Output channels that are no multiple of 8 cannot be blocked.
  const c10::IValue odd = fx::onednn::pack_conv2d(at::randn({12, 16, 3, 3}), c10::nullopt, p, {}, at::kFloat);
  EXPECT_EQ(fx_test::error_of([&] { call_boxed("fxcpp::onednn_conv2d", {x, odd, c10::IValue(), true}); }),
            "onednn_conv2d: a blocked output needs float32 kernels and a multiple of 8 output channels, got 12");
  // max_pool2d of a blocked value: oneDNN's, blocked, the same maxima.
  const at::Tensor pool_blocked = call_boxed("fxcpp::max_pool2d", {blocked, std::vector<int64_t>{3, 3},
                                                                     std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 1}});
  const at::Tensor pooled = call1("fxcpp::from_blocked", pool_blocked);
  EXPECT_TRUE(pooled.equal(at::max_pool2d(call1("fxcpp::from_blocked", blocked), {3, 3}, {2, 2}, {1, 1})));
}

// The GEMM convolutions' pass after the GEMM applies ReLU and clip to a row
// as ATen's relu and clamp do: every length of the 4-wide loop and its
// tail, NaN kept, +-inf and -0 as ATen has them.
TEST(BlockActivations, ActivateRowIsATensReluAndClampOnEveryLengthAndOnNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  fx::onednn::PostOps relu, clip;
  relu.activation = fx::onednn::Activation::Relu;
  clip.activation = fx::onednn::Activation::Clip;
  clip.alpha = -1.5f;
  clip.beta = 6.f;
  const std::vector<float> values{nan, -inf, inf, -0.f, 0.f, -3.f, 2.f, 7.f, -1.f, 5.5f, -2e-38f, 1e30f, nan};
  for (int64_t n = 0; n <= static_cast<int64_t>(values.size()); ++n) {
    const at::Tensor x = at::tensor(std::vector<float>(values.begin(), values.begin() + n));
    for (const auto& [post, want] : {std::pair{relu, at::relu(x)}, std::pair{clip, at::clamp(x, -1.5, 6)}}) {
      at::Tensor got = x.clone();
      fx::onednn::detail::activate_row(got.data_ptr<float>(), n, post);
      for (int64_t i = 0; i < n; ++i) {
        const float g = got[i].item<float>(), w = want[i].item<float>();
        EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w && std::signbit(g) == std::signbit(w))
            << (post.activation == fx::onednn::Activation::Relu ? "relu" : "clip") << ", n " << n << ", x[" << i
            << "] = " << x[i].item<float>() << ": " << g << ", ATen " << w;
      }
    }
  }
}

// Below AVX-512 a float32 convolution with a kernel larger than 1x1 and an
// output of at most 8x8 pixels runs as im2col + oneDNN's packed GEMM
// (gemm_conv.h), and so does a 1x1 one on two threads with 16 to 64 output
// pixels in all (of stride 1: fxcpp's own GEMM, gemm:panel): from an NHWC or
// a blocked input, into either, with the bias, the residual (in place or
// not) and the activation (ReLU, clip and SiLU in the pass after the GEMM,
// or none); ATen's values on 1 and 2 threads. Larger outputs, and 1x1
// kernels on one thread or with fewer or more pixels, stay on oneDNN's own.
TEST(BlockActivations, SmallDeepConvolutionsRunAsAGemmBelowAvx512) {
  fx::onednn::register_ops();
  torch::manual_seed(4);
  const ThreadsGuard guard;
  using A = fx::onednn::Activation;
  struct Case {
    std::vector<int64_t> input, weight, stride, padding;
    bool bias, sum, inplace;
    A act;
  };
  const std::vector<Case> cases{{{2, 32, 7, 7}, {40, 32, 3, 3}, {1, 1}, {1, 1}, true, false, false, A::Relu},
                                {{1, 16, 14, 13}, {24, 16, 3, 3}, {2, 2}, {1, 1}, false, true, false, A::Clip},
                                {{3, 8, 6, 5}, {16, 8, 2, 3}, {1, 1}, {0, 1}, true, true, true, A::Silu},
                                {{1, 24, 5, 5}, {16, 24, 3, 3}, {1, 1}, {1, 1}, false, false, false, A::None},
                                {{1, 16, 6, 6}, {24, 16, 3, 3}, {1, 1}, {1, 1}, true, true, false, A::None},
                                // 1x1: 49 pixels (an NHWC input is the GEMM's own), 32 after a stride of 2, 16
                                {{1, 64, 7, 7}, {96, 64, 1, 1}, {1, 1}, {0, 0}, true, false, false, A::Clip},
                                {{2, 64, 8, 8}, {48, 64, 1, 1}, {2, 2}, {0, 0}, false, true, true, A::Silu},
                                {{1, 40, 4, 4}, {1024, 40, 1, 1}, {1, 1}, {0, 0}, true, true, false, A::Relu}};
  for (const Case& c : cases) {
    const at::Tensor x = at::randn(c.input), w = at::randn(c.weight) * 0.2, b = at::randn({c.weight[0]});
    fx::onednn::ConvParams p;
    p.stride = c.stride;
    p.padding = c.padding;
    fx::onednn::PostOps post;
    post.activation = c.act;
    post.alpha = 0.f;
    post.beta = 6.f;
    post.sum = c.sum;
    post.residual_inplace = c.inplace;
    const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
    const c10::IValue packed = fx::onednn::pack_conv2d(w, bias, p, post, at::kFloat);
    const std::string what = fx::onednn::describe(packed) + " on " + c10::str(x.sizes());
    const at::Tensor conv = at::conv2d(x, w, bias, c.stride, c.padding);
    const at::Tensor r = at::randn(conv.sizes());
    const at::Tensor summed = c.sum ? conv + r : conv;
    const at::Tensor want = c.act == A::Relu   ? at::relu(summed)
                            : c.act == A::Clip ? at::clamp(summed, 0, 6)
                            : c.act == A::Silu ? at::silu(summed)
                                               : summed;
    const bool pointwise = c.weight[2] * c.weight[3] == 1;
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      const std::string impl = fx::onednn::implementation(packed, c.input);
      const bool gemm = impl == "gemm:packed" || impl == "gemm:panel";
      EXPECT_EQ(gemm, !avx512() && (!pointwise || t > 1)) << what << ", " << t << " threads: " << impl;
      // A 1x1 kernel of stride 1 on fxcpp's own GEMM (every CPU of the pool has its AVX2 and FMA).
      const bool panel = pointwise && c.stride == std::vector<int64_t>{1, 1};
      if (gemm) {
        EXPECT_EQ(impl, panel ? "gemm:panel" : "gemm:packed") << what;
      }
      for (bool blocked_in : {false, true}) {
        for (bool blocked_out : {false, true}) {
          const at::Tensor in = blocked_in ? call1("fxcpp::to_blocked", x) : x;
          c10::IValue residual;
          at::Tensor held;
          if (c.sum) {
            held = blocked_out ? call1("fxcpp::to_blocked", r) : r.contiguous(at::MemoryFormat::ChannelsLast);
            residual = held;
          }
          const at::Tensor kept = c.sum ? held.clone() : at::Tensor();
          const at::Tensor out = call_boxed("fxcpp::onednn_conv2d", {in, packed, residual, blocked_out});
          const at::Tensor got = blocked_out ? call1("fxcpp::from_blocked", out) : out;
          const std::string where = what + ", " + std::to_string(t) + " threads, " +
                                    (blocked_in ? "blocked" : "NHWC") + " in, " + (blocked_out ? "blocked" : "NHWC") +
                                    " out";
          EXPECT_LE(relative_error(got, want), 1e-5) << where;
          if (c.sum) {
            EXPECT_EQ(c.inplace, out.data_ptr() == held.data_ptr()) << where;
            if (!c.inplace) {
              EXPECT_TRUE(held.equal(kept)) << where;
            }
          }
        }
      }
    }
  }
  // A 9x9 output stays on oneDNN's convolutions; so does a 1x1 kernel on
  // one thread, or with fewer than 16 or more than 64 output pixels in all.
  fx::onednn::ConvParams pad;
  pad.padding = {1, 1};
  const c10::IValue wide = fx::onednn::pack_conv2d(at::randn({16, 16, 3, 3}), c10::nullopt, pad, {}, at::kFloat);
  const c10::IValue pointwise = fx::onednn::pack_conv2d(at::randn({64, 64, 1, 1}), c10::nullopt, {}, {}, at::kFloat);
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    EXPECT_NE(fx::onednn::implementation(wide, {1, 16, 9, 9}), "gemm:packed");
    EXPECT_EQ(fx::onednn::implementation(wide, {1, 16, 8, 8}) == "gemm:packed", !avx512());
    EXPECT_EQ(fx::onednn::implementation(pointwise, {1, 64, 5, 5}) == "gemm:panel", !avx512() && t > 1) << t;
    EXPECT_NE(fx::onednn::implementation(pointwise, {2, 64, 7, 7}).rfind("gemm:", 0), 0u) << t;
    EXPECT_NE(fx::onednn::implementation(pointwise, {1, 64, 3, 3}).rfind("gemm:", 0), 0u) << t;
  }
}

}  // namespace

// Empty inputs run no oneDNN kernel: oneDNN 2.6 divides by zero creating an
// AVX-512 primitive for zero rows, and these shapes reach the kernels from
// a graph (a batch filtered down to nothing, an empty sequence).
TEST(BlockActivations, EmptyInputsGiveEmptyOutputsWithoutAKernel) {
  fx::onednn::register_ops();
  torch::manual_seed(0);
  fx::onednn::ConvParams p;
  p.padding = {1, 1};
  for (const int kind : {0, 1, 2}) {  // oneDNN's direct convolution; the GEMM one below AVX-512; Winograd
    const int64_t hw = kind == 1 ? 7 : 30;
    p.winograd = kind == 2;
    const c10::IValue packed = fx::onednn::pack_conv2d(at::randn({16, 16, 3, 3}), at::randn({16}), p, {}, at::kFloat);
    const at::Tensor x = at::randn({0, 16, hw, hw}).contiguous(at::MemoryFormat::ChannelsLast);
    EXPECT_EQ(call_boxed("fxcpp::onednn_conv2d", {x, packed, c10::IValue(), false}).sizes(),
              (std::vector<int64_t>{0, 16, hw, hw}));
    EXPECT_EQ(call_boxed("fxcpp::onednn_conv2d", {call1("fxcpp::to_blocked", x), packed, c10::IValue(), true}).sizes(),
              (std::vector<int64_t>{0, 2, hw, hw, 8}));
  }
  const c10::IValue linear = fx::onednn::pack_linear(at::randn({4, 5}), at::randn({4}), {}, at::kFloat);
  EXPECT_EQ(call_boxed("fxcpp::onednn_linear", {at::randn({2, 0, 5}), linear, c10::IValue()}).sizes(),
            (std::vector<int64_t>{2, 0, 4}));
  auto matmul = [](const at::Tensor& a, const at::Tensor& b) {
    return call_boxed("fxcpp::onednn_matmul", {a, b, false});
  };
  EXPECT_EQ(matmul(at::randn({0, 5}), at::randn({5, 3})).sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(matmul(at::randn({2, 4, 5}), at::randn({2, 5, 0})).sizes(), (std::vector<int64_t>{2, 4, 0}));
  EXPECT_EQ(matmul(at::randn({0, 4, 5}), at::randn({0, 5, 3})).sizes(), (std::vector<int64_t>{0, 4, 3}));
  // An empty sum is zero, as ATen's.
  EXPECT_TRUE(matmul(at::randn({3, 0}), at::randn({0, 4})).equal(at::zeros({3, 4})));
}
