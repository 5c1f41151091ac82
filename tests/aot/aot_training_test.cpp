// Training through aot_module equals eager libtorch: losses, gradients and
// buffer updates, step after step, on the C++ models people write.
#include "aot_models.h"

#include <fx/aot.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <torch/torch.h>

#include <functional>
#include <map>

namespace {

using fx::aot_test::call_targets;

double relative_error(const at::Tensor& got, const at::Tensor& want) {
  const double err = (got - want).abs().max().template item<double>();
  return err / std::max(want.abs().max().template item<double>(), 1e-12);
}

/// Trains two copies of a model (same seed) for `steps` SGD steps, one
/// eagerly, one through aot_module, drawing the same random numbers, and
/// compares every loss, gradient and buffer. With options.memory_format the
/// eager model runs in that format too (its 4-d parameters and the input),
/// as a Python user's model.to(memory_format=...) does: the same kernels.
template <class M>
void expect_trains_like_eager(const std::function<M()>& make, const std::function<at::Tensor()>& input,
                              const fx::PartitionFn& partition, int steps = 2, fx::AotOptions options = {}) {
  torch::manual_seed(7);
  M eager = make();
  torch::manual_seed(7);
  M compiled = make();
  options.partition_fn = partition;
  auto aot = fx::aot_module(compiled.ptr(), options);
  if (options.memory_format)
    for (auto& p : eager->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(*options.memory_format));
  torch::optim::SGD opt_e(eager->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::optim::SGD opt_c(compiled->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + step);
    at::Tensor x = input();
    auto gen_state = at::Generator(at::detail::getDefaultCPUGenerator()).get_state();
    opt_e.zero_grad();
    at::Tensor le = eager->forward(options.memory_format ? x.contiguous(*options.memory_format) : x).pow(2).mean();
    le.backward();
    at::Generator(at::detail::getDefaultCPUGenerator()).set_state(gen_state);
    opt_c.zero_grad();
    at::Tensor lc = aot->forward(x).pow(2).mean();
    lc.backward();
    // Activations of order 1: the loss is neither vanishing nor exploding.
    EXPECT_GT(le.item<double>(), 1e-3);
    EXPECT_LT(le.item<double>(), 1e3);
    EXPECT_LE(relative_error(lc, le), 1e-4) << "loss of step " << step;
    auto pe = eager->named_parameters(), pc = compiled->named_parameters();
    // Gradients that vanish by invariance (the shift of a batch norm feeding
    // another batch norm, a depthwise scale before one: sums that cancel to
    // 1e-6 of the model's largest) are compared against a hundredth of the
    // largest gradient instead of their own scale, which is rounding noise
    // once recomputed activations differ from the fused kernel's in the last
    // bit (min_cut_partition) or a weight gradient is one matrix product
    // summing in another order (training_compiler's rewrite).
    double largest = 0;
    for (const auto& p : pe) largest = std::max(largest, p.value().grad().abs().max().template item<double>());
    for (const auto& p : pe) {
      ASSERT_TRUE(pc[p.key()].grad().defined()) << p.key();
      const at::Tensor& ge = p.value().grad();
      const double scale = std::max(ge.abs().max().template item<double>(), 1e-2 * largest);
      EXPECT_LE((pc[p.key()].grad() - ge).abs().max().template item<double>() / scale, 1e-4)
          << "grad of " << p.key() << ", step " << step;
    }
    // Buffers likewise: a running mean of a batch norm's shift is as close to
    // zero as that shift's gradient.
    auto be = eager->named_buffers(), bc = compiled->named_buffers();
    double largest_buffer = 0;
    for (const auto& b : be)
      if (b.value().is_floating_point()) largest_buffer = std::max(largest_buffer, b.value().abs().max().template item<double>());
    for (const auto& b : be) {
      const at::Tensor want = b.value().to(torch::kDouble), got = bc[b.key()].to(torch::kDouble);
      const double scale = std::max(want.abs().max().template item<double>(), 1e-2 * largest_buffer);
      EXPECT_LE((got - want).abs().max().template item<double>() / scale, 1e-5) << "buffer " << b.key() << ", step " << step;
    }
    opt_e.step();
    opt_c.step();
  }
  EXPECT_EQ(aot->num_traces(), 1u);
}

at::Tensor images() { return torch::randn({2, 3, 32, 32}); }

// Recomputed batch-norm outputs and the weight gradients training_compiler
// computes as one matrix product differ from eager's kernels in the last
// bits (1e-7); batch norm over 2 values a channel (32x32 images reach 1x1 at
// batch 2) turns that into 1e-3 after one SGD step. 64x64 at batch 4 keeps
// four values a channel and the comparison well conditioned.
at::Tensor larger_images() { return torch::randn({4, 3, 64, 64}); }

// MobileNetV2 (and resnet in channels-last) still reach 2x2 maps at 64x64:
// batch norm over 16 values a channel turns the last-bit differences of the
// kernels training_compiler and the channels-last layout choose (matrix
// products, NHWC kernels, recomputed batch norms) into 1e-2 after one SGD
// step. In double precision they stay 1e-14: these compare in double.
at::Tensor double_images() { return torch::randn({4, 3, 32, 32}, torch::kDouble); }
fx::aot_test::MobileNetV2 double_mobilenet() {
  auto m = fx::aot_test::MobileNetV2(10);
  m->to(torch::kDouble);
  return m;
}

TEST(AotTraining, Resnet18DefaultPartition) {
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] { return fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10); }, larger_images,
      fx::default_partition);
}

