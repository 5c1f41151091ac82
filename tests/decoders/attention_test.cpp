// fxcpp::decoder_attention against HF's arithmetic (repeat_interleave,
// matmul, masked softmax, matmul), and fuse_attention on the captured LLaMA
// fixture: proven where it fires (one node per layer, the pattern gone) and
// decoding Hugging Face's greedy tokens.
#include <fx/decoders/capture.h>
#include <fx/decoders/passes.h>
#include <fx/graph.h>
#include <fx/tensor_file.h>

#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace attention_test {

/// HF's attention: the cache repeated per query head, every position scored, the hidden ones -inf.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                     double scale) {
  const int64_t rep = q.size(1) / k.size(1);
  const at::Tensor keys = k.repeat_interleave(rep, 1), values = v.repeat_interleave(rep, 1);
  const at::Tensor scores = (at::matmul(q, keys.transpose(2, 3)) * scale).masked_fill(mask, -INFINITY);
  return at::matmul(at::softmax(scores, -1), values);
}

using fx_test::count_calls;

TEST(DecoderAttention, EqualsTheRepeatedCachesMaskedSoftmax) {
  torch::manual_seed(0);
  for (int64_t d : {64, 20}) {
    for (int64_t t : {1, 5}) {
      SCOPED_TRACE(c10::str("head_dim ", d, ", T ", t));
      const int64_t s = 37, first = 9;  // positions first .. first + t - 1 of a 37-position cache
      const at::Tensor q = torch::randn({2, 8, t, d}), k = torch::randn({2, 2, s, d}), v = torch::randn({2, 2, s, d});
      const at::Tensor pos = torch::arange(first, first + t);
      const at::Tensor mask = torch::arange(s).unsqueeze(0).gt(pos.unsqueeze(1));  // hidden: after the query
      const double scale = 1 / std::sqrt(static_cast<double>(d));
      const at::Tensor expected = reference(q, k, v, mask, scale);
      const at::Tensor got = fx::decoders::decoder_attention(q, k, v, mask, scale);
      EXPECT_LT((got - expected).abs().max().item<double>(), 1e-5 * expected.abs().max().item<double>());
      // Hidden positions are never read: NaN there changes nothing.
      at::Tensor k_nan = k.clone(), v_nan = v.clone();
      k_nan.narrow(2, first + t, s - first - t).fill_(NAN);
      v_nan.narrow(2, first + t, s - first - t).fill_(NAN);
      EXPECT_TRUE(at::equal(fx::decoders::decoder_attention(q, k_nan, v_nan, mask, scale), got));
    }
  }
  // Every position hidden: NaN, as softmax over -inf.
  const at::Tensor q = torch::randn({1, 2, 1, 16}), k = torch::randn({1, 1, 4, 16});
  EXPECT_TRUE(fx::decoders::decoder_attention(q, k, k, torch::ones({1, 4}, torch::kBool), 0.25).isnan().all().item<bool>());
  const std::string kernel = fx::decoders::decoder_attention_kernel();
  EXPECT_TRUE(kernel == "avx512" || kernel == "avx2" || kernel == "plain") << kernel;
}

TEST(DecoderAttention, BadShapesAreOneLine) {
  const at::Tensor q = torch::zeros({1, 4, 2, 8}), k = torch::zeros({1, 2, 6, 8});
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::decoder_attention(q[0], k, k, torch::zeros({2, 6}, torch::kBool), 1); }),
            "decoder_attention: q, k and v must be [B, heads, T, D], [B, kv_heads, S, D], not Float [4, 2, 8], "
            "Float [1, 2, 6, 8], Float [1, 2, 6, 8]");
  EXPECT_EQ(fx_test::error_of([&] {
              fx::decoders::decoder_attention(q, torch::zeros({1, 3, 6, 8}), torch::zeros({1, 3, 6, 8}),
                                              torch::zeros({2, 6}, torch::kBool), 1);
            }),
            "decoder_attention: k and v must be [1, kv_heads dividing 4, S, 8], not Float [1, 3, 6, 8], Float [1, 3, 6, 8]");
  EXPECT_EQ(fx_test::error_of([&] { fx::decoders::decoder_attention(q, k, k, torch::zeros({2, 5}, torch::kBool), 1); }),
            "decoder_attention: the mask must be bool [2, 6] (true: hidden), not Bool [2, 5]");
}

TEST(FuseAttention, OneKernelPerLayerAndHuggingFacesGreedyTokens) {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const auto [prompt, greedy, logits] = fx_test::llama_expected(dir);
  auto model = fx::decoders::load_llama(dir, {1, 64});
  const size_t layers = static_cast<size_t>(model->config().num_hidden_layers);
  auto gm = fx::decoders::capture(model);
  ASSERT_EQ(count_calls(gm->graph(), "aten::softmax.int"), layers);
  const size_t rep = count_calls(gm->graph(), "aten::repeat_interleave.self_int");
  EXPECT_EQ(rep, 2 * layers);  // the fixture's heads are grouped: 4 query heads, 2 key / value heads
  EXPECT_EQ(fx::decoders::fuse_attention(*gm), layers);
  EXPECT_EQ(count_calls(gm->graph(), "fxcpp::decoder_attention"), layers);
  for (const char* gone : {"aten::softmax.int", "aten::repeat_interleave.self_int", "aten::masked_fill.Scalar",
                           "aten::matmul"})
    EXPECT_EQ(count_calls(gm->graph(), gone), 0u) << gone;
  EXPECT_EQ(fx::decoders::fuse_attention(*gm), 0u);  // nothing left to fuse
  fx::decoders::GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(greedy.size());
  EXPECT_EQ(fx::decoders::generate(gm, prompt, o).tokens, greedy);
  // optimize_decoder runs it.
  fx::decoders::DecoderPassReport passes;
  auto fast = fx::decoders::optimize_decoder(fx::decoders::capture(model), {}, nullptr, &passes);
  EXPECT_EQ(passes.fused_attention, layers);
  EXPECT_EQ(count_calls(fast->graph(), "fxcpp::decoder_attention"), layers);
  EXPECT_EQ(fx::decoders::generate(fast, prompt, o).tokens, greedy);
}

}  // namespace attention_test
