// fx::training_compiler and its rewrites: the compiled training step
// computes what the partitioned graphs compute, faster.
#include "aot_models.h"
#include "graph_test_util.h"

#include <fx/aot.h>
#include <fx/graph_module.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

namespace {

using fx::aot_test::count_target;
using fx::aot_test::expect_same_outputs;
using fx::aot_test::graph_copy_of;

/// Two 3x3 convolutions on a 2x2 map (4 positions: rewritten), a strided
/// one onto it, and one on an 8x8 map (64 positions: left alone).
torch::nn::Sequential small_map_net() {
  using torch::nn::Conv2d;
  using torch::nn::Conv2dOptions;
  return torch::nn::Sequential(Conv2d(Conv2dOptions(3, 6, 3).padding(1)), torch::nn::ReLU(),
                               Conv2d(Conv2dOptions(6, 8, 3).stride(4).padding(1)), torch::nn::ReLU(),
                               Conv2d(Conv2dOptions(8, 8, 3).padding(1).bias(false)), torch::nn::ReLU(),
                               Conv2d(Conv2dOptions(8, 5, 3).padding(2).dilation(2)), torch::nn::Flatten());
}

std::vector<std::string> masks(const fx::Graph& g) {
  std::vector<std::string> out;
  for (fx::Node* n : g.nodes())
    if (n->target() == "aten::convolution_backward") out.push_back(n->args()[10].repr());
  return out;
}

TEST(ConvWeightGradAsMatmul, RewritesTheConvolutionsWithFewOutputPositions) {
  torch::manual_seed(0);
  auto net = small_map_net();
  auto aot = fx::aot_module(net.ptr());
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  auto bw = aot->backward_graph();
  // The partition's graph, last convolution first: four weight gradients
  // from convolution_backward (the first convolution's input gradient is
  // not asked for, the third has no bias).
  EXPECT_EQ(masks(bw->graph()), (std::vector<std::string>{"[True, True, True]", "[True, True, False]",
                                                           "[True, True, True]", "[False, True, True]"}));
  auto copy = graph_copy_of(bw);

  // Three convolutions write 2x2 maps (4 positions); the first one 8x8.
  EXPECT_EQ(fx::conv_weight_grad_as_matmul(copy->graph(), 4), 3u);
  EXPECT_EQ(masks(copy->graph()),
            (std::vector<std::string>{"[True, False, True]", "[True, False, False]", "[True, False, True]",
                                      "[False, True, True]"}));
  EXPECT_EQ(count_target(copy->graph(), "aten::im2col"), 3u);
  EXPECT_EQ(count_target(copy->graph(), "aten::mm"), 3u);
  copy->graph().lint();

  expect_same_outputs(*bw, *copy, 1e-5);

  // Then the input gradients of the same three (the third convolution's
  // convolution_backward has nothing left to do).
  EXPECT_EQ(fx::conv_as_matmul(copy->graph(), 4), 3u);
  EXPECT_EQ(masks(copy->graph()),
            (std::vector<std::string>{"[False, False, True]", "[False, False, True]", "[False, True, True]"}));
  EXPECT_EQ(count_target(copy->graph(), "aten::col2im"), 3u);
  copy->graph().lint();
  expect_same_outputs(*bw, *copy, 1e-5);

  // The forward's three convolutions on 2x2 maps.
  auto fw = aot->forward_graph(), fw_copy = graph_copy_of(fw);
  EXPECT_EQ(fx::conv_as_matmul(fw_copy->graph(), 4), 3u);
  EXPECT_EQ(count_target(fw_copy->graph(), "aten::convolution"), 1u);
  EXPECT_EQ(count_target(fw_copy->graph(), "aten::addmm"), 2u);  // the two with a bias
  fw_copy->graph().lint();
  expect_same_outputs(*fw, *fw_copy, 1e-5);
}

// Channels-last activations and weights: the columns come from
// fxcpp::im2col_nhwc in the weight's (kh, kw, C) order and the input
// gradients go back through fxcpp::col2im_nhwc, with no NCHW copies.
TEST(ConvAsMatmul, ChannelsLastColumnsWithoutCopies) {
  torch::manual_seed(0);
  auto net = small_map_net();
  fx::AotOptions options;
  options.memory_format = c10::MemoryFormat::ChannelsLast;
  auto aot = fx::aot_module(net.ptr(), options);
  aot->forward(torch::randn({2, 3, 8, 8})).sum().backward();
  auto bw = aot->backward_graph(), copy = graph_copy_of(bw);
  EXPECT_EQ(fx::conv_weight_grad_as_matmul(copy->graph(), 4), 3u);
  EXPECT_EQ(fx::conv_as_matmul(copy->graph(), 4), 3u);
  EXPECT_EQ(count_target(copy->graph(), "fxcpp::im2col_nhwc"), 3u);
  EXPECT_EQ(count_target(copy->graph(), "fxcpp::col2im_nhwc"), 3u);
  EXPECT_EQ(count_target(copy->graph(), "aten::im2col") + count_target(copy->graph(), "aten::col2im") +
                count_target(copy->graph(), "aten::clone"),
            count_target(bw->graph(), "aten::clone"));  // no ATen columns, no layout copies added
  copy->graph().lint();
  expect_same_outputs(*bw, *copy, 1e-5);
  auto fw = aot->forward_graph(), fw_copy = graph_copy_of(fw);
  EXPECT_EQ(fx::conv_as_matmul(fw_copy->graph(), 4), 3u);
  EXPECT_EQ(count_target(fw_copy->graph(), "fxcpp::im2col_nhwc"), 3u);
  EXPECT_EQ(count_target(fw_copy->graph(), "aten::im2col"), 0u);
  fw_copy->graph().lint();
  expect_same_outputs(*fw, *fw_copy, 1e-5);
}

TEST(ConvWeightGradAsMatmul, DropsAConvolutionBackwardLeftWithNothingToDo) {
  torch::manual_seed(0);
  auto net = torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
  auto aot = fx::aot_module(net.ptr());
  aot->forward(torch::randn({1, 3, 4, 4})).sum().backward();
  auto bw = aot->backward_graph();
  ASSERT_EQ(masks(bw->graph()), std::vector<std::string>{"[False, True, False]"});
  auto copy = graph_copy_of(bw);
  EXPECT_EQ(fx::conv_weight_grad_as_matmul(copy->graph(), 0), 0u);  // 0: off
  EXPECT_EQ(fx::conv_weight_grad_as_matmul(copy->graph(), 4), 1u);
  EXPECT_TRUE(masks(copy->graph()).empty());
  EXPECT_EQ(count_target(copy->graph(), "operator.getitem"), 0u);
  copy->graph().lint();
}

/// bmm(x^T, y) over [batch, k, m] and [batch, k, n] of `dtype`, metadata set.
std::shared_ptr<fx::GraphModule> transposed_bmm(c10::ScalarType dtype) {
  auto g = std::make_shared<fx::Graph>();
  auto meta = [&](fx::Node* n, std::vector<int64_t> shape) {
    n->meta()["tensor_meta"] = fx::TensorMetadata::from_tensor(torch::empty(shape, torch::TensorOptions(dtype)));
    return n;
  };
  fx::Node* x = meta(g->placeholder("x"), {6, 5, 3});
  fx::Node* y = meta(g->placeholder("y"), {6, 5, 4});
  fx::Node* t = g->call_function("aten::transpose.int", {fx::Argument(x), fx::Argument(int64_t{1}), fx::Argument(int64_t{2})});
  fx::Node* p = meta(g->call_function("aten::bmm", {fx::Argument(t), fx::Argument(y)}), {6, 3, 4});
  g->output(fx::Argument(p));
  return std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
}

// Batched products of a training graph run as one oneDNN matmul each,
// reading transposed operands through their strides: the same values.
TEST(BmmAsOnednnMatmul, ReplacesFloatBatchedProducts) {
  auto ref = transposed_bmm(c10::ScalarType::Float);
  auto got = graph_copy_of(ref);
  EXPECT_EQ(fx::bmm_as_onednn_matmul(got->graph()), 1u);
  EXPECT_EQ(count_target(got->graph(), "aten::bmm"), 0u);
  EXPECT_EQ(count_target(got->graph(), "fxcpp::onednn_matmul"), 1u);
  got->graph().lint();
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({6, 5, 3}), y = torch::randn({6, 5, 4});
  const at::Tensor want = ref->forward({x, y}).toTensor(), have = got->forward({x, y}).toTensor();
  EXPECT_LE((have - want).abs().max().item<double>(), 1e-6 * want.abs().max().item<double>());
  EXPECT_TRUE(at::allclose(have, at::bmm(x.transpose(1, 2), y)));
  // oneDNN has no double matmul: a double bmm stays.
  auto dbl = transposed_bmm(c10::ScalarType::Double);
  EXPECT_EQ(fx::bmm_as_onednn_matmul(dbl->graph()), 0u);
  EXPECT_EQ(count_target(dbl->graph(), "aten::bmm"), 1u);
}

// rewrite_for_training counts what each rewrite replaced; by default the
// forward graph keeps eager's convolutions (conv_forward_rewrites), so the
// compiled forward computes eager's values to the bit.
TEST(TrainingCompiler, RewriteForTrainingCountsEachRewriteAndKeepsTheForward) {
  torch::manual_seed(0);
  auto net = small_map_net();
  auto aot = fx::aot_module(net.ptr());
  const at::Tensor x = torch::randn({2, 3, 8, 8});
  aot->forward(x).sum().backward();
  auto fw = graph_copy_of(aot->forward_graph()), bw = graph_copy_of(aot->backward_graph());
  const fx::TrainingRewrites fr = fx::rewrite_for_training(fw->graph());
  EXPECT_EQ(fr.total(), 0u);
  EXPECT_EQ(count_target(fw->graph(), "aten::convolution"), 4u);
  const fx::TrainingRewrites br = fx::rewrite_for_training(bw->graph());
  EXPECT_EQ(br.conv_weight_grad_as_matmul, 3u);
  EXPECT_EQ(br.conv_as_matmul, 3u);
  // The backward's nodes that read no tangent (what the weight gradients'
  // matrix products read of the saved inputs) move to where they are used.
  EXPECT_EQ(br.sink_recomputation, 9u);
  EXPECT_EQ(br.total(), 15u);
  EXPECT_EQ(br.items().size(), 8u);
  EXPECT_EQ(br.items().back().first, "sink_recomputation");
  EXPECT_EQ(br.items()[1], (std::pair<std::string, size_t>{"conv_weight_grad_as_matmul", 3}));
  expect_same_outputs(*aot->backward_graph(), *bw, 1e-5);

  fx::TrainingCompileOptions forward_too;
  forward_too.conv_forward_rewrites = true;
  auto fw2 = graph_copy_of(aot->forward_graph());
  EXPECT_EQ(fx::rewrite_for_training(fw2->graph(), forward_too).conv_as_matmul, 3u);
  EXPECT_EQ(count_target(fw2->graph(), "aten::convolution"), 1u);
  expect_same_outputs(*aot->forward_graph(), *fw2, 1e-5);
}

TEST(TrainingCompiler, TrainsAsEagerWithTheRewrites) {
  torch::manual_seed(0);
  auto eager = small_map_net();
  auto compiled = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(eager->clone());
  fx::AotOptions options;
  fx::TrainingCompileOptions rewrites{16, 4};
  rewrites.conv_forward_rewrites = true;  // the forward's convolutions on 2x2 maps too
  options.fw_compiler = options.bw_compiler = fx::training_compiler(rewrites);
  auto aot = fx::aot_module(torch::nn::Sequential(compiled).ptr(), options);
  torch::optim::SGD se(eager->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD sc(compiled->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = torch::randn({4, 3, 8, 8});
    se.zero_grad();
    sc.zero_grad();
    eager->forward(x).pow(2).mean().backward();
    aot->forward(x).pow(2).mean().backward();
    se.step();
    sc.step();
  }
  auto pe = eager->named_parameters(), pc = compiled->named_parameters();
  for (const auto& p : pe) {
    const double err = (pc[p.key()] - p.value()).abs().max().item<double>();
    EXPECT_LE(err, 1e-5 * p.value().abs().max().item<double>()) << p.key();
  }
  // The partition's backward graph is what default_partition made.
  EXPECT_EQ(count_target(aot->backward_graph()->graph(), "aten::im2col"), 0u);
}

}  // namespace
