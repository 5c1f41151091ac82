// fxcpp::batch_norm_apply, fxcpp::batch_norm_act_backward and
// fuse_batch_norm_activation: the backward's batch norms with their
// activations in one pass, computing what ATen's operators compute.
#include "graph_test_util.h"

#include <fx/aot.h>
#include <fx/graph_module.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using fx::aot_test::count_target;
using fx::aot_test::graph_copy_of;

/// A training-mode batch norm of x: (y, mean, invstd) and its parameters.
struct BnCase {
  at::Tensor x, w, b, y, mean, invstd;

  BnCase(std::vector<int64_t> shape, c10::MemoryFormat format, c10::ScalarType dtype = at::kFloat) {
    const auto opts = at::TensorOptions().dtype(dtype);
    x = (torch::randn(shape, opts) * 2 + 0.5).contiguous(format);
    w = torch::rand({shape[1]}, opts) + 0.5;
    b = torch::randn({shape[1]}, opts);
    at::Tensor rm = torch::zeros({shape[1]}, opts), rv = torch::ones({shape[1]}, opts);
    std::tie(y, mean, invstd) = at::native_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  }
};

const c10::OperatorHandle& bn_op(const char* name) {
  static std::map<std::string, c10::OperatorHandle> ops;
  auto it = ops.find(name);
  if (it == ops.end()) it = ops.emplace(name, c10::Dispatcher::singleton().findSchemaOrThrow(name, "")).first;
  return it->second;
}

at::Tensor bn_apply(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& invstd, const at::Tensor& w,
                    const at::Tensor& b, const at::Tensor& residual, c10::IValue lo, c10::IValue hi) {
  auto stack = std::vector<c10::IValue>{x, mean, invstd, w, b};
  stack.emplace_back(residual.defined() ? c10::IValue(residual) : c10::IValue());
  stack.push_back(std::move(lo));
  stack.push_back(std::move(hi));
  bn_op("fxcpp::batch_norm_apply").callBoxed(stack);
  return stack.at(0).toTensor();
}

std::vector<at::Tensor> bn_act_backward(const at::Tensor& g, const at::Tensor& act, c10::IValue lo, c10::IValue hi,
                                        const BnCase& c, const at::Tensor& w, std::vector<bool> mask) {
  c10::List<bool> output_mask;
  for (bool m : mask) output_mask.push_back(m);
  auto stack = std::vector<c10::IValue>{g, act, std::move(lo), std::move(hi), c.x, w, c.mean, c.invstd, output_mask};
  bn_op("fxcpp::batch_norm_act_backward").callBoxed(stack);
  return {stack.at(0).toTensor(), stack.at(1).toTensor(), stack.at(2).toTensor()};
}

void bn_expect_close(const at::Tensor& got, const at::Tensor& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!want.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  EXPECT_LE(err, rtol * want.abs().max().item<double>()) << what;
}

const std::vector<c10::MemoryFormat> kBnFormats = {c10::MemoryFormat::Contiguous, c10::MemoryFormat::ChannelsLast};

/// Images whose planes are walked as rows (5x7) and plane by plane (9x8).
const std::vector<std::vector<int64_t>> kBnImages = {{5, 7}, {9, 8}};

std::string bn_where(int64_t c, const std::vector<int64_t>& hw, c10::MemoryFormat format) {
  return "C " + std::to_string(c) + " " + std::to_string(hw[0]) + "x" + std::to_string(hw[1]) +
         (format == kBnFormats[1] ? " NHWC" : " NCHW");
}

