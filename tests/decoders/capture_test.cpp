// fx::decoders::capture: the LLaMA fixture as one graph (T dynamic) whose
// caches are the model's buffers updated in place; generate on the graph,
// plain and optimised, equals eager and Hugging Face's greedy tokens, and
// the convention is checked on any graph in one line.
#include <fx/decoders/capture.h>
#include <fx/decoders/passes.h>
#include <fx/onednn.h>
#include <fx/graph.h>
#include <fx/tensor_file.h>

#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>

namespace capture_test {

using fx::decoders::GenerateOptions;

struct Loaded {
  fx::decoders::LlamaForCausalLM model;
  std::vector<int64_t> prompt, greedy;
  at::Tensor logits;  ///< Hugging Face's logits of the prompt
};

Loaded load(int64_t max_batch = 1) {
  const std::string dir = fx_test::llama_fixture("f32", "");
  const fx_test::LlamaExpected e = fx_test::llama_expected(dir);
  return {fx::decoders::load_llama(dir, {max_batch, 64}), e.prompt, e.greedy, e.logits};
}

using fx_test::count_calls;

using fx_test::error_of;

TEST(DecoderCapture, OneGraphWhoseCachesAreTheModelsBuffersWrittenInPlace) {
  Loaded l = load();
  auto gm = fx::decoders::capture(l.model);
  const auto s = fx::decoders::check_decoder(*gm);
  const int64_t layers = l.model->config().num_hidden_layers;
  ASSERT_EQ(s.caches.size(), static_cast<size_t>(2 * layers));
  EXPECT_EQ(s.caches[0], "model.layers.0.self_attn.k_cache");
  EXPECT_EQ(s.caches[1], "model.layers.0.self_attn.v_cache");
  EXPECT_EQ(s.max_batch, 1);
  EXPECT_EQ(s.max_seq, 64);
  EXPECT_EQ(s.vocab_size, l.model->config().vocab_size);
  EXPECT_EQ(count_calls(gm->graph(), "aten::index_copy_"), static_cast<size_t>(2 * layers));
  // The graph's caches are the model's (shared, not copied): the update is in place.
  EXPECT_TRUE(gm->fetch_attr(s.caches[0]).is_same(l.model->model->layers[0]->as<fx::decoders::LlamaDecoderLayer>()
                                                      ->self_attn->k_cache));
  // T is dynamic: the sizes are read from the tokens (aten::size.int), not baked in.
  EXPECT_GE(count_calls(gm->graph(), "aten::size.int"), 1u);
  // Prefill logits equal Hugging Face's, then every decode step equals eager's.
  at::NoGradGuard no_grad;
  const at::Tensor tokens = torch::tensor(l.prompt).unsqueeze(0);
  const int64_t t = tokens.size(1);
  const at::Tensor logits = gm->forward({tokens, torch::arange(t)}).toTensor();
  const double scale = l.logits.abs().max().item<double>();
  EXPECT_LT((logits - l.logits).abs().max().item<double>(), 1e-4 * scale);
  auto eager = load();
  eager.model->forward(tokens, torch::arange(t));
  for (int64_t i = 0; i < 8; ++i) {
    const at::Tensor next = torch::tensor({l.greedy[i]}).unsqueeze(0), pos = torch::tensor({t + i});
    const at::Tensor a = gm->forward({next, pos}).toTensor(), b = eager.model->forward(next, pos);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5 * scale) << "step " << i;
  }
}

