// lower_to_onednn_int8 and the int8 oneDNN kernels: each kernel against the
// reference arithmetic (dequantize → float op → quantize), the lowered small
// network against its reference graph (within one quantum), graph structure,
// the report, and errors.
#include "quant_test_util.h"

#include "../common/error_of.h"

#include <fx/error.h>
#include <fx/onednn_int8.h>
#include <fx/quantization/convert.h>
#include <fx/quantization/lower.h>
#include <fx/quantization/prepare.h>
#include <fx/serialize.h>

#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

using namespace fx::quantization;
using fx::onednn::PackedQState;
using fx::onednn::QuantParams;
using fx_test::error_of;

at::Tensor q(const at::Tensor& x, QuantParams p) { return at::quantize_per_tensor(x, p.scale, p.zero_point, at::kQUInt8); }

/// Random int8 weights and their per-channel scales; `seven_bit`: weights in
/// [-64, 64] (what a weight observer of range [-64, 63] gives), scales doubled.
void random_weight(PackedQState& s, std::vector<int64_t> sizes, bool seven_bit = false) {
  const int64_t limit = seven_bit ? fx::onednn::kMaxWeightFor16BitSums : 127;
  s.weight = torch::randint(-limit, limit + 1, sizes, torch::kChar);
  s.weight_scales = (torch::rand({sizes[0]}) * 0.02 + 0.005) * (seven_bit ? 2 : 1);
}

/// The float weight dequantize(quantize_per_channel) gives.
at::Tensor float_weight(const PackedQState& s) {
  std::vector<int64_t> shape(static_cast<size_t>(s.weight.dim()), 1);
  shape[0] = -1;
  return s.weight.to(at::kFloat) * s.weight_scales.view(shape);
}

at::Tensor activation(const at::Tensor& x, const fx::onednn::PostOps& p) {
  using fx::onednn::Activation;
  switch (p.activation) {
    case Activation::Relu: return torch::relu(x);
    case Activation::Clip: return torch::clamp(x, p.alpha, p.beta);
    case Activation::Silu: return torch::silu(x);
    case Activation::Hardswish: return torch::hardswish(x);
    default: return x;
  }
}

at::Tensor run_qconv(const c10::IValue& packed, const at::Tensor& x, const c10::optional<at::Tensor>& r = c10::nullopt) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_qconv2d", "");
  auto stack = std::vector<c10::IValue>{x, packed, r ? c10::IValue(*r) : c10::IValue()};
  op.callBoxed(&stack);
  return stack[0].toTensor();
}

/// Integer distance between two quint8 tensors of the same qparams.
int64_t max_int_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.int_repr().to(at::kInt) - b.int_repr().to(at::kInt)).abs().max().item<int64_t>();
}

struct ConvCase {
  const char* name;
  int64_t in, out, k, stride, pad, groups;
  fx::onednn::Activation act;
  QuantParams input, output;
  bool residual;
  bool seven_bit = false;  // weights in [-64, 64]: oneDNN's int8 kernels even without VNNI
};

/// gtest names a case by this (not by the bytes of the struct).
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

class QConvKernel : public ::testing::TestWithParam<ConvCase> {};