// Channel counts around the vector width (tails), both layouts, small and
// large planes: the forward's output to the bit, with the residual add and
// the activation.
TEST(BatchNormApply, IsTheForwardsOutputBitForBit) {
  torch::manual_seed(0);
  for (int64_t c : {3, 24, 64})
    for (const auto& hw : kBnImages)
    for (auto format : kBnFormats) {
      BnCase k({4, c, hw[0], hw[1]}, format);
      const std::string where = bn_where(c, hw, format);
      at::Tensor y = bn_apply(k.x, k.mean, k.invstd, k.w, k.b, {}, {}, {});
      EXPECT_TRUE(torch::equal(y, k.y)) << where;
      EXPECT_EQ(y.strides(), k.x.strides()) << where;
      EXPECT_TRUE(torch::equal(bn_apply(k.x, k.mean, k.invstd, k.w, k.b, {}, 0.0, {}), torch::relu(k.y))) << where;
      EXPECT_TRUE(torch::equal(bn_apply(k.x, k.mean, k.invstd, k.w, k.b, {}, 0.0, 6.0), torch::hardtanh(k.y, 0, 6)))
          << where;
      at::Tensor r = torch::randn_like(k.x);
      EXPECT_TRUE(torch::equal(bn_apply(k.x, k.mean, k.invstd, k.w, k.b, r, 0.0, {}), torch::relu(k.y + r))) << where;
    }
  // No affine parameters; [N, C] (BatchNorm1d); double.
  BnCase k({6, 10, 3, 3}, c10::MemoryFormat::Contiguous);
  at::Tensor y0 = std::get<0>(at::native_batch_norm(k.x, {}, {}, {}, {}, true, 0.1, 1e-5));
  EXPECT_TRUE(torch::equal(bn_apply(k.x, k.mean, k.invstd, {}, {}, {}, {}, {}), y0));
  BnCase flat({16, 40}, c10::MemoryFormat::Contiguous, at::kDouble);
  EXPECT_TRUE(torch::equal(bn_apply(flat.x, flat.mean, flat.invstd, flat.w, flat.b, {}, 0.0, {}), torch::relu(flat.y)));
  // [N, C, L] (BatchNorm1d over a sequence) and an empty batch.
  BnCase seq({3, 5, 70}, c10::MemoryFormat::Contiguous);
  EXPECT_TRUE(torch::equal(bn_apply(seq.x, seq.mean, seq.invstd, seq.w, seq.b, {}, {}, {}), seq.y));
  EXPECT_EQ(bn_apply(torch::empty({0, 5, 2, 2}), seq.mean, seq.invstd, seq.w, seq.b, {}, {}, {}).sizes(),
            (std::vector<int64_t>{0, 5, 2, 2}));
}

// The fused backward against ATen's threshold_backward / hardtanh_backward
// then native_batch_norm_backward: same gradients (sums accumulated in
// another order: 1e-5 relative in float).
TEST(BatchNormActBackward, EqualsAtensMaskThenBatchNormBackward) {
  torch::manual_seed(1);
  for (int64_t c : {3, 24, 64})
    for (const auto& hw : kBnImages)
    for (auto format : kBnFormats) {
      BnCase k({4, c, hw[0], hw[1]}, format);
      const std::string where = bn_where(c, hw, format);
      at::Tensor g = torch::randn_like(k.x);
      auto reference = [&](const at::Tensor& masked, const at::Tensor& w, std::array<bool, 3> mask) {
        auto [gx, gw, gb] = at::native_batch_norm_backward(masked, k.x, w, {}, {}, k.mean, k.invstd, true, 1e-5, mask);
        return std::vector<at::Tensor>{gx, gw, gb};
      };
      // relu: the mask of its output.
      at::Tensor r = torch::relu(k.y);
      auto want = reference(at::threshold_backward(g, r, 0), k.w, {true, true, true});
      auto got = bn_act_backward(g, r, 0.0, {}, k, k.w, {true, true, true});
      for (int i = 0; i < 3; ++i) bn_expect_close(got[i], want[i], 1e-5, where + " relu output " + std::to_string(i));
      // relu6 (hardtanh): hardtanh_backward tests the input; the fused
      // kernel gives the same from the input or from the output.
      at::Tensor h = torch::hardtanh(k.y * 3, 0, 6);
      want = reference(at::hardtanh_backward(g, k.y * 3, 0, 6), k.w, {true, true, true});
      for (const at::Tensor& act : {at::Tensor(k.y * 3), h}) {
        got = bn_act_backward(g, act, 0.0, 6.0, k, k.w, {true, true, true});
        for (int i = 0; i < 3; ++i) bn_expect_close(got[i], want[i], 1e-5, where + " hardtanh output " + std::to_string(i));
      }
      // Only the parameters' gradients; no weight.
      want = reference(at::threshold_backward(g, r, 0), {}, {false, true, true});
      got = bn_act_backward(g, r, 0.0, {}, k, {}, {false, true, true});
      EXPECT_FALSE(got[0].defined()) << where;
      for (int i = 1; i < 3; ++i) bn_expect_close(got[i], want[i], 1e-5, where + " no weight " + std::to_string(i));
    }
  // Double precision agrees to rounding.
  BnCase k({8, 16, 4, 4}, c10::MemoryFormat::ChannelsLast, at::kDouble);
  at::Tensor g = torch::randn_like(k.x), r = torch::relu(k.y);
  auto [gx, gw, gb] = at::native_batch_norm_backward(at::threshold_backward(g, r, 0), k.x, k.w, {}, {}, k.mean,
                                                      k.invstd, true, 1e-5, {true, true, true});
  auto got = bn_act_backward(g, r, 0.0, {}, k, k.w, {true, true, true});
  bn_expect_close(got[0], gx, 1e-12, "double gx");
  bn_expect_close(got[1], gw, 1e-12, "double gw");
  bn_expect_close(got[2], gb, 1e-12, "double gb");
}

