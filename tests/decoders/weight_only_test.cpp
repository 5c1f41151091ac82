// fx::decoders weight-only quantized linear layers (weight_only.h): packing
// within half a step, the product against the float reference within the
// bound the activations' rounding allows, every kernel this CPU runs against
// the scalar one, the kernel chosen, the fxcpp::linear_weight_only operator
// (values and meta shapes), bias, and every error's text.
#include <fx/decoders/weight_only.h>

#include "decoders/weight_only_kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

// A named namespace: the test files are compiled in unity batches.
namespace weight_only_test {

using fx::decoders::PackedWeightOnly;
using fx::decoders::WeightOnlyScheme;

struct Case {
  int bits;
  int64_t group;
  bool symmetric;
  /// K: not a multiple of 64 where the group allows it.
  int64_t k() const { return group == 0 ? 100 : group == 32 ? 96 : group == 64 ? 192 : 384; }
  std::string name() const {
    return "int" + std::to_string(bits) + " group " + std::to_string(group) + (symmetric ? " symmetric" : " asymmetric");
  }
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (bool symmetric : {true, false}) {
    for (int64_t g : {0, 32, 64, 128}) cases.push_back({8, g, symmetric});
    for (int64_t g : {32, 64, 128}) cases.push_back({4, g, symmetric});
  }
  return cases;
}

constexpr int64_t kN = 37;  // odd

/// A weight with a row of zeros, one of positives only and an outlier.
at::Tensor weight_for(const Case& c) {
  at::Tensor w = at::randn({kN, c.k()});
  w[3].zero_();
  w[5].abs_();
  w[7][11] = 9.f;
  return w;
}

/// Each element's step: its group's scale.
at::Tensor steps(const PackedWeightOnly& p) {
  const int64_t group = p.scheme.group_size ? p.scheme.group_size : p.in_features;
  return p.scales.repeat_interleave(group, 1);
}

/// The activations' steps per element: max |x| / 127 over its block of 32 along K (the kernels' Q8_0 rounding).
at::Tensor activation_steps(const at::Tensor& x2) {
  const int64_t k = x2.size(1), blocks = (k + 31) / 32;
  at::Tensor padded = at::constant_pad_nd(x2, {0, blocks * 32 - k});
  at::Tensor d = std::get<0>(padded.abs().view({x2.size(0), blocks, 32}).max(-1)) / 127;
  return d.repeat_interleave(32, 1).narrow(1, 0, k);
}

at::Tensor call_op(const at::Tensor& x, const PackedWeightOnly& p, const c10::optional<at::Tensor>& bias) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("fxcpp::linear_weight_only", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const c10::optional<at::Tensor>&, int64_t, int64_t, int64_t,
                                         const c10::optional<at::Tensor>&)>();
  c10::optional<at::Tensor> zeros;
  if (p.zeros.defined()) zeros = p.zeros;
  return op.call(x, p.data, p.scales, zeros, p.scheme.bits, p.scheme.group_size, p.in_features, bias);
}

void expect_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error, expected: " << text;
  } catch (const fx::Error& e) {
    EXPECT_EQ(e.what(), text);
  }
}

std::vector<std::string> kernels_here() {
  std::vector<std::string> out{"scalar"};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) out.push_back("avx2");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni")) {
    out.push_back("avx512-vnni-gemm");  // the prompt kernel, for any rows
    out.push_back("avx512-vnni");       // the decode kernel, the best: last
  }
  return out;
}