TEST(AotTraining, Resnet18MinCut) {
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] { return fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10); }, larger_images,
      fx::min_cut_rematerialization_partition);
}

// fxcpp's min-cut recomputes batch-norm outputs and activations in backward.
TEST(AotTraining, Resnet18RecomputingBatchNorm) {
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] { return fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10); }, larger_images,
      fx::min_cut_partition());
}

// Dropout in train mode: the compiled forward draws the same masks as eager.
TEST(AotTraining, MobilenetV2WithDropoutMinCut) {
  expect_trains_like_eager<fx::aot_test::MobileNetV2>(double_mobilenet, double_images,
                                                       fx::min_cut_rematerialization_partition);
}

// Channels-last activations and parameters (AotOptions::memory_format):
// the same training as eager in channels-last, the parameters stored NHWC
// (in double: see double_images).
TEST(AotTraining, ChannelsLast) {
  fx::AotOptions options;
  options.memory_format = c10::MemoryFormat::ChannelsLast;
  expect_trains_like_eager<fx::trace_test::ResNet>(
      [] {
        auto m = fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10);
        m->to(torch::kDouble);
        return m;
      },
      double_images, fx::default_partition, 2, options);
  expect_trains_like_eager<fx::aot_test::MobileNetV2>(double_mobilenet, double_images, fx::min_cut_partition(), 2,
                                                       options);
  torch::manual_seed(7);
  auto net = fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10);
  auto aot = fx::aot_module(net.ptr(), options);
  aot->forward(larger_images()).sum().backward();
  for (const auto& p : net->named_parameters())
    if (p.value().dim() == 4) {
      EXPECT_TRUE(p.value().is_contiguous(c10::MemoryFormat::ChannelsLast)) << p.key();
      EXPECT_TRUE(p.value().grad().is_contiguous(c10::MemoryFormat::ChannelsLast)) << p.key();
    }
  EXPECT_EQ(call_targets(*aot->forward_graph()).front(), "aten::clone");

  // fxcpp's min cut redoes that layout copy of the input in backward (the
  // caller holds the input anyway) instead of the forward keeping it.
  fx::AotOptions cut = options;
  cut.partition_fn = fx::min_cut_partition();
  auto aot_cut = fx::aot_module(net.ptr(), cut);
  aot_cut->forward(larger_images()).sum().backward();
  const fx::PartitionedGraphs& parts = aot_cut->graphs().partitioned;
  std::string copy;
  for (fx::Node* n : parts.forward->graph().nodes())
    if (n->op() == fx::Opcode::CallFunction) {
      copy = n->name();
      EXPECT_EQ(n->target(), "aten::clone");
      break;
    }
  EXPECT_EQ(std::count(parts.saved.begin(), parts.saved.end(), copy), 0) << copy << " is saved";
  EXPECT_EQ(std::count(parts.recomputed.begin(), parts.recomputed.end(), copy), 1) << copy << " is not recomputed";
}