TEST_P(QConvKernel, MatchesReferenceArithmetic) {
  const ConvCase& c = GetParam();
  torch::manual_seed(3);
  PackedQState s;
  random_weight(s, {c.out, c.in / c.groups, c.k, c.k}, c.seven_bit);
  s.bias = torch::randn({c.out}) * 0.3;
  s.params.stride = {c.stride, c.stride};
  s.params.padding = {c.pad, c.pad};
  s.params.groups = c.groups;
  s.post_ops.activation = c.act;
  if (c.act == fx::onednn::Activation::Clip) s.post_ops.beta = 6.f;
  s.input = c.input;
  s.output = c.output;
  at::Tensor x = q(torch::randn({2, c.in, 9, 9}).abs() * (c.input.zero_point ? 1.0 : 0.5) -
                       (c.input.zero_point ? 0.5 : 0.0),
                   c.input);
  c10::optional<at::Tensor> r;
  if (c.residual) {
    s.post_ops.sum = true;
    s.residual = {0.03, 100};
    const int64_t oh = (9 + 2 * c.pad - c.k) / c.stride + 1;
    r = q(torch::randn({2, c.out, oh, oh}), s.residual).contiguous(at::MemoryFormat::ChannelsLast);
  }
  c10::IValue packed = fx::onednn::pack_int8(s);
  at::Tensor got = run_qconv(packed, x, r);
  at::Tensor ref = torch::conv2d(x.dequantize(), float_weight(s), *s.bias, s.params.stride, s.params.padding,
                                 s.params.dilation, c.groups);
  if (r) ref = ref + r->dequantize();
  ref = q(activation(ref, s.post_ops), s.output);
  ASSERT_EQ(got.scalar_type(), at::kQUInt8);
  EXPECT_EQ(got.q_scale(), s.output.scale);
  EXPECT_EQ(got.q_zero_point(), s.output.zero_point);
  EXPECT_EQ(got.sizes(), ref.sizes());
  EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
  // Rounding of a float computed in another order: at most one step apart.
  EXPECT_LE(max_int_diff(got, ref), 1) << fx::onednn::describe_int8(packed);
  // Without VNNI oneDNN's int8 sums saturate: all but depthwise convolutions and those of 7-bit
  // weights run float32, and a padded int8 one with an input zero point gets its input padded
  // with the zero point.
  const std::string impl = fx::onednn::int8_implementation(packed, x.sizes());
  const bool depthwise = c.groups == c.in && c.groups == c.out;
  const bool vnni = fx::onednn::has_int8_dot_product();
  const bool in_float = !vnni && !depthwise && !c.seven_bit;
  EXPECT_EQ(impl.rfind("float32 ", 0) == 0, in_float) << impl;
  EXPECT_EQ(fx::onednn::int8_computes_in_float(packed), in_float) << impl;
  EXPECT_EQ(impl.find("(input padded with its zero point)") != std::string::npos,
            !vnni && !in_float && c.pad > 0 && c.input.zero_point != 0)
      << impl;
  EXPECT_EQ(error_of([&] { fx::onednn::int8_implementation(packed, {2, c.in + 1, 9, 9}); }),
            "onednn_qconv2d: expected an input [N, " + std::to_string(c.in) + ", H, W], got [2, " +
                std::to_string(c.in + 1) + ", 9, 9]");
  EXPECT_EQ(error_of([&] { fx::onednn::int8_implementation(packed, {2, c.in}); }),
            "onednn_qconv2d: expected an input [N, " + std::to_string(c.in) + ", H, W], got [2, " +
                std::to_string(c.in) + "]");
  // Not a degenerate case: the output spans many steps.
  EXPECT_GT(got.int_repr().to(at::kInt).max().item<int>() - got.int_repr().to(at::kInt).min().item<int>(), 40);
}