TEST(WeightOnly, PackedLayoutAndDequantizeWithinHalfAStep) {
  at::manual_seed(0);
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.name());
    const at::Tensor w = weight_for(c);
    const PackedWeightOnly p = fx::decoders::pack_weight_only(w.to(at::kDouble), {c.bits, c.group, c.symmetric});
    const int64_t groups = c.group ? c.k() / c.group : 1;
    EXPECT_EQ(p.out_features, kN);
    EXPECT_EQ(p.in_features, c.k());
    EXPECT_EQ(p.data.scalar_type(), c.bits == 8 ? at::kChar : at::kByte);
    EXPECT_EQ(p.data.sizes(), (std::vector<int64_t>{kN, c.bits == 8 ? c.k() : c.k() / 2}));
    EXPECT_EQ(p.scales.sizes(), (std::vector<int64_t>{kN, groups}));
    EXPECT_EQ(p.zeros.defined(), !c.symmetric);
    const at::Tensor deq = fx::decoders::dequantize_weight_only(p);
    ASSERT_EQ(deq.sizes(), w.sizes());
    // Half a step, and float32's rounding of w / scale.
    const at::Tensor excess = (deq - w).abs() - (steps(p) * 0.5 * (1 + 1e-5) + 1e-7);
    EXPECT_LE(excess.max().item<double>(), 0.0);
    EXPECT_EQ(deq[3].abs().max().item<double>(), 0.0);  // the zero row stays zero
  }
}

// The kernels round each activation to its block's step d = max |x| / 127, so
// |x - d·q| <= d / 2 and each output is off the float reference x @ W.T by at
// most Σ_k |W_nk| · d_k / 2; float32's sums add a relative 1e-5 of Σ |W||x|.
TEST(WeightOnly, LinearWithinTheActivationRoundingBound) {
  at::manual_seed(1);
  for (const Case& c : all_cases()) {
    const at::Tensor w = weight_for(c);
    const PackedWeightOnly p = fx::decoders::pack_weight_only(w, {c.bits, c.group, c.symmetric});
    const at::Tensor deq = fx::decoders::dequantize_weight_only(p).to(at::kDouble);
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{c.k()}, {3, c.k()}, {7, c.k()}, {2, 32, c.k()}}) {
      SCOPED_TRACE(c.name() + " x " + c10::str(at::IntArrayRef(shape)));
      const at::Tensor x = at::randn(shape);
      const at::Tensor y = fx::decoders::linear_weight_only(x, p);
      std::vector<int64_t> out_shape = shape;
      out_shape.back() = kN;
      ASSERT_EQ(y.sizes(), out_shape);
      ASSERT_EQ(y.scalar_type(), at::kFloat);
      const at::Tensor x2 = x.reshape({-1, c.k()}).to(at::kDouble);
      const at::Tensor ref = at::matmul(x2, deq.t());
      const at::Tensor bound = at::matmul(activation_steps(x2) * 0.5, deq.abs().t()) +
                               1e-5 * at::matmul(x2.abs(), deq.abs().t()) + 1e-6;
      const at::Tensor err = (y.reshape({-1, kN}).to(at::kDouble) - ref).abs();
      EXPECT_LE((err - bound).max().item<double>(), 0.0);
      // Not only within the worst case: the rounding errors mostly cancel.
      EXPECT_LT(err.mean().item<double>(), 0.25 * bound.mean().item<double>());
    }
  }
}

// Every kernel this CPU runs quantizes the activations alike and sums the same
// integers: only float32's order differs (its terms as large as (|w| + 136 s) · |x|,
// VNNI's int8 offset 128 and int4's zero 8 included).
TEST(WeightOnly, EveryKernelHereEqualsTheScalarOne) {
  at::manual_seed(2);
  for (const Case& c : all_cases()) {
    const at::Tensor w = weight_for(c);
    const PackedWeightOnly p = fx::decoders::pack_weight_only(w, {c.bits, c.group, c.symmetric});
    const at::Tensor bias = at::randn({kN});
    const at::Tensor magnitude = fx::decoders::dequantize_weight_only(p).abs() + 136 * steps(p);
    for (int64_t rows : {1, 3, 6, 7, 64}) {  // tiles of 1 to 4 rows
      const at::Tensor x = at::randn({rows, c.k()});
      const at::Tensor want = fx::decoders::detail::linear_weight_only_with("scalar", x, p, bias);
      const at::Tensor tolerance = 1e-5 * at::matmul(x.abs(), magnitude.t()) + 1e-5;
      for (const std::string& kernel : kernels_here()) {
        SCOPED_TRACE(c.name() + ", " + std::to_string(rows) + " rows, " + kernel);
        const at::Tensor got = fx::decoders::detail::linear_weight_only_with(kernel, x, p, bias);
        EXPECT_LE(((got - want).abs() - tolerance).max().item<double>(), 0.0);
      }
    }
  }
}