TEST(AotTraining, MobilenetV2RecomputingBatchNorm) {
  expect_trains_like_eager<fx::aot_test::MobileNetV2>(double_mobilenet, double_images, fx::min_cut_partition());
}

// A memory budget buys recomputation: the least that fits, or an error.
TEST(AotTraining, MemoryBudget) {
  torch::manual_seed(7);
  auto net = fx::trace_test::ResNet(false, std::vector<int64_t>{2, 2, 2, 2}, 10);
  auto aot = fx::aot_module(net.ptr());
  aot->forward(images()).sum().backward();
  const fx::JointGraph& joint = aot->graphs().joint;
  fx::MinCutOptions functorch_policy;
  functorch_policy.recompute_batch_norm = false;
  const size_t plain = fx::min_cut_partition(functorch_policy)(joint).activation_bytes;
  const size_t recomputing = fx::min_cut_partition()(joint).activation_bytes;
  ASSERT_LT(recomputing, plain);
  functorch_policy.memory_budget = recomputing;
  EXPECT_EQ(fx::min_cut_partition(functorch_policy)(joint).activation_bytes, recomputing)
      << "the budget turned batch-norm recompute on";
  fx::MinCutOptions tiny;
  tiny.memory_budget = 1000;
  try {
    fx::min_cut_partition(tiny)(joint);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("min_cut_partition: the backward needs at least ", 0), 0u) << what;
    EXPECT_NE(what.find(" bytes of saved activations, more than the memory budget of 1000 bytes (recomputing everything recomputable)"), std::string::npos) << what;
  }
}

TEST(AotTraining, TransformerEncoderLayer) {
  expect_trains_like_eager<torch::nn::TransformerEncoderLayer>(
      [] { return torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128)); },
      [] { return torch::randn({8, 2, 64}); }, fx::min_cut_rematerialization_partition);
}

// fxcpp's min-cut saves dropout's masks as bool (and may recompute views):
// the encoder still trains as eager does, bit for bit in the masks, and its
// forward keeps a quarter of the bytes per mask.
TEST(AotTraining, TransformerEncoderLayerMasksAsBool) {
  auto make = [] {
    return torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128));
  };
  auto input = [] { return torch::randn({8, 2, 64}); };
  expect_trains_like_eager<torch::nn::TransformerEncoderLayer>(make, input, fx::min_cut_partition());
  torch::manual_seed(7);
  auto layer = make();
  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();
  auto aot = fx::aot_module(layer, options);
  aot->forward(input()).sum().backward();
  const fx::JointGraph& joint = aot->graphs().joint;
  fx::MinCutOptions float_masks;
  float_masks.masks_as_bool = false;
  const fx::PartitionedGraphs with = fx::min_cut_partition()(joint), without = fx::min_cut_partition(float_masks)(joint);
  auto saved_dtypes = [](const fx::PartitionedGraphs& p) {  // the saved values' dtypes, counted
    std::map<c10::ScalarType, int> count;
    for (fx::Node* n : p.backward->graph().nodes())
      if (n->op() == fx::Opcode::Placeholder && n->name().rfind("tangents", 0) != 0 && n->meta().count("tensor_meta"))
        count[std::any_cast<const fx::TensorMetadata&>(n->meta().at("tensor_meta")).dtype] += 1;
    return count;
  };
  // The bool mask or its uint8 view (the same bytes: the cut may take either).
  auto byte_masks = [&](const fx::PartitionedGraphs& p) {
    auto count = saved_dtypes(p);
    return count[c10::ScalarType::Bool] + count[c10::ScalarType::Byte];
  };
  EXPECT_EQ(byte_masks(with), 4) << "one mask per dropout";
  EXPECT_EQ(byte_masks(without), 0);
  // Mask elements: attention 2 x 4 heads x 8 x 8, after attention 8 x 2 x 64,
  // feed-forward 8 x 2 x 128, after it 8 x 2 x 64; 3 bytes saved on each.
  EXPECT_EQ(without.activation_bytes - with.activation_bytes, 3u * (512 + 1024 + 2048 + 1024));
}

TEST(AotTraining, LstmClassifier) {
  expect_trains_like_eager<fx::aot_test::LstmClassifier>([] { return fx::aot_test::LstmClassifier(); },
                                                          [] { return torch::randn({2, 5, 8}); }, fx::default_partition);
}

}  // namespace