TEST(BatchNormActBackward, MismatchedShapesAreAnError) {
  BnCase k({2, 4, 3, 3}, c10::MemoryFormat::Contiguous);
  try {
    bn_act_backward(torch::randn({2, 4, 3, 2}), torch::relu(k.y), 0.0, {}, k, k.w, {true, true, true});
    FAIL() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fxcpp batch norm: a tensor of shape [2, 4, 3, 2] where [2, 4, 3, 3] was "
                                         "expected"),
              std::string::npos)
        << e.what();
  }
}

/// conv -> bn -> relu, then a residual block (conv -> bn -> add -> relu)
/// and a relu6 head: the patterns of resnet and mobilenet.
struct BnActNetImpl : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(3, 8, 3).padding(1).bias(false)};
  torch::nn::BatchNorm2d b1{8};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(8, 8, 3).padding(1).bias(false)};
  torch::nn::BatchNorm2d b2{8};
  torch::nn::Conv2d c3{torch::nn::Conv2dOptions(8, 12, 1).bias(false)};
  torch::nn::BatchNorm2d b3{12};
  BnActNetImpl() {
    register_module("c1", c1), register_module("b1", b1), register_module("c2", c2);
    register_module("b2", b2), register_module("c3", c3), register_module("b3", b3);
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = torch::relu(b1(c1(x)));
    h = torch::relu(b2(c2(h)) + h);
    return torch::hardtanh(b3(c3(h)), 0, 6).mean({2, 3});
  }
};
TORCH_MODULE(BnActNet);

/// The backward graph after the pass computes what it computed before, on
/// random inputs (statistics included): to 1e-4 of each output's largest
/// value, as the recomputed normalisation rounds as the forward's does
/// (fused) or as four operators do (not), and the difference passes through
/// the convolutions' backwards.
void expect_fused_backward_computes_the_same(fx::GraphModule& before, fx::GraphModule& after) {
  std::vector<c10::IValue> inputs = fx::aot_test::random_placeholder_inputs(before);
  auto want = before.forward(inputs).toList(), have = after.forward(inputs).toList();
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (!want.get(i).isTensor()) continue;
    bn_expect_close(have.get(i).toTensor(), want.get(i).toTensor(), 1e-4, "backward output " + std::to_string(i));
  }
}

// Min cut (batch norms recomputed in backward): every recomputation becomes
// one batch_norm_apply (the residual add and the activations folded in),
// every batch-norm backward behind an activation one batch_norm_act_backward.
TEST(FuseBatchNormActivation, RecomputedBatchNormsAndMaskedBackwards) {
  for (auto format : kBnFormats) {
    torch::manual_seed(0);
    BnActNet net;
    fx::AotOptions options;
    options.partition_fn = fx::min_cut_partition();
    if (format == c10::MemoryFormat::ChannelsLast) options.memory_format = format;
    auto aot = fx::aot_module(net.ptr(), options);
    aot->forward(torch::randn({4, 3, 8, 8})).pow(2).sum().backward();
    auto bw = aot->backward_graph(), copy = graph_copy_of(bw);
    ASSERT_EQ(count_target(bw->graph(), "aten::native_batch_norm_backward"), 3u);
    ASSERT_EQ(count_target(bw->graph(), "aten::threshold_backward"), 2u);
    ASSERT_EQ(count_target(bw->graph(), "aten::hardtanh_backward"), 1u);
    // b1's and b3's backwards (b2's gradient is also the residual's: left).
    // Recomputed: b1 + relu, b2 + add + relu, b3 + hardtanh.
    EXPECT_EQ(fx::fuse_batch_norm_activation(copy->graph()), 5u);
    copy->graph().lint();
    EXPECT_EQ(count_target(copy->graph(), "fxcpp::batch_norm_act_backward"), 2u);
    EXPECT_EQ(count_target(copy->graph(), "aten::native_batch_norm_backward"), 1u);
    EXPECT_EQ(count_target(copy->graph(), "aten::threshold_backward"), 1u);
    EXPECT_EQ(count_target(copy->graph(), "aten::hardtanh_backward"), 0u);
    EXPECT_EQ(count_target(copy->graph(), "fxcpp::batch_norm_apply"), 3u);
    for (const char* gone : {"aten::sub.Tensor", "aten::relu", "aten::hardtanh"})
      EXPECT_EQ(count_target(copy->graph(), gone), 0u) << gone;
    // Left: the residual block's two gradients summed (b1's).
    EXPECT_EQ(count_target(copy->graph(), "aten::add.Tensor"), 1u);
    expect_fused_backward_computes_the_same(*bw, *copy);
  }
}