// Decoder-sized rows (K = 2048: 16 to 32 whole chunks, the kernels' unrolled
// pairs), a strided x, and a NaN activation (its row's outputs NaN, as in float).
// VNNI's kernels read 16 blocks (512 weights) at a time: K past whole units
// (2304 = 4.5 units, 1056 = 2 units and a block, int8 per channel 1100: and a
// short block), every group size, both kinds of zero point.
TEST(WeightOnly, RowsPastWholeUnitsEqualTheScalarKernel) {
  at::manual_seed(9);
  for (int bits : {8, 4})
    for (int64_t k : {1056, 1100, 2304})
      for (int64_t g : {0, 32, 64, 128})
        for (bool symmetric : {true, false}) {
          if ((g == 0 && bits == 4) || (g && k % g)) continue;
          SCOPED_TRACE("K " + std::to_string(k) + ", " + (Case{bits, g, symmetric}).name());
          const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({13, k}), {bits, g, symmetric});
          const at::Tensor magnitude = fx::decoders::dequantize_weight_only(p).abs() + 136 * steps(p);
          for (int64_t rows : {1, 6}) {
            const at::Tensor x = at::randn({rows, k});
            const at::Tensor want = fx::decoders::detail::linear_weight_only_with("scalar", x, p);
            const at::Tensor tolerance = 1e-5 * at::matmul(x.abs(), magnitude.t()) + 1e-5;
            for (const std::string& kernel : kernels_here()) {
              SCOPED_TRACE(kernel + ", " + std::to_string(rows) + " rows");
              const at::Tensor got = fx::decoders::detail::linear_weight_only_with(kernel, x, p);
              EXPECT_LE(((got - want).abs() - tolerance).max().item<double>(), 0.0);
            }
          }
        }
}

TEST(WeightOnly, LongRowsStridedInputAndNaN) {
  at::manual_seed(6);
  const at::Tensor x = at::randn({2048, 5}).t();  // [5, 2048], not contiguous
  for (const Case& c : {Case{8, 0, true}, Case{8, 128, false}, Case{4, 32, true}, Case{4, 128, false}}) {
    SCOPED_TRACE(c.name());
    const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({21, 2048}), {c.bits, c.group, c.symmetric});
    const at::Tensor want = fx::decoders::detail::linear_weight_only_with("scalar", x.contiguous(), p);
    const at::Tensor magnitude = fx::decoders::dequantize_weight_only(p).abs() + 136 * steps(p);
    const at::Tensor tolerance = 1e-5 * at::matmul(x.abs(), magnitude.t()) + 1e-5;
    for (const std::string& kernel : kernels_here()) {
      SCOPED_TRACE(kernel);
      const at::Tensor got = fx::decoders::detail::linear_weight_only_with(kernel, x, p);
      EXPECT_LE(((got - want).abs() - tolerance).max().item<double>(), 0.0);
      at::Tensor bad = x.contiguous();
      bad[2][1000] = std::numeric_limits<float>::quiet_NaN();
      const at::Tensor y = fx::decoders::detail::linear_weight_only_with(kernel, bad, p);
      EXPECT_TRUE(y[2].isnan().all().item<bool>());
      EXPECT_FALSE(y[1].isnan().any().item<bool>());
    }
  }
}

TEST(WeightOnly, KernelChosenFromTheCpuFeatures) {
  const std::string best = kernels_here().back();
  EXPECT_EQ(fx::decoders::weight_only_kernel(8), best);
  EXPECT_EQ(fx::decoders::weight_only_kernel(4), best);
  at::manual_seed(3);
  const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({kN, 128}), {4, 32, true});
  const at::Tensor x = at::randn({5, 128});
  EXPECT_TRUE(at::equal(fx::decoders::linear_weight_only(x, p), fx::decoders::detail::linear_weight_only_with(best, x, p)));
}

