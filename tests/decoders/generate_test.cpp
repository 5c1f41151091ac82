// fx::decoders::generate on the LLaMA fixture (make_llama_fixture.py):
// greedy equals Hugging Face's greedy tokens, sampling is seeded, stop ids,
// the callback, the budget; next_token_probabilities as HF's processors.
#include <fx/decoders/generate.h>
#include <fx/tensor_file.h>

#include "fx_paths.h"
#include "llama_fixture.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using fx::decoders::GenerateOptions;

/// The float32 fixture of llama_test.cpp.
std::string fixture() { return fx_test::llama_fixture("f32", ""); }

struct Loaded {
  fx::decoders::LlamaForCausalLM model;
  std::vector<int64_t> prompt, greedy;
};

Loaded load() {
  const std::string dir = fixture();
  const fx_test::LlamaExpected e = fx_test::llama_expected(dir);
  return {fx::decoders::load_llama(dir, {1, 64}), e.prompt, e.greedy};
}

TEST(Generate, GreedyEqualsHuggingFacesAndStreamsEachToken) {
  Loaded l = load();
  GenerateOptions o;
  o.max_new_tokens = static_cast<int64_t>(l.greedy.size());
  std::vector<int64_t> streamed;
  o.on_token = [&](int64_t t) {
    streamed.push_back(t);
    return true;
  };
  const auto r = fx::decoders::generate(l.model, l.prompt, o);
  EXPECT_EQ(r.tokens, l.greedy);
  EXPECT_EQ(streamed, l.greedy);
  EXPECT_FALSE(r.stopped);
  EXPECT_GT(r.prefill_seconds, 0);
  // top_k 1 samples the greedy token.
  o.temperature = 1.0;
  o.top_k = 1;
  o.on_token = nullptr;
  EXPECT_EQ(fx::decoders::generate(l.model, l.prompt, o).tokens, l.greedy);
}

TEST(Generate, StopIdsTheCallbackAndTheBudget) {
  Loaded l = load();
  // The first greedy token not seen before it stops generation there.
  size_t k = 1;
  while (std::find(l.greedy.begin(), l.greedy.begin() + static_cast<std::ptrdiff_t>(k), l.greedy[k]) !=
         l.greedy.begin() + static_cast<std::ptrdiff_t>(k))
    ++k;
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.stop_ids = {l.greedy[k]};
  auto r = fx::decoders::generate(l.model, l.prompt, o);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.tokens, std::vector<int64_t>(l.greedy.begin(), l.greedy.begin() + static_cast<std::ptrdiff_t>(k) + 1));
  o.stop_ids.clear();
  int calls = 0;
  o.on_token = [&](int64_t) { return ++calls < 5; };
  EXPECT_EQ(fx::decoders::generate(l.model, l.prompt, o).tokens.size(), 5u);
  o.on_token = nullptr;
  o.max_new_tokens = 60;  // 16 + 60 - 1 positions > 64
  try {
    fx::decoders::generate(l.model, l.prompt, o);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "generate: a prompt of 16 tokens and 60 new ones need 75 positions, the decoder has 64");
  }
  o.max_new_tokens = 49;  // exactly 64 positions
  EXPECT_EQ(fx::decoders::generate(l.model, l.prompt, o).tokens.size(), 49u);
  try {
    fx::decoders::generate(l.model, {}, o);
    FAIL() << "no error";
  } catch (const fx::Error& e) {
    EXPECT_STREQ(e.what(), "generate: the prompt is empty");
  }
}

TEST(Generate, SamplingIsSeeded) {
  Loaded l = load();
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.temperature = 0.9;
  o.top_k = 40;
  o.top_p = 0.95;
  o.repetition_penalty = 1.1;
  o.seed = 7;
  const auto a = fx::decoders::generate(l.model, l.prompt, o), b = fx::decoders::generate(l.model, l.prompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.seed = 8;
  EXPECT_NE(fx::decoders::generate(l.model, l.prompt, o).tokens, a.tokens);
  EXPECT_NE(a.tokens, l.greedy);
}

TEST(Generate, NextTokenProbabilitiesAsHuggingFacesProcessors) {
  GenerateOptions o;
  // Repetition penalty 4 on tokens 0 and 1: [2, -2, 1, 0.5] -> [0.5, -8, 1, 0.5]; greedy picks 2.
  o.repetition_penalty = 4;
  EXPECT_TRUE(at::equal(fx::decoders::next_token_probabilities(torch::tensor({2.f, -2.f, 1.f, 0.5f}), {0, 1, 0}, o),
                        torch::tensor({0.f, 0.f, 1.f, 0.f})));
  o.repetition_penalty = 1;
  o.temperature = 1;
  o.top_p = 0.7;  // softmax [0.644, 0.237, 0.087, 0.032]: the two least likely add up to 0.119 <= 0.3
  const at::Tensor p = fx::decoders::next_token_probabilities(torch::tensor({3.f, 2.f, 1.f, 0.f}), {}, o);
  const at::Tensor want = torch::softmax(torch::tensor({3.f, 2.f}), 0);
  EXPECT_TRUE(at::allclose(p.narrow(0, 0, 2), want));
  EXPECT_EQ(p[2].item<float>(), 0.f);
  EXPECT_EQ(p[3].item<float>(), 0.f);
  o.top_p = 1;
  o.top_k = 2;
  o.temperature = 2;
  EXPECT_TRUE(at::allclose(fx::decoders::next_token_probabilities(torch::tensor({3.f, 2.f, 1.f, 0.f}), {}, o),
                           torch::cat({torch::softmax(torch::tensor({1.5f, 1.f}), 0), torch::zeros({2})})));
}

}  // namespace
