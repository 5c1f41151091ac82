// fxcpp::rms_norm, rotary_embedding and silu_mul against HF's arithmetic in
// ATen, and their passes on the captured LLaMA fixture: proven where they
// fire (the counts, the patterns gone) and decoding Hugging Face's greedy tokens.
#include <fx/decoders/capture.h>
#include <fx/decoders/passes.h>
#include <fx/graph.h>
#include <fx/tensor_file.h>

#include "decoders/vec_exp.h"
#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace pointwise_test {

using fx_test::count_calls;

double relative(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

TEST(DecoderPointwise, KernelsEqualHuggingFacesArithmetic) {
  torch::manual_seed(0);
  for (int64_t h : {64, 37}) {
    const at::Tensor x = torch::randn({2, 3, h}) * 3, w = torch::randn({h});
    const at::Tensor expected = w * (x * (x.pow(2).mean(-1, true) + 1e-5).rsqrt());
    EXPECT_LT(relative(fx::decoders::rms_norm(x, w, 1e-5), expected), 1e-6) << h;
  }
  // A transposed view, as the projections' [B, T, heads, D] -> [B, heads, T, D].
  const at::Tensor q = torch::randn({1, 5, 4, 16}).transpose(1, 2), cos = torch::randn({5, 16}), sin = torch::randn({5, 16});
  const at::Tensor rotated = torch::cat({-q.narrow(-1, 8, 8), q.narrow(-1, 0, 8)}, -1);
  EXPECT_LT(relative(fx::decoders::rotary_embedding(q, cos, sin), q * cos + rotated * sin), 1e-6);
  const at::Tensor g = torch::randn({3, 41}) * 4, u = torch::randn({3, 41});
  EXPECT_LT(relative(fx::decoders::silu_mul(g, u), torch::silu(g) * u), 1e-6);
  // The two halves of one GEMM's output (merge_projections' gate / up), read in place, and a
  // transposed view, made contiguous first.
  const at::Tensor gate_up = torch::randn({2, 3, 2 * 41}) * 4;
  const at::Tensor gh = gate_up.narrow(-1, 0, 41), uh = gate_up.narrow(-1, 41, 41);
  EXPECT_LT(relative(fx::decoders::silu_mul(gh, uh), torch::silu(gh) * uh), 1e-6);
  EXPECT_LT(relative(fx::decoders::silu_mul(g.t(), u.t()), torch::silu(g.t()) * u.t()), 1e-6);
  EXPECT_TRUE(at::equal(fx::decoders::silu_mul(gh, uh), fx::decoders::silu_mul(gh.contiguous(), uh.contiguous())));
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::rms_norm(torch::zeros({2, 8}), torch::zeros({4}), 1e-5); }),
            "rms_norm: the weight must be [8] for x Float [2, 8], not Float [4]");
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::rotary_embedding(q, cos.narrow(0, 0, 4), sin); }),
            "rotary_embedding: x must be [B, heads, T, D] (D even) and cos, sin [T, D], not Float [1, 4, 5, 16], "
            "Float [4, 16], Float [5, 16]");
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::silu_mul(g, u.t()); }),
            "silu_mul: gate and up must have one shape, not Float [3, 41] and Float [41, 3]");
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::silu_mul(g.to(torch::kDouble), u); }),
            "silu_mul: expected float32 tensors, got Double [3, 41]");
}

/// exp_avx512 / exp_avx2 (vec_exp.h) over `x`, 16 values a call.
std::vector<float> vector_exp(fx::decoders::detail::DecoderIsa isa, const std::vector<float>& x);

__attribute__((target("avx512f"))) void exp16_avx512(const float* x, float* y) {
  _mm512_storeu_ps(y, fx::decoders::detail::exp_avx512(_mm512_loadu_ps(x)));
}

__attribute__((target("avx2,fma"))) void exp16_avx2(const float* x, float* y) {
  _mm256_storeu_ps(y, fx::decoders::detail::exp_avx2(_mm256_loadu_ps(x)));
  _mm256_storeu_ps(y + 8, fx::decoders::detail::exp_avx2(_mm256_loadu_ps(x + 8)));
}