// The AVX2 layout's activations (the prompt GEMM's too), quantized by the
// AVX-512 loop where the CPU has it, equal the scalar loop's to the bit:
// values, steps and group sums, a short last block, a zero block, a NaN.
TEST(WeightOnly, VectorActivationQuantizationEqualsTheScalarLoop) {
  namespace d = fx::decoders::detail;
  at::manual_seed(8);
  for (const Case& c : {Case{8, 0, true}, Case{4, 32, true}, Case{4, 128, false}}) {
    SCOPED_TRACE(c.name());
    const int64_t k = c.bits == 8 ? 1100 : 1152;
    const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({3, k}), {c.bits, c.group, c.symmetric});
    d::WeightOnlyView v;
    v.bits = c.bits;
    v.n = 3;
    v.k = k;
    v.groups = p.scales.size(1);
    v.group_blocks = c.group / 32;
    v.group_shift = v.group_blocks == 4 ? 2 : v.group_blocks == 2 ? 1 : v.group_blocks == 1 ? 0 : 62;
    at::Tensor x = at::randn({4, k}) * 3;
    x[1].narrow(0, 64, 32).zero_();
    x[2][100] = std::numeric_limits<float>::quiet_NaN();
    const d::WeightOnlyActivations want = d::quantize_activations(d::WeightOnlyIsa::Scalar, v, x.data_ptr<float>(), 4, k);
    const d::WeightOnlyActivations got = d::quantize_activations(d::WeightOnlyIsa::Avx2, v, x.data_ptr<float>(), 4, k);
    EXPECT_EQ(got.q, want.q);
    ASSERT_EQ(got.d.size(), want.d.size());
    for (size_t i = 0; i < want.d.size(); ++i)
      EXPECT_TRUE(got.d[i] == want.d[i] || (std::isnan(got.d[i]) && std::isnan(want.d[i]))) << "step " << i;
    ASSERT_EQ(got.xsum.size(), want.xsum.size());
    for (size_t i = 0; i < want.xsum.size(); ++i)
      EXPECT_TRUE(got.xsum[i] == want.xsum[i] || (std::isnan(got.xsum[i]) && std::isnan(want.xsum[i])))
          << "group sum " << i;
  }
}

// From 16 rows (a prompt) a VNNI CPU runs the panel GEMM: it ran (its panel
// count grew by the output's panels of 16), with the values of the kernel
// named for it; a single row (decoding) does not.
TEST(WeightOnly, PromptsRunThePanelGemmOnVnni) {
  if (kernels_here().back() != "avx512-vnni") GTEST_SKIP() << "no AVX-512 VNNI on this CPU: the decode kernel serves prompts";
  at::manual_seed(4);
  for (const Case& c : {Case{8, 0, true}, Case{4, 32, true}, Case{4, 64, false}}) {
    SCOPED_TRACE(c.name());
    const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({40, 256}), {c.bits, c.group, c.symmetric});
    const at::Tensor x = at::randn({2, 9, 256});  // 18 rows
    const size_t before = fx::decoders::detail::weight_only_gemm_panels();
    const at::Tensor y = fx::decoders::linear_weight_only(x, p);
    EXPECT_EQ(fx::decoders::detail::weight_only_gemm_panels() - before, 3u);  // 40 channels: 16 + 16 + 8
    EXPECT_TRUE(at::equal(y, fx::decoders::detail::linear_weight_only_with("avx512-vnni-gemm", x, p)));
    const size_t decode_before = fx::decoders::detail::weight_only_gemm_panels();
    fx::decoders::linear_weight_only(x[0][0], p);
    EXPECT_EQ(fx::decoders::detail::weight_only_gemm_panels(), decode_before);
  }
}