TEST(DecoderCapture, GenerateOnTheGraphPlainAndOptimisedEqualsHuggingFacesGreedy) {
  Loaded l = load();
  GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(l.greedy.size());
  auto gm = fx::decoders::capture(l.model);
  EXPECT_EQ(fx::decoders::generate(gm, l.prompt, o).tokens, l.greedy);
  fx::OptimizeReport report;
  fx::decoders::DecoderPassReport passes;
  auto fast = fx::decoders::optimize_decoder(gm, {}, &report, &passes);
  const int64_t layers = l.model->config().num_hidden_layers;
  // CSEPass: one causal mask (arange, unsqueeze, le, logical_not) for every layer's attention.
  EXPECT_EQ(count_calls(gm->graph(), "aten::logical_not"), static_cast<size_t>(layers));
  EXPECT_EQ(count_calls(fast->graph(), "aten::logical_not"), 1u);
  EXPECT_GE(passes.merged_duplicates, static_cast<size_t>(4 * (layers - 1)));
  EXPECT_EQ(report.onednn_linears, static_cast<size_t>(7 * layers + 1));  // q k v o gate up down, lm_head
  EXPECT_EQ(count_calls(fast->graph(), "aten::index_copy_"), static_cast<size_t>(2 * layers));
  EXPECT_EQ(fx::decoders::generate(fast, l.prompt, o).tokens, l.greedy);
  // Twice: the caches are reset between sequences.
  EXPECT_EQ(fx::decoders::generate(fast, l.prompt, o).tokens, l.greedy);
  // With the cache equals without it: the whole prefix again at every step (the reference's greedy ids).
  EXPECT_GE(std::set<int64_t>(l.greedy.begin(), l.greedy.end()).size(), 4u);  // the greedy output varies
}

namespace {
std::vector<const void*>* g_packed = nullptr;
fx::onednn::WeightsPackedHook g_next = nullptr;
void record_packed(const at::Tensor& plain) {
  g_packed->push_back(plain.data_ptr());
  g_next(plain);
}
}  // namespace

// The float checkpoint's weights lie in the file's mapping: fxcpp_decoders
// hooks the oneDNN kernels so that each weight, once packed, hands its pages
// back (fx::release_mapped_pages) as the kernels are made, layer by layer:
// every linear layer's weight reaches the hook, the checkpoint's own tensor.
TEST(DecoderCapture, EachPackedFloatWeightIsHandedToTheReleaseHook) {
  Loaded l = load();
  std::vector<const void*> packed;
  g_packed = &packed;
  g_next = fx::onednn::set_weights_packed_hook(&record_packed);
  ASSERT_NE(g_next, nullptr);  // the library's (release_mapped_pages)
  auto fast = fx::decoders::optimize_decoder(fx::decoders::capture(l.model));
  GenerateOptions o;
  o.max_new_tokens = 2;
  const auto tokens = fx::decoders::generate(fast, l.prompt, o).tokens;
  EXPECT_EQ(fx::onednn::set_weights_packed_hook(g_next), &record_packed);
  const int64_t layers = l.model->config().num_hidden_layers;
  if (fx::onednn::has_avx512_core()) {
    ASSERT_EQ(packed.size(), static_cast<size_t>(7 * layers + 1));
    EXPECT_NE(std::find(packed.begin(), packed.end(), l.model->lm_head->weight.data_ptr()), packed.end());
  } else {  // below AVX-512 the packed GEMM keeps the plain weights: a decoded token's GEMVs read them
    EXPECT_TRUE(packed.empty());
  }
  EXPECT_EQ(tokens, std::vector<int64_t>(l.greedy.begin(), l.greedy.begin() + 2));
}