std::vector<float> vector_exp(fx::decoders::detail::DecoderIsa isa, const std::vector<float>& x) {
  std::vector<float> in = x, out(x.size() + 16);
  in.resize(x.size() + 16, 0.f);
  for (size_t i = 0; i < x.size(); i += 16)
    (isa == fx::decoders::detail::DecoderIsa::Avx512 ? exp16_avx512 : exp16_avx2)(in.data() + i, out.data() + i);
  out.resize(x.size());
  return out;
}

// The decoder's vector exp (attention's softmax, SiLU) on every path this CPU has, against libm:
// within 2 ulp where the result is a normal float, 0 below it, inf above, NaN kept.
TEST(DecoderPointwise, VectorExpIsLibmsWithinTwoUlp) {
  using fx::decoders::detail::DecoderIsa;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x;
  for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 4.4e-4f);  // -88 .. 88, every step
  for (float v : {0.f, -0.f, 1e-30f, -1e-30f, -87.3f, -87.4f, -100.f, -1e30f, 88.7f, 88.8f, 1e30f, inf, -inf, nan})
    x.push_back(v);
  std::vector<DecoderIsa> paths;
  if (__builtin_cpu_supports("avx512f")) paths.push_back(DecoderIsa::Avx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) paths.push_back(DecoderIsa::Avx2);
  for (DecoderIsa isa : paths) {
    SCOPED_TRACE(isa == DecoderIsa::Avx512 ? "avx512" : "avx2");
    const std::vector<float> y = vector_exp(isa, x);
    int bad = 0;
    for (size_t i = 0; i < x.size() && bad < 5; ++i) {
      const float want = std::exp(x[i]);
      const bool ok = std::isnan(x[i])         ? std::isnan(y[i])
                      : x[i] < -87.3365447f ? y[i] == 0.f
                      : x[i] > 88.7228391f  ? y[i] == inf
                                            : std::fabs(y[i] - want) <= 2 * (std::nextafter(want, inf) - want);
      if (!ok) ++bad;
      EXPECT_TRUE(ok) << "exp(" << x[i] << ") = " << y[i] << ", libm " << want;
    }
  }
  // Where ctest runs this on an emulated CPU, the kernels must have taken its path.
  if (const char* expected = std::getenv("FX_EXPECT_DECODER_KERNEL")) {
    EXPECT_EQ(fx::decoders::decoder_attention_kernel(), expected);
  }
}

TEST(DecoderPointwise, PassesFireOnTheCapturedDecoderAndKeepItsTokens) {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const auto [prompt, greedy, logits] = fx_test::llama_expected(dir);
  auto model = fx::decoders::load_llama(dir, {1, 64});
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  auto gm = fx::decoders::capture(model);
  const size_t before = gm->graph().nodes().to_vector().size();
  EXPECT_EQ(fx::decoders::fuse_rms_norm(*gm), 2 * layers + 1);  // two per layer and the final norm
  EXPECT_EQ(fx::decoders::fuse_rotary_embedding(*gm), 2 * layers);  // queries and keys
  EXPECT_EQ(fx::decoders::fuse_silu_mul(*gm), layers);
  for (const char* gone : {"aten::rsqrt", "aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::cat", "aten::neg",
                           "aten::narrow", "aten::silu"})
    EXPECT_EQ(count_calls(gm->graph(), gone), 0u) << gone;
  EXPECT_EQ(count_calls(gm->graph(), "fxcpp::rms_norm"), 2 * layers + 1);
  EXPECT_LT(gm->graph().nodes().to_vector().size(), before - 20 * layers);
  fx::decoders::GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(greedy.size());
  EXPECT_EQ(fx::decoders::generate(gm, prompt, o).tokens, greedy);
  // Twice over, nothing more to fuse.
  EXPECT_EQ(fx::decoders::fuse_rms_norm(*gm) + fx::decoders::fuse_rotary_embedding(*gm) + fx::decoders::fuse_silu_mul(*gm),
            0u);
  fx::decoders::DecoderPassReport passes;
  auto fast = fx::decoders::optimize_decoder(fx::decoders::capture(model), {}, nullptr, &passes);
  EXPECT_EQ(passes.fused_rms_norm, 2 * layers + 1);
  EXPECT_EQ(passes.fused_rotary, 2 * layers);
  EXPECT_EQ(passes.fused_silu_mul, layers);
  EXPECT_EQ(count_calls(fast->graph(), "fxcpp::silu_mul"), layers);
  EXPECT_EQ(fx::decoders::generate(fast, prompt, o).tokens, greedy);
}

}  // namespace pointwise_test