TEST(WeightOnly, BiasAndOtherFloatDtypes) {
  at::manual_seed(4);
  const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({kN, 96}), {8, 32, false});
  const at::Tensor x = at::randn({4, 96}), bias = at::randn({kN});
  const at::Tensor without = fx::decoders::linear_weight_only(x, p);
  const at::Tensor with = fx::decoders::linear_weight_only(x, p, bias);
  EXPECT_TRUE(at::allclose(with - without, bias.expand({4, kN}), 1e-5, 1e-5));
  // A bias of another float dtype is converted; a half input gives a half output.
  EXPECT_TRUE(at::allclose(fx::decoders::linear_weight_only(x, p, bias.to(at::kDouble)), with));
  const at::Tensor half = fx::decoders::linear_weight_only(x.to(at::kHalf), p, bias);
  EXPECT_EQ(half.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::allclose(half.to(at::kFloat), fx::decoders::linear_weight_only(x.to(at::kHalf).to(at::kFloat), p, bias),
                           1e-3, 1e-3));
  // No rows: an empty result.
  EXPECT_EQ(fx::decoders::linear_weight_only(at::randn({0, 96}), p, bias).sizes(), (std::vector<int64_t>{0, kN}));
}

TEST(WeightOnly, TheOperatorGivesTheSameValuesAndMetaShapes) {
  at::manual_seed(5);
  for (const Case& c : {Case{8, 0, true}, Case{4, 32, true}, Case{4, 64, false}}) {
    SCOPED_TRACE(c.name());
    const PackedWeightOnly p = fx::decoders::pack_weight_only(at::randn({kN, c.k()}), {c.bits, c.group, c.symmetric});
    const at::Tensor x = at::randn({2, 3, c.k()}), bias = at::randn({kN});
    EXPECT_TRUE(at::equal(call_op(x, p, bias), fx::decoders::linear_weight_only(x, p, bias)));
    EXPECT_TRUE(at::equal(call_op(x, p, c10::nullopt), fx::decoders::linear_weight_only(x, p)));
    PackedWeightOnly meta = p;
    meta.data = p.data.to(at::kMeta);
    meta.scales = p.scales.to(at::kMeta);
    if (p.zeros.defined()) meta.zeros = p.zeros.to(at::kMeta);
    const at::Tensor shape = call_op(x.to(at::kMeta), meta, bias.to(at::kMeta));
    EXPECT_TRUE(shape.is_meta());
    EXPECT_EQ(shape.sizes(), (std::vector<int64_t>{2, 3, kN}));
  }
}