// Default partition (activations saved): only the backwards fuse.
TEST(FuseBatchNormActivation, SavedActivationsFuseTheBackwardOnly) {
  torch::manual_seed(0);
  BnActNet net;
  auto aot = fx::aot_module(net.ptr());
  aot->forward(torch::randn({4, 3, 8, 8})).pow(2).sum().backward();
  auto bw = aot->backward_graph(), copy = graph_copy_of(bw);
  EXPECT_EQ(fx::fuse_batch_norm_activation(copy->graph()), 2u);
  copy->graph().lint();
  EXPECT_EQ(count_target(copy->graph(), "fxcpp::batch_norm_act_backward"), 2u);
  EXPECT_EQ(count_target(copy->graph(), "fxcpp::batch_norm_apply"), 0u);
  expect_fused_backward_computes_the_same(*bw, *copy);
}

// training_compiler's defaults: the recomputations run as batch_norm_apply
// (the forward's values to the bit); the backward keeps ATen's operators
// (its own rounding only when fuse_batch_norm_backward asks for it).
TEST(FuseBatchNormActivation, DefaultCompilerFusesTheRecomputationOnly) {
  torch::manual_seed(0);
  BnActNet net;
  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();
  auto aot = fx::aot_module(net.ptr(), options);
  const auto calls = fx::aot_test::fxcpp_calls([&] { aot->forward(torch::randn({4, 3, 8, 8})).pow(2).sum().backward(); });
  EXPECT_EQ(calls.count("fxcpp::batch_norm_apply") ? calls.at("fxcpp::batch_norm_apply") : 0, 3);
  EXPECT_EQ(calls.count("fxcpp::batch_norm_act_backward"), 0u);
  fx::TrainingCompileOptions none;
  none.fuse_batch_norm_activation = false;
  options.fw_compiler = options.bw_compiler = fx::training_compiler(none);
  auto plain = fx::aot_module(net.ptr(), options);
  const auto unfused = fx::aot_test::fxcpp_calls([&] { plain->forward(torch::randn({4, 3, 8, 8})).pow(2).sum().backward(); });
  EXPECT_EQ(unfused.count("fxcpp::batch_norm_apply"), 0u);
}

// The whole step, compiled with both rewrites (the second opt-in,
// TrainingCompileOptions::fuse_batch_norm_backward), trains as eager.
TEST(FuseBatchNormActivation, TrainsAsEager) {
  torch::manual_seed(3);
  BnActNet eager;
  BnActNet compiled;
  {
    torch::NoGradGuard no_grad;
    auto pe = eager->parameters(), pc = compiled->parameters();
    for (size_t i = 0; i < pe.size(); ++i) pc[i].copy_(pe[i]);
  }
  fx::AotOptions options;
  options.partition_fn = fx::min_cut_partition();
  fx::TrainingCompileOptions both;
  both.fuse_batch_norm_activation = both.fuse_batch_norm_backward = true;
  options.fw_compiler = options.bw_compiler = fx::training_compiler(both);
  auto aot = fx::aot_module(compiled.ptr(), options);
  torch::optim::SGD se(eager->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD sc(compiled->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = torch::randn({8, 3, 8, 8});
    se.zero_grad();
    sc.zero_grad();
    at::Tensor le = eager->forward(x).pow(2).mean(), lc = aot->forward(x).pow(2).mean();
    le.backward();
    lc.backward();
    EXPECT_LE(std::abs(lc.item<double>() - le.item<double>()), 1e-5 * le.item<double>()) << step;
    se.step();
    sc.step();
  }
  auto pe = eager->named_parameters(), pc = compiled->named_parameters();
  for (const auto& p : pe) bn_expect_close(pc[p.key()], p.value(), 1e-5, p.key());
  auto be = eager->named_buffers(), bc = compiled->named_buffers();
  for (const auto& b : be)
    if (b.value().is_floating_point()) bn_expect_close(bc[b.key()], b.value(), 1e-5, b.key());
}

}  // namespace