// keep_last_logits: the optimised head (oneDNN's linear) runs on the last
// position only; the prompt's logits are [1, 1, V], the full graph's last
// row, and generate's tokens are unchanged.
TEST(DecoderCapture, KeepLastLogitsSlicesTheHeadsInput) {
  Loaded l = load();
  auto gm = fx::decoders::capture(l.model);
  auto full = fx::decoders::optimize_decoder(gm);
  auto last = fx::decoders::optimize_decoder(gm);
  EXPECT_EQ(fx::decoders::keep_last_logits(*last), 1u);
  EXPECT_EQ(fx::decoders::keep_last_logits(*last), 0u);  // sliced already
  EXPECT_EQ(count_calls(last->graph(), "aten::slice.Tensor"), count_calls(full->graph(), "aten::slice.Tensor") + 1);
  const fx::Node* head = last->graph().output_node()->args()[0].to_node();
  EXPECT_EQ(head->target(), "fxcpp::onednn_linear");
  EXPECT_EQ(head->args()[0].to_node()->target(), "aten::slice.Tensor");
  at::NoGradGuard no_grad;
  const at::Tensor tokens = torch::tensor(l.prompt).unsqueeze(0);
  const int64_t t = tokens.size(1);
  fx::decoders::reset_cache(*full);
  const at::Tensor want = full->forward({tokens, torch::arange(t)}).toTensor();
  fx::decoders::reset_cache(*last);
  const at::Tensor got = last->forward({tokens, torch::arange(t)}).toTensor();
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, 1, want.size(2)}));
  EXPECT_LT((got[0][0] - want[0][t - 1]).abs().max().item<double>(), 1e-5 * want.abs().max().item<double>());
  GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(l.greedy.size());
  EXPECT_EQ(fx::decoders::generate(last, l.prompt, o).tokens, l.greedy);
}

TEST(DecoderCapture, CallsBreakingTheConventionAreOneLine) {
  Loaded l = load();
  auto step = fx::decoders::decoder_step(fx::decoders::capture(l.model));
  EXPECT_EQ(error_of([&] { step(torch::zeros({1, 2}), torch::arange(2)); }),
            "decoder(tokens, input_pos): tokens must be int64 [B, T], not Float [1, 2]");
  EXPECT_EQ(error_of([&] { step(torch::zeros({1, 2}, torch::kLong), torch::arange(3)); }),
            "decoder(tokens, input_pos): input_pos must be int64 [T] with T = 2, not Long [3]");
  EXPECT_EQ(error_of([&] { step(torch::zeros({2, 2}, torch::kLong), torch::arange(2)); }),
            "decoder(tokens, input_pos): 2 sequences, the graph was captured for 1");
  EXPECT_EQ(error_of([&] { step(torch::zeros({1, 2}, torch::kLong), torch::arange(63, 65)); }),
            "decoder(tokens, input_pos): positions 63 to 64 are outside the cache's 0 to 63");
  const int64_t v = l.model->config().vocab_size;
  EXPECT_EQ(error_of([&] { step(torch::full({1, 1}, v, torch::kLong), torch::arange(1)); }),
            "decoder(tokens, input_pos): token ids " + std::to_string(v) + " to " + std::to_string(v) +
                " are outside the vocabulary's 0 to " + std::to_string(v - 1));
}

TEST(DecoderCapture, GraphsBreakingTheConventionAreRefusedInOneLine) {
  // A graph of one input.
  auto g = std::make_shared<fx::Graph>();
  fx::Node* x = g->placeholder("x");
  g->output(x);
  auto one_input = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g);
  EXPECT_EQ(error_of([&] { fx::decoders::check_decoder(*one_input); }),
            "decoder convention: the graph takes 1 inputs, a decoder 2 (tokens int64 [B, T], input_pos int64 [T])");
  // Two inputs, no cache.
  auto g2 = std::make_shared<fx::Graph>();
  fx::Node* tokens = g2->placeholder("tokens");
  g2->placeholder("input_pos");
  g2->output(tokens);
  auto no_cache = std::make_shared<fx::GraphModule>(std::make_shared<torch::nn::Module>(), g2);
  EXPECT_EQ(error_of([&] { fx::decoders::generate(no_cache, {1, 2}, {}); }),
            "decoder convention: the graph writes no cache in place at input_pos (a buffer updated by "
            "aten::index_copy_, aten::index_put_ or x[:, :, input_pos] = v with the second input as the index)");
  // A model captured for two sequences: generate decodes one.
  Loaded two = load(2);
  EXPECT_EQ(error_of([&] { fx::decoders::generate(fx::decoders::capture(two.model), two.prompt, {}); }),
            "generate: the decoder graph was captured for 2 sequences; generate decodes one (capture with max_batch 1)");
}

}  // namespace capture_test