TEST(WeightOnly, ErrorsAreOneExactLine) {
  using fx::decoders::linear_weight_only;
  using fx::decoders::pack_weight_only;
  const at::Tensor w = at::randn({5, 128});
  expect_error([&] { pack_weight_only(w, {5, 32, true}); }, "pack_weight_only: bits is 5, expected 8 or 4");
  expect_error([&] { pack_weight_only(w, {8, 48, true}); },
               "pack_weight_only: group_size is 48, expected 0 (one scale per output channel), 32, 64 or 128");
  expect_error([&] { pack_weight_only(w, {4, 0, true}); },
               "pack_weight_only: int4 needs a group_size of 32, 64 or 128, got 0 (per channel)");
  expect_error([&] { pack_weight_only(at::randn({5, 100}), {8, 64, true}); },
               "pack_weight_only: group_size 64 does not divide in_features 100");
  expect_error([&] { pack_weight_only(at::Tensor(), {}); }, "pack_weight_only: weight is undefined");
  expect_error([&] { pack_weight_only(at::ones({5, 128}, at::kLong), {}); },
               "pack_weight_only: weight is Long, expected a floating dtype");
  expect_error([&] { pack_weight_only(at::randn({2, 3, 4}), {}); },
               "pack_weight_only: weight has shape [2, 3, 4], expected [out_features, in_features >= 1]");
  at::Tensor nan = w.clone();
  nan[1][7] = std::numeric_limits<float>::quiet_NaN();
  expect_error([&] { pack_weight_only(nan, {}); }, "pack_weight_only: weight's row 1 has a non-finite value");

  const PackedWeightOnly p = pack_weight_only(w, {4, 32, true});
  expect_error([&] { linear_weight_only(at::randn({3, 100}), p); },
               "linear_weight_only: x's last dimension is 100, the weight's in_features 128");
  expect_error([&] { linear_weight_only(at::ones({3, 128}, at::kLong), p); },
               "linear_weight_only: x is Long, expected a floating dtype");
  expect_error([&] { linear_weight_only(at::Tensor(), p); }, "linear_weight_only: x is undefined");
  expect_error([&] { linear_weight_only(at::randn({}), p); }, "linear_weight_only: x is a scalar, expected [..., 128]");
  expect_error([&] { linear_weight_only(at::randn({128}), p, at::randn({3})); },
               "linear_weight_only: bias is Float [3], expected a floating [5]");
  PackedWeightOnly bad = p;
  bad.data = at::Tensor();
  expect_error([&] { linear_weight_only(at::randn({128}), bad); },
               "linear_weight_only: the packed weight's data is undefined");
  bad = p;
  bad.scales = at::ones({5, 2});
  expect_error([&] { linear_weight_only(at::randn({128}), bad); },
               "linear_weight_only: the packed weight's scales is Float [5, 2], expected Float [5, 4]");
  bad = p;
  bad.data = p.data.to(at::kChar);
  expect_error([&] { linear_weight_only(at::randn({128}), bad); },
               "linear_weight_only: the packed weight's data is Char [5, 64], expected Byte [5, 64]");
  bad = p;
  bad.zeros = at::zeros({5, 4});
  expect_error([&] { fx::decoders::dequantize_weight_only(bad); },
               "dequantize_weight_only: the scheme is symmetric but zeros is defined");
  bad = p;
  bad.scheme.symmetric = false;
  expect_error([&] { linear_weight_only(at::randn({128}), bad); },
               "linear_weight_only: the scheme is asymmetric but zeros is undefined");
  bad = p;
  bad.in_features = 0;
  expect_error([&] { linear_weight_only(at::randn({128}), bad); },
               "linear_weight_only: the packed weight is 5 x 0, expected in_features >= 1");
  expect_error([&] { fx::decoders::weight_only_kernel(3); }, "weight_only_kernel: bits is 3, expected 8 or 4");
  expect_error([&] { fx::decoders::detail::linear_weight_only_with("sse", at::randn({128}), p); },
               "linear_weight_only_with: unknown kernel 'sse', expected avx512-vnni, avx512-vnni-gemm, avx2 or scalar");
  // Through the operator: the same lines.
  PackedWeightOnly three = p;
  three.scheme.bits = 3;
  expect_error([&] { call_op(at::randn({128}), three, c10::nullopt); },
               "linear_weight_only: bits is 3, expected 8 or 4");
  expect_error([&] { call_op(at::randn({64}), p, c10::nullopt); },
               "linear_weight_only: x's last dimension is 64, the weight's in_features 128");
}

// Packed weights a GEMV streams lie on 2 MB boundaries from 2 MB on (transparent huge pages where
// the system grants them), smaller ones where at::empty puts them; the values are the packer's.
TEST(WeightOnly, PackedWeightsFromTwoMegabytesAreHugePageAligned) {
  const at::Tensor big = fx::decoders::detail::weight_stream_empty({3, 1 << 20}, at::kByte);
  EXPECT_EQ(big.sizes(), (std::vector<int64_t>{3, 1 << 20}));
  EXPECT_EQ(big.scalar_type(), at::kByte);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % (uintptr_t{2} << 20), 0u);
  big.fill_(7);
  EXPECT_EQ(big.sum().item<int64_t>(), int64_t{7} * 3 * (1 << 20));
  at::manual_seed(3);
  const at::Tensor w = at::randn({2048, 2048});
  const PackedWeightOnly p = fx::decoders::pack_weight_only(w, {8, 0, true});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data.data_ptr()) % (uintptr_t{2} << 20), 0u);
  const at::Tensor x = at::randn({1, 2048});
  EXPECT_TRUE(at::equal(fx::decoders::linear_weight_only(x, p),
                        fx::decoders::linear_weight_only(x, fx::decoders::pack_weight_only(w.clone(), {8, 0, true}))));
  const at::Tensor tolerance = 0.02 * at::matmul(x.abs(), w.abs().t()) + 1e-3;
  EXPECT_LE(((fx::decoders::linear_weight_only(x, p) - at::matmul(x, w.t())).abs() - tolerance).max().item<double>(), 0.0);
}

}  // namespace weight_only_test