using A = fx::onednn::Activation;
INSTANTIATE_TEST_SUITE_P(
    Cases, QConvKernel,
    ::testing::Values(ConvCase{"relu3x3", 16, 32, 3, 1, 1, 1, A::Relu, {0.02, 0}, {0.05, 0}, false},
                      ConvCase{"relu3x3_full_range", 16, 32, 3, 1, 1, 1, A::Relu, {0.004, 0}, {0.02, 0}, false},
                      ConvCase{"pointwise_full_range", 32, 16, 1, 1, 0, 1, A::None, {0.004, 0}, {0.02, 128},
                               false},
                      ConvCase{"stem_input_zero_point", 3, 16, 3, 2, 1, 1, A::Relu, {0.02, 128}, {0.05, 0}, false},
                      ConvCase{"no_activation_output_zero_point", 16, 8, 1, 1, 0, 1, A::None, {0.02, 0}, {0.05, 120}, false},
                      ConvCase{"pointwise_input_zero_point", 16, 24, 1, 1, 0, 1, A::Silu, {0.02, 90}, {0.04, 20}, false},
                      ConvCase{"depthwise_input_zero_point", 16, 16, 3, 1, 1, 16, A::Silu, {0.02, 90}, {0.04, 20}, false},
                      ConvCase{"depthwise_clip", 16, 16, 3, 1, 1, 16, A::Clip, {0.02, 0}, {0.03, 0}, false},
                      ConvCase{"depthwise_full_range", 16, 16, 3, 2, 1, 16, A::Clip, {0.004, 120}, {0.01, 0},
                               false},
                      ConvCase{"grouped_full_range", 16, 16, 3, 1, 1, 4, A::Relu, {0.004, 0}, {0.02, 0}, true},
                      ConvCase{"silu_real_domain", 16, 16, 3, 1, 1, 1, A::Silu, {0.02, 0}, {0.04, 20}, false},
                      ConvCase{"hardswish_real_domain", 8, 16, 1, 1, 0, 1, A::Hardswish, {0.02, 0}, {0.04, 30}, false},
                      ConvCase{"residual_relu", 16, 16, 3, 1, 1, 1, A::Relu, {0.02, 0}, {0.05, 0}, true},
                      ConvCase{"residual_no_activation", 16, 16, 1, 1, 0, 1, A::None, {0.02, 0}, {0.06, 128}, true},
                      ConvCase{"relu3x3_7bit_full_range", 16, 32, 3, 1, 1, 1, A::Relu, {0.004, 0}, {0.04, 0}, false,
                               true},
                      ConvCase{"pointwise_7bit_full_range", 32, 16, 1, 1, 0, 1, A::None, {0.004, 0}, {0.04, 128},
                               false, true},
                      ConvCase{"stem_7bit_input_zero_point", 3, 16, 3, 2, 1, 1, A::Relu, {0.02, 128}, {0.1, 0},
                               false, true},
                      ConvCase{"grouped_7bit_full_range", 16, 16, 3, 1, 1, 4, A::Relu, {0.004, 0}, {0.04, 0}, true,
                               true},
                      ConvCase{"residual_7bit_silu", 16, 16, 3, 1, 1, 1, A::Silu, {0.004, 0}, {0.08, 20}, true,
                               true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(QLinearKernel, MatchesReferenceArithmetic) {
  torch::manual_seed(4);
  for (bool seven_bit : {false, true}) {
    for (bool relu : {false, true}) {
      for (bool to_float : {false, true}) {
        for (int64_t zero_point : {0, 128}) {
          for (bool bias : {false, true}) {
            PackedQState s;
            s.kind = fx::onednn::PackedState::Kind::Linear;
            random_weight(s, {24, 40}, seven_bit);
            if (bias) s.bias = torch::randn({24}) * 0.3;
            if (relu) s.post_ops.activation = A::Relu;
            s.input = {0.02, zero_point};
            s.output = {0.05, relu ? 0 : 128};
            s.output_float = to_float;
            // Full range: about a third of the inputs at 0 or 255.
            at::Tensor x = q(torch::randn({5, 40}) * (seven_bit ? 3 : 1), s.input);
            static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_qlinear", "");
            const c10::IValue packed = fx::onednn::pack_int8(s);
            auto stack = std::vector<c10::IValue>{x, packed};
            op.callBoxed(&stack);
            at::Tensor got = stack[0].toTensor();
            at::Tensor ref = torch::linear(x.dequantize(), float_weight(s), s.bias ? *s.bias : at::Tensor());
            if (relu) ref = torch::relu(ref);
            const std::string what = std::string(seven_bit ? "7-bit " : "8-bit ") + (relu ? "relu" : "none") +
                                     (to_float ? " float" : " quint8") + " zero point " + std::to_string(zero_point) +
                                     (bias ? " bias" : "");
            // Without VNNI only 7-bit weights run on oneDNN's int8 matmul.
            const bool in_float = !fx::onednn::has_int8_dot_product() && !seven_bit;
            EXPECT_EQ(fx::onednn::int8_computes_in_float(packed), in_float) << what;
            EXPECT_EQ(fx::onednn::int8_implementation(packed, x.sizes()).rfind("aten:float", 0) == 0, in_float) << what;
            if (to_float) {
              ASSERT_EQ(got.scalar_type(), at::kFloat);
              // The bias is rounded to the accumulator's int32 units: half a step of input x weight scale.
              EXPECT_TRUE(torch::allclose(got, ref, 1e-4, 1e-3)) << what << ": " << (got - ref).abs().max();
            } else {
              EXPECT_LE(max_int_diff(got, q(ref, s.output)), 1) << what;
            }
          }
        }
      }
    }
  }
}

// The largest sums 7-bit weights give: every input 255 against weights of +-64, so each pair of
// u8 x s8 products oneDNN sums in 16 bits without VNNI is +-32640, one step from saturating.
// Computed exactly (float output: no rounding to an output scale), on oneDNN's int8 kernels.
TEST(QConvKernel, SevenBitWeightsAtTheirLimitsAreExact) {
  const int64_t limit = fx::onednn::kMaxWeightFor16BitSums;
  for (bool conv : {true, false}) {
    PackedQState s;
    s.kind = conv ? fx::onednn::PackedState::Kind::Conv2d : fx::onednn::PackedState::Kind::Linear;
    const int64_t in = 32, out = 4;
    // Output channels: all +64, all -64, alternating +-64 along the input channels, +64 and -63.
    at::Tensor w = torch::empty({out, in}, torch::kChar);
    at::Tensor alternate = (torch::arange(in) % 2 * 2 - 1).to(torch::kChar) * limit;
    w[0].fill_(limit);
    w[1].fill_(-limit);
    w[2].copy_(alternate);
    w[3].copy_(torch::where(torch::arange(in) % 2 == 0, torch::full({in}, limit), torch::full({in}, 1 - limit))
                   .to(torch::kChar));
    s.weight = conv ? w.view({out, in, 1, 1}).expand({out, in, 3, 3}).contiguous() : w;
    s.weight_scales = torch::full({out}, 0.01);
    s.params.padding = {1, 1};
    s.input = {1.0 / 255, 0};
    s.output_float = true;
    at::Tensor ones = conv ? torch::ones({1, in, 5, 5}) : torch::ones({3, in});
    at::Tensor x = q(ones, s.input);
    ASSERT_EQ(x.int_repr().min().item<int>(), 255);
    const c10::IValue packed = fx::onednn::pack_int8(s);
    at::Tensor got;
    if (conv) {
      got = run_qconv(packed, x);
    } else {
      static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_qlinear", "");
      auto stack = std::vector<c10::IValue>{x, packed};
      op.callBoxed(&stack);
      got = stack[0].toTensor();
    }
    at::Tensor ref = conv ? torch::conv2d(x.dequantize(), float_weight(s), {}, 1, 1)
                          : torch::linear(x.dequantize(), float_weight(s));
    EXPECT_FALSE(fx::onednn::int8_computes_in_float(packed));
    EXPECT_TRUE(torch::allclose(got, ref, 1e-5, 1e-4)) << (conv ? "conv: " : "linear: ") << (got - ref).abs().max()
                                                       << " " << fx::onednn::int8_implementation(packed, x.sizes());
    // The interior pixel of channel 0 sums 9 x 32 products 1.0 x 0.64.
    if (conv) {
      EXPECT_NEAR(got[0][0][2][2].item<double>(), 9 * 32 * 0.64, 1e-3);
    }
    // One weight beyond the bound (-128, whose int8 absolute value is itself): float32 without VNNI.
    s.weight = s.weight.clone();
    s.weight.view({-1})[5] = -128;
    EXPECT_EQ(fx::onednn::int8_computes_in_float(fx::onednn::pack_int8(s)), !fx::onednn::has_int8_dot_product());
    s.weight.view({-1})[5] = 65;
    EXPECT_EQ(fx::onednn::int8_computes_in_float(fx::onednn::pack_int8(s)), !fx::onednn::has_int8_dot_product());
  }
}

TEST(OnednnQuantize, MatchesQuantizePerTensorInChannelsLast) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_quantize", "");
  torch::manual_seed(5);
  for (bool channels_last : {false, true}) {
    at::Tensor x = torch::randn({2, 3, 17, 19}) * 2;
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    auto stack = std::vector<c10::IValue>{x, 0.031, int64_t{117}};
    op.callBoxed(&stack);
    at::Tensor got = stack[0].toTensor();
    at::Tensor want = q(x, {0.031, 117});
    EXPECT_TRUE(got.is_contiguous(at::MemoryFormat::ChannelsLast));
    EXPECT_EQ(got.q_scale(), 0.031);
    EXPECT_EQ(got.q_zero_point(), 117);
    // x * (1 / scale) against x / scale: a tie may round the other way.
    EXPECT_LE(max_int_diff(got, want), 1);
    EXPECT_LT((got.int_repr() != want.int_repr()).sum().item<int64_t>(), 5);
    EXPECT_GT(got.int_repr().eq(255).sum().item<int64_t>(), 0);  // saturates as quantize_per_tensor
  }
  auto stack = std::vector<c10::IValue>{torch::ones({1, 1, 2, 2}), 0.0, int64_t{0}};
  EXPECT_EQ(error_of([&] { op.callBoxed(&stack); }),
            "onednn_quantize: the scale must be > 0 and the zero point in [0, 255], got scale 0.000000, zero point 0");
}

// An empty batch gives an empty output and runs no kernel (oneDNN 2.6 divides
// by zero creating some AVX-512 primitives for zero rows).
TEST(QConvKernel, EmptyBatchesGiveEmptyOutputs) {
  torch::manual_seed(6);
  PackedQState conv;
  random_weight(conv, {8, 4, 3, 3});
  conv.params.padding = {1, 1};
  conv.input = {0.02, 0};
  conv.output = {0.05, 0};
  const at::Tensor x = q(torch::randn({0, 4, 9, 9}), conv.input).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor y = run_qconv(fx::onednn::pack_int8(conv), x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{0, 8, 9, 9}));
  EXPECT_EQ(y.q_scale(), 0.05);
  PackedQState linear;
  linear.kind = fx::onednn::PackedState::Kind::Linear;
  random_weight(linear, {24, 40});
  linear.input = {0.02, 0};
  linear.output = {0.05, 128};
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("fxcpp::onednn_qlinear", "");
  auto stack = std::vector<c10::IValue>{q(torch::randn({0, 40}), linear.input), fx::onednn::pack_int8(linear)};
  op.callBoxed(&stack);
  EXPECT_EQ(stack[0].toTensor().sizes(), (std::vector<int64_t>{0, 24}));
}

TEST(QConvKernel, Errors) {
  PackedQState s;
  random_weight(s, {8, 4, 3, 3});
  s.input = {0.02, 0};
  s.output = {0.05, 0};
  c10::IValue packed = fx::onednn::pack_int8(s);
  EXPECT_EQ(error_of([&] { run_qconv(packed, q(torch::rand({1, 4, 5, 5}), {0.03, 0})); }),
            "onednn_qconv2d: the input is quantized with scale 0.03, zero point 0, the kernel was packed for scale "
            "0.02, zero point 0");
  EXPECT_EQ(error_of([&] { run_qconv(packed, torch::rand({1, 4, 5, 5})); }),
            "onednn_qconv2d: the input must be a quint8 per-tensor quantized tensor, got Float");
  EXPECT_EQ(error_of([&] { run_qconv(packed, q(torch::rand({1, 3, 5, 5}), s.input)); }),
            "onednn_qconv2d: expected an input [N, 4, H, W], got [1, 3, 5, 5]");
  PackedQState bad = s;
  bad.weight = bad.weight.to(at::kFloat);
  EXPECT_EQ(error_of([&] { fx::onednn::pack_int8(bad); }), "onednn_qconv2d: the weight must be an int8 (torch.int8) tensor");
  bad = s;
  bad.output = {0.05, 300};
  EXPECT_EQ(error_of([&] { fx::onednn::pack_int8(bad); }),
            "onednn_qconv2d: the output scale must be > 0 and its zero point in [0, 255], got scale 0.050000, zero "
            "point 300");
}

// ---- the pass ------------------------------------------------------------------

std::shared_ptr<fx::GraphModule> reference_of_small_net() {
  auto prepared = prepare(quant_test::small_net(), get_default_qconfig_mapping("onednn"), {quant_test::small_input(1)});
  for (int64_t seed = 1; seed <= 8; ++seed) prepared->forward({quant_test::small_input(seed, 4)});
  return convert(prepared);
}

std::string targets(const fx::GraphModule& gm) {
  std::string s;
  for (const fx::Node* n : gm.graph().nodes())
    if (n->op() == fx::Opcode::CallFunction || n->op() == fx::Opcode::CallMethod || n->op() == fx::Opcode::CallModule)
      s += n->name() + "=" + n->target() + " ";
  return s;
}

/// The lowered small net against its reference graph on four inputs: within two quanta of the
/// output's `scale` at most, half a quantum on average, on outputs of more than ten quanta.
void expect_within_two_quanta(fx::GraphModule& reference, fx::GraphModule& lowered, double scale) {
  for (int64_t seed = 20; seed < 24; ++seed) {
    at::Tensor x = quant_test::small_input(seed, 3);
    at::Tensor want = reference.forward({x}).toTensor();
    at::Tensor got = lowered.forward({x}).toTensor();
    EXPECT_LE((got - want).abs().max().item<double>(), scale * 2.01) << "seed " << seed;
    EXPECT_LE((got - want).abs().mean().item<double>(), scale * 0.5) << "seed " << seed;
    EXPECT_GT(want.abs().max().item<double>(), 10 * scale);
  }
}

TEST(LowerInt8, SmallNetStructureAndValues) {
  auto reference = reference_of_small_net();
  const std::string before = targets(*reference);
  LowerReport report;
  auto lowered = lower_to_onednn_int8(reference, &report);
  EXPECT_EQ(targets(*reference), before);  // the input is not changed
  EXPECT_EQ(report.int8_kernels, 3u);
  // conv1 (+relu) and conv2 with the residual add and relu2 fused, max pool and flatten on
  // quint8; fc int8, its output dequantized and the functional relu in float between dq and q.
  EXPECT_EQ(targets(*lowered),
            "quantize_per_tensor=fxcpp::onednn_quantize conv1=fxcpp::onednn_qconv2d "
            "pool=aten::max_pool2d conv2=fxcpp::onednn_qconv2d flatten=aten::flatten fc=fxcpp::onednn_qlinear "
            "dequantize_9=dequantize ")
      << lowered->print_readable();
  const std::string table = report.str();
  EXPECT_NE(table.find("conv2  aten::conv2d  quantized  int8 oneDNN convolution, +residual, relu"), std::string::npos) << table;
  EXPECT_NE(table.find("add  aten::add  quantized  fused into conv2 (residual sum)"), std::string::npos) << table;
  EXPECT_NE(table.find("pool  aten::max_pool2d  quantized  runs on quint8"), std::string::npos) << table;
  // Within two quanta of the output's scale of the reference graph: each kernel rounds where the
  // reference rounds (up to one step apart), and the fused residual sum skips the reference's
  // rounding of conv2's own output, which the 64 inputs of fc can add up to one more step.
  double scale = 0;
  for (const fx::Node* n : lowered->graph().nodes())
    if (n->name() == "fc") scale = fx::onednn::packed_int8_state(n->args()[1].to_ivalue()).output.scale;
  ASSERT_GT(scale, 0);
  expect_within_two_quanta(*reference, *lowered, scale);
  // The float weights are not kept.
  for (const auto& p : lowered->named_parameters()) ADD_FAILURE() << "kept " << p.key();
}

// 7-bit weights (with_weight_range(-64, 63)): every kernel runs on oneDNN's int8 kernels, on
// every CPU; 8-bit ones compute in float32 without VNNI. Both within two quanta of their
// reference graphs, as above.
TEST(LowerInt8, SevenBitWeightsRunOnInt8KernelsEverywhere) {
  const bool vnni = fx::onednn::has_int8_dot_product();
  LowerReport eight;
  lower_to_onednn_int8(reference_of_small_net(), &eight);
  EXPECT_EQ(eight.int8_kernels, 3u);
  EXPECT_EQ(eight.float_kernels, vnni ? 0u : 3u);

  auto prepared = prepare(quant_test::small_net(), get_default_qconfig_mapping("onednn").with_weight_range(-64, 63),
                          {quant_test::small_input(1)});
  for (int64_t seed = 1; seed <= 8; ++seed) prepared->forward({quant_test::small_input(seed, 4)});
  auto reference = convert(prepared);
  LowerReport report;
  auto lowered = lower_to_onednn_int8(reference, &report);
  EXPECT_EQ(report.int8_kernels, 3u);
  EXPECT_EQ(report.float_kernels, 0u);
  double scale = 0;
  int kernels = 0;
  for (const fx::Node* n : lowered->graph().nodes()) {
    if (n->target() != "fxcpp::onednn_qconv2d" && n->target() != "fxcpp::onednn_qlinear") continue;
    ++kernels;
    const c10::IValue packed = n->args()[1].to_ivalue();
    const PackedQState s = fx::onednn::packed_int8_state(packed);
    // scale = max |w| / 63.5: the largest weight is 63.5 steps, which convert clamps to the
    // observer's 63 (quantize_per_channel alone would round it to 64 in some channels).
    EXPECT_EQ(s.weight.max().item<int64_t>(), 63) << n->name();
    EXPECT_GE(s.weight.min().item<int64_t>(), -64) << n->name();
    EXPECT_FALSE(fx::onednn::int8_computes_in_float(packed)) << n->name();
    if (n->name() == "fc") scale = s.output.scale;
  }
  EXPECT_EQ(kernels, 3);
  ASSERT_GT(scale, 0);
  expect_within_two_quanta(*reference, *lowered, scale);
}

TEST(LowerInt8, SaveLoadBitForBit) {
  auto lowered = lower_to_onednn_int8(reference_of_small_net());
  const std::string path = ::testing::TempDir() + "/small_int8.fx";
  fx::save(*lowered, path);
  auto loaded = fx::load(path);
  EXPECT_EQ(targets(*loaded), targets(*lowered));
  for (int64_t seed = 30; seed < 33; ++seed) {
    at::Tensor x = quant_test::small_input(seed, 2);
    EXPECT_TRUE(at::equal(loaded->forward({x}).toTensor(), lowered->forward({x}).toTensor()));
  }
  // The kernels' state survives: int8 weights, scales, qparams.
  for (const fx::Node* n : loaded->graph().nodes()) {
    if (n->target() != "fxcpp::onednn_qconv2d" || n->name() != "conv2") continue;
    auto s = fx::onednn::packed_int8_state(n->args()[1].to_ivalue());
    EXPECT_EQ(s.weight.scalar_type(), at::kChar);
    EXPECT_TRUE(s.post_ops.sum);
    EXPECT_EQ(s.post_ops.activation, fx::onednn::Activation::Relu);
  }
}

TEST(LowerInt8, Errors) {
  auto gm = quant_test::small_net();
  EXPECT_EQ(error_of([&] { lower_to_onednn_int8(gm); }),
            "lower_to_onednn_int8: the graph has no quantize_per_tensor node to quint8: convert() a prepared, "
            "calibrated module first");
  gm->train();
  EXPECT_EQ(error_of([&] { lower_to_onednn_int8(gm); }),
            "lower_to_onednn_int8: module 'conv1' is in training mode; call eval() first");
}

}  // namespace
